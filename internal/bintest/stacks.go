package bintest

import (
	"os"
	"strings"
	"syscall"
	"time"
)

// DumpStacks asks a Go process that a test is about to kill to print every
// goroutine's stack first (SIGQUIT: the runtime writes them to its stderr
// and exits), and waits up to wait for done (closed when the process has
// exited). A test that fails because a process stopped making progress then
// shows where it stopped, not only that it did. It reports whether the
// process exited in time.
func DumpStacks(p *os.Process, done <-chan struct{}, wait time.Duration) bool {
	if p == nil || p.Signal(syscall.SIGQUIT) != nil {
		return false
	}
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// OurStacks keeps, of a Go runtime's goroutine dump in stderr, the
// goroutines with a frame of this module (github.com/gpunet/gpunet, or
// the program's package main), and
// drops the rest (the runtime's, net/http's idle connections, CometBFT's
// reactors), at most max bytes of them; "" when stderr holds no dump.
func OurStacks(stderr string, max int) string {
	i := strings.Index(stderr, "\ngoroutine ")
	if i < 0 {
		return ""
	}
	var b strings.Builder
	for _, g := range strings.Split(stderr[i+1:], "\n\n") {
		if !strings.HasPrefix(g, "goroutine ") || !(strings.Contains(g, "\ngithub.com/gpunet/gpunet/") || strings.Contains(g, "\nmain.")) {
			continue
		}
		if b.Len()+len(g) > max {
			b.WriteString("… (more goroutines cut)\n")
			break
		}
		b.WriteString(g)
		b.WriteString("\n\n")
	}
	return b.String()
}
