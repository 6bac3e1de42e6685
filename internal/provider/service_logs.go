package provider

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/seal"
)

// Live logs. A job's and a service replica's output reach their owner the
// same way: every logFlushInterval what is new is sealed to the owner in a
// chunk of at most logChunkBytes and posted through the node with the next
// sequence number (relayLogs). They differ in what they keep: a job keeps
// its whole log (capped) for the result (cappedBuffer, read through a
// cappedCursor); a service runs for days, so its replica keeps only what
// is not sent yet, and drops the oldest of it when the node cannot keep up
// (logQueue).

// logFlushInterval is how often a running job's new log output is relayed.
const logFlushInterval = 300 * time.Millisecond

// logChunkBytes bounds one relayed chunk.
const logChunkBytes = 128 << 10

// logSource is output a log relay sends on.
type logSource interface {
	// unsent returns up to max of the bytes not sent yet, oldest first.
	unsent(max int) []byte
	// sent marks the first n bytes unsent returned as sent.
	sent(n int)
}

// postLog posts chunk seq of a log, sealed.
type postLog func(ctx context.Context, seq uint64, sealed []byte) error

// relayLogs relays src, sealed to owner, with post while it runs; the
// returned function sends the rest and stops. A failed post is tried again
// at the next flush: it costs only the live view (what is named by what
// in the agent's debug log).
func (a *Agent) relayLogs(ctx context.Context, what string, src logSource, owner age.Recipient, post postLog) func() {
	var seq uint64
	flush := func() bool {
		chunk := src.unsent(logChunkBytes)
		if len(chunk) == 0 {
			return false
		}
		var sealed bytes.Buffer
		enc, err := seal.Encrypt(&sealed, owner)
		if err == nil {
			enc.Write(chunk)
			err = enc.Close()
		}
		if err == nil {
			err = post(ctx, seq, sealed.Bytes())
		}
		if err != nil {
			a.log.Debug("live log relay", "of", what, "err", err)
			return false
		}
		seq++
		src.sent(len(chunk))
		return true
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := a.clk.NewTicker(logFlushInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C():
				flush()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		for i := 0; i < 64 && flush(); i++ {
		}
	}
}

// cappedCursor reads a job's cappedBuffer for relayLogs.
type cappedCursor struct {
	buf *cappedBuffer
	off int
}

func (c *cappedCursor) unsent(max int) []byte {
	b := c.buf.Bytes()
	if len(b) <= c.off {
		return nil
	}
	return b[c.off:min(len(b), c.off+max)]
}

func (c *cappedCursor) sent(n int) { c.off += n }

// logQueue is a replica's output not relayed yet: at most max bytes, the
// oldest dropped first (with a note saying how much) when more waits. It
// is an io.Writer safe for concurrent use that never fails.
type logQueue struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped int
	// base is the position of buf[0] in everything ever queued (notes
	// included), and lastStart base when unsent last looked: sent
	// removes only what is still there of what unsent returned.
	base, lastStart int64
}

func (q *logQueue) Write(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.buf = append(q.buf, p...)
	if over := len(q.buf) - q.max; over > 0 {
		q.dropped += over
		q.buf = append(q.buf[:0], q.buf[over:]...)
		q.base += int64(over)
	}
	return len(p), nil
}

func (q *logQueue) unsent(max int) []byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dropped > 0 {
		note := fmt.Appendf(nil, "[gpunet: %d bytes of log dropped: the node did not take them fast enough]\n", q.dropped)
		q.buf = append(note, q.buf...)
		q.base -= int64(len(note))
		q.dropped = 0
	}
	q.lastStart = q.base
	return bytes.Clone(q.buf[:min(len(q.buf), max)])
}

func (q *logQueue) sent(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if end := q.lastStart + int64(n); end > q.base {
		k := min(end-q.base, int64(len(q.buf)))
		q.buf = append(q.buf[:0], q.buf[k:]...)
		q.base += k
	}
}
