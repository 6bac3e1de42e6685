package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"
	"time"
)

// ErrClosed is wrapped by the error Lifecycle.Run returns once Close has
// been called.
var ErrClosed = errors.New("executor closed")

// Lifecycle is the start/stop bookkeeping every executor does: it counts
// the runs in flight, cancels them all on Close and waits for them, and
// gives each Run the same frame (a Result that starts failed, a bounded
// LogWriter, output collection by Finish). The zero value is ready; Name
// prefixes its errors ("wasm: executor closed").
type Lifecycle struct {
	Name string

	mu      sync.Mutex
	closed  bool
	closing context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup
}

func (l *Lifecycle) init() {
	if l.closing == nil {
		l.closing, l.cancel = context.WithCancel(context.Background())
	}
}

// Go runs f on a goroutine of its own that Close waits for, unless the
// executor is closed (then it reports false and does not run f).
func (l *Lifecycle) Go(f func()) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.init()
	l.running.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.running.Done()
		f()
	}()
	return true
}

// Closed reports whether Close was called.
func (l *Lifecycle) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Close cancels every run in flight (their ctx is done, so they end with
// ReasonCancelled), waits for them and for what Go started, and reports
// whether this was the first call: the caller releases its resources then.
func (l *Lifecycle) Close() bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	l.init()
	l.mu.Unlock()
	l.cancel()
	l.running.Wait()
	return true
}

// Run is the frame of an Executor.Run: it registers the run (an error
// wrapping ErrClosed after Close), makes ctx end on Close too, calls run
// with a Result that has ExitCode -1 and Started set, and the job's log
// output bounded at DefaultLogBytes, then collects the outputs (Finish).
// run fills in the Result and returns an error only for a failure on the
// provider's side, which Run returns as is.
func (l *Lifecycle) Run(ctx context.Context, job *Job, logs io.Writer, run func(ctx context.Context, logs *LogWriter, res *Result) error) (*Result, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", l.Name, ErrClosed)
	}
	l.init()
	l.running.Add(1)
	closing := l.closing
	l.mu.Unlock()
	defer l.running.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(closing, cancel)()

	res := &Result{ExitCode: -1, Started: time.Now()}
	if err := run(ctx, NewLogWriter(logs, DefaultLogBytes), res); err != nil {
		return nil, err
	}
	if err := Finish(job, res); err != nil {
		return nil, err
	}
	return res, nil
}

// OutputDirs are the directories an executor creates in a job's work
// directory before it starts, so that the job can write its outputs: the
// directory each output is in, or the output itself when it is at the top
// (for outputs [/out/model, /tmp2] they are /out and /tmp2). Outputs that
// CleanGuestPath refuses are left out, and so is "/".
func OutputDirs(outputs []string) []string {
	var dirs []string
	seen := map[string]bool{}
	for _, o := range outputs {
		c, err := CleanGuestPath(o)
		if err != nil || c == "/" {
			continue
		}
		d := path.Dir(c)
		if d == "/" {
			d = c // a top-level output is a directory the job writes into
		}
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	return dirs
}
