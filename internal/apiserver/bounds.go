package apiserver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/admission"
)

// Bounds on time (docs/bounds.md). A request's headers are bounded by the
// server (ReadHeaderTimeout), its body by its route (BodyTimeout,
// BodyIdle), the handler by the route's Timeout, and the answer by
// Timeout+writeGrace, or, on a route without a Timeout, by StreamWriteIdle
// for each 32 KiB.

// writeGrace is how long after its Timeout a request's answer may take to
// be written.
const writeGrace = 5 * time.Second

// streamWriteIdle is StreamWriteIdle; tests shorten it.
var streamWriteIdle = StreamWriteIdle

// class is what r's headers prove: trusted with the node's API token or a
// credential its route accepts, anonymous otherwise. Only headers are
// read: no body byte has arrived yet.
func (s *Server) class(rt Route, r *http.Request) admission.Class {
	if s.hasToken(r) || (rt.Trusted != nil && rt.Trusted(r)) {
		return admission.Trusted
	}
	return admission.Anonymous
}

// hasToken reports whether r carries the node's API token.
func (s *Server) hasToken(r *http.Request) bool {
	if s.opts.Token == "" {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.opts.Token)) == 1
}

// setDeadlines puts rt's time bounds on r's connection, from start (when
// the handler was reached, just after the headers): the body's, then,
// once the body is in, the whole request's for the reads; and the
// answer's. Every request sets both, so none inherits the deadlines of
// the one before it on the connection. It returns r with its body timed.
func setDeadlines(sw *statusWriter, r *http.Request, rt Route, start time.Time) *http.Request {
	rc := http.NewResponseController(sw.ResponseWriter)
	// Once the body is in, a read only watches for the client going away:
	// a deadline then ends the request (net/http cancels its context), so
	// it is the route's Timeout, or none.
	var after time.Time
	if rt.Timeout > 0 {
		after = start.Add(rt.Timeout)
	}
	if r.Body == nil || r.Body == http.NoBody {
		rc.SetReadDeadline(after)
	} else {
		b := &bodyTimer{rc: r.Body, ctl: rc, limit: rt.BodyTimeout, end: start.Add(rt.BodyTimeout), idle: rt.BodyIdle, after: after}
		rc.SetReadDeadline(b.deadline(start))
		sw.body = b
		// A copy: net/http reads its own request's Body after the
		// handler to decide how to close the connection (gracefully,
		// when the client may still be sending).
		r = r.WithContext(r.Context())
		r.Body = b
	}
	if rt.Timeout > 0 {
		rc.SetWriteDeadline(start.Add(rt.Timeout + writeGrace))
	} else {
		sw.writeIdle = streamWriteIdle
		rc.SetWriteDeadline(time.Time{})
	}
	return r
}

// bodyTimer reads a request body under its route's deadlines: the whole
// body by end, and, with idle set, some of it every idle. The connection
// enforces them (no goroutine waits for a slow client). At the end of the
// body it moves the read deadline to after.
type bodyTimer struct {
	rc      io.ReadCloser
	ctl     *http.ResponseController
	limit   time.Duration // the route's BodyTimeout
	end     time.Time
	idle    time.Duration
	after   time.Time
	eof     bool
	refused bool // answered with an error before its end
	n       int64
}

func (b *bodyTimer) deadline(now time.Time) time.Time {
	if b.idle > 0 && now.Add(b.idle).Before(b.end) {
		return now.Add(b.idle)
	}
	return b.end
}

func (b *bodyTimer) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.idle > 0 {
		b.ctl.SetReadDeadline(b.deadline(time.Now()))
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		b.eof = true
		b.ctl.SetReadDeadline(b.after)
	case err != nil && isTimeout(err):
		limit := fmt.Sprintf("the whole body within %v", b.limit)
		if b.idle > 0 {
			limit += fmt.Sprintf(", and some of it every %v", b.idle)
		}
		err = &bodyTimeoutError{err: err, msg: fmt.Sprintf("request body: %d bytes, then too slow: this route takes %s", b.n, limit)}
	}
	return n, err
}

func (b *bodyTimer) Close() error { return b.rc.Close() }

// writeBodyError answers a failure to read a request's body: 408 when it
// came too slowly (its route's deadline), 413 otherwise (its route's
// limit); tooLargeCode is the ledger's code for the latter.
func writeBodyError(w http.ResponseWriter, tooLargeCode uint32, what string, err error) {
	if isTimeout(err) {
		writeError(w, http.StatusRequestTimeout, 0, what+": "+err.Error())
		return
	}
	writeError(w, http.StatusRequestEntityTooLarge, tooLargeCode, what+": "+err.Error())
}

// bodyTimeoutError is a body cut off by its deadline. It is a net.Error
// with Timeout true, as the connection's was.
type bodyTimeoutError struct {
	err error
	msg string
}

func (e *bodyTimeoutError) Error() string   { return e.msg }
func (e *bodyTimeoutError) Unwrap() error   { return e.err }
func (e *bodyTimeoutError) Timeout() bool   { return true }
func (e *bodyTimeoutError) Temporary() bool { return false }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
