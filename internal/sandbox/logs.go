package sandbox

import (
	"fmt"
	"io"
	"sync"
)

// DefaultLogBytes is how much of a job's stdout and stderr executors pass
// on before dropping the rest.
const DefaultLogBytes = 16 << 20

// LogWriter passes a job's output on to the caller's writer. It is safe
// for concurrent use (stdout and stderr may be written from different
// goroutines), passes on at most a fixed number of bytes and then a single
// note saying the rest was dropped, and never fails the job: it always
// reports the whole write as done, and stops writing to a destination that
// returned an error.
type LogWriter struct {
	mu      sync.Mutex
	w       io.Writer
	max     int64
	written int64
	dropped int64
	noted   bool
	err     error
}

// NewLogWriter returns a LogWriter passing at most max bytes on to w (nil:
// discard).
func NewLogWriter(w io.Writer, max int64) *LogWriter {
	if w == nil {
		w = io.Discard
	}
	return &LogWriter{w: w, max: max}
}

// Write implements io.Writer; it always returns len(p), nil.
func (l *LogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := int64(len(p))
	if room := l.max - l.written; room > 0 {
		q := p[:min(n, room)]
		l.written += int64(len(q))
		l.dropped += n - int64(len(q))
		l.write(q)
	} else {
		l.dropped += n
	}
	if l.dropped > 0 && !l.noted {
		l.noted = true
		l.write(fmt.Appendf(nil, "\n[gpunet: log output reached %s; the rest is dropped]\n", FormatBytes(uint64(l.max))))
	}
	return len(p), nil
}

// Notef writes a line from the executor itself (e.g. a trap's stack trace),
// within the same limit as the job's output.
func (l *LogWriter) Notef(format string, args ...any) {
	l.Write(fmt.Appendf(nil, "[gpunet] "+format+"\n", args...))
}

// Dropped is the number of bytes not passed on so far.
func (l *LogWriter) Dropped() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

func (l *LogWriter) write(p []byte) {
	if l.err != nil || len(p) == 0 {
		return
	}
	_, l.err = l.w.Write(p)
}
