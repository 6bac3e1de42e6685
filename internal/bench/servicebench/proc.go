package servicebench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpunet/gpunet/internal/keys"
)

// benchPassphrase encrypts the benchmark's throwaway keyrings.
const benchPassphrase = "gpunet-bench-service"

// env is the processes' environment: this one's without GPUNET_*, with
// the keyring's passphrase and its fast test encryption.
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GPUNET_") {
			out = append(out, kv)
		}
	}
	return append(out, "GPUNET_KEYRING_PASSPHRASE="+benchPassphrase, keys.InsecureTestKeyringEnv+"=1")
}

// runJSON runs the binary to completion and decodes its JSON output
// (--output json) into v.
func runJSON(ctx context.Context, bin string, v any, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--output", "json")...)
	cmd.Env = env()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gpunet %s: %w: %s", strings.Join(args, " "), err, tail(errOut.String(), 2000))
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		return fmt.Errorf("gpunet %s: decode its output: %w: %s", strings.Join(args, " "), err, tail(out.String(), 500))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// line is one line a process wrote, with the time it was read.
type line struct {
	at   time.Time
	text string
}

// lines collects a process's output line by line, each stamped as it
// arrives (the processes log unbuffered, on the same machine).
type lines struct {
	mu      sync.Mutex
	partial []byte
	all     []line
	notify  chan struct{}
}

func newLines() *lines { return &lines{notify: make(chan struct{}, 1)} }

func (l *lines) Write(p []byte) (int, error) {
	now := time.Now()
	l.mu.Lock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.all = append(l.all, line{now, string(l.partial[:i])})
		l.partial = l.partial[i+1:]
	}
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
	return len(p), nil
}

// save writes the lines to path, each after the time it was read; a
// failure is ignored (the lines are kept for the operator only).
func (l *lines) save(path string) {
	l.mu.Lock()
	var b strings.Builder
	for _, ln := range l.all {
		fmt.Fprintf(&b, "%s %s\n", ln.at.UTC().Format("15:04:05.000"), ln.text)
	}
	l.mu.Unlock()
	os.WriteFile(path, []byte(b.String()), 0o600)
}

// find returns the time of the first line at or after since that holds
// every one of want.
func (l *lines) find(since time.Time, want ...string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ln := range l.all {
		if ln.at.Before(since) {
			continue
		}
		ok := true
		for _, w := range want {
			if !strings.Contains(ln.text, w) {
				ok = false
				break
			}
		}
		if ok {
			return ln.at, true
		}
	}
	return time.Time{}, false
}

// first returns the first line, waiting up to d.
func (l *lines) first(ctx context.Context, d time.Duration) (string, error) {
	deadline := time.After(d)
	for {
		l.mu.Lock()
		if len(l.all) > 0 {
			s := l.all[0].text
			l.mu.Unlock()
			return s, nil
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-deadline:
			return "", fmt.Errorf("no output within %s", d)
		case <-l.notify:
		}
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, ln := range l.all {
		b.WriteString(ln.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// proc is a long-running gpunet process (a node, a provider).
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr *lines
	done           chan struct{}
}

func startProc(bin, name string, args ...string) (*proc, error) {
	p := &proc{name: name, stdout: newLines(), stderr: newLines(), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env()
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// stop asks the process to stop (SIGINT), killing it after timeout.
func (p *proc) stop(timeout time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
	}
}
