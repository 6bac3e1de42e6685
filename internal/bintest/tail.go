package bintest

import (
	"runtime"
	"sync"
)

// Tail is an io.Writer, safe for concurrent use, that keeps the last Max
// bytes written to it: the log of in-process nodes and agents a test shows
// when it fails, bounded however long the test ran.
type Tail struct {
	Max int
	mu  sync.Mutex
	b   []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.Max; t.Max > 0 && over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String is what the tail holds now.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// InProcessStacks is OurStacks of this process's own goroutines: where the
// in-process nodes and agents of a failed test were stuck.
func InProcessStacks(max int) string {
	buf := make([]byte, 8<<20)
	n := runtime.Stack(buf, true)
	return OurStacks("\n"+string(buf[:n]), max)
}
