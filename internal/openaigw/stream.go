package openaigw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gpunet/gpunet/internal/receipt"
)

// maxEventLine is the longest line of a replica's event stream relayed.
const maxEventLine = 1 << 20

// drainTimeout is how long the end of a replica's response may take after
// its data: [DONE].
const drainTimeout = time.Second

var doneEvent = []byte("[DONE]")

// relayStream relays a replica's server-sent event stream to the client,
// each event flushed as it arrives. The stream was asked for with
// stream_options.include_usage, so the replica must send a chunk with
// usage before data: [DONE]; that chunk passes to the client whether or
// not it asked for usage (a chunk with empty choices and usage is valid in
// OpenAI's format). A replica that breaks off, sends no usage, sends
// something other than JSON or stays silent for FirstByteTimeout ends the
// stream with an error event (data: {"error":{…}}). cancel cancels the
// upstream request. Each chunk goes to the client without the
// log-probabilities it did not ask for (u.trim); the outputs returned
// keep them.
func (g *Gateway) relayStream(w http.ResponseWriter, resp *http.Response, c *candidate, cancel context.CancelFunc, u *upstream) answered {
	body := u.body
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		errUpstream("The replica (service %d, provider %s) answered a streamed request with %q, not an event stream.",
			c.Service.ID, c.Provider, resp.Header.Get("Content-Type")).write(w)
		return answered{}
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if g.checks != nil {
		h.Set("Trailer", receipt.Header)
	}
	w.WriteHeader(http.StatusOK)
	rc.Flush()

	s := &sseRelay{w: w, rc: rc, trim: u.trim}
	// done ends a stream that went well: the receipt, checked, is the
	// answer's trailer.
	done := func() answered {
		if g.checks == nil || s.failed || s.badOut {
			return answered{}
		}
		enc, r := g.answerReceipt(resp.Trailer.Get(receipt.Header), c, body, &s.outputs)
		if enc != "" {
			h.Set(receipt.Header, enc)
		} else {
			// The answer has gone out; a replica that streams without
			// receipts is tried last from now on.
			g.stats.observe(replicaKey{c.Service.ID, c.Provider}, failurePenalty, g.now())
		}
		return answered{r, &s.outputs}
	}
	var idle atomic.Bool
	gap := g.o.FirstByteTimeout
	timer := time.AfterFunc(gap, func() { idle.Store(true); cancel() })
	defer timer.Stop()

	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var data []byte // the current event's data lines, joined by \n
	inEvent := false
	for {
		line, err := readLine(br)
		if err != nil {
			switch {
			case errors.Is(err, io.EOF) && inEvent:
				// The last event lacked its blank line: take it as ended.
				if !s.event(data, c) {
					return answered{}
				}
				fallthrough
			case errors.Is(err, io.EOF):
				if !s.sawUsage {
					s.fail(errUpstream("The replica (service %d, provider %s) ended its stream without a usage chunk.", c.Service.ID, c.Provider))
					return answered{}
				}
				// Usage came; only [DONE] is missing: end as OpenAI does.
				s.write(doneEvent)
				return done()
			case idle.Load():
				s.fail(errTimeout("The replica (service %d, provider %s) sent nothing for %s.", c.Service.ID, c.Provider, gap))
			case errors.Is(err, bufio.ErrBufferFull):
				s.fail(errUpstream("The replica (service %d, provider %s) sent an event line over %d bytes.", c.Service.ID, c.Provider, maxEventLine))
			default:
				s.fail(errUpstream("The replica (service %d, provider %s) broke off its stream: %v.", c.Service.ID, c.Provider, err))
			}
			return answered{}
		}
		timer.Reset(gap)
		if len(line) == 0 {
			if !inEvent {
				continue
			}
			if bytes.Equal(data, doneEvent) {
				if !s.sawUsage {
					s.fail(errUpstream("The replica (service %d, provider %s) ended its stream without a usage chunk.", c.Service.ID, c.Provider))
					return answered{}
				}
				s.write(doneEvent)
				// Read the stream's end, so that the connection to the
				// replica is kept for the next request; a replica that
				// does not end it soon loses the connection instead.
				timer.Reset(drainTimeout)
				io.Copy(io.Discard, io.LimitReader(br, 4096))
				return done()
			}
			if !s.event(data, c) {
				return answered{}
			}
			data, inEvent = data[:0], false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue // a comment (":…"), or event:, id:, retry:, which OpenAI's format does not use
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if inEvent {
			data = append(data, '\n')
		}
		data = append(data, value...)
		inEvent = true
	}
}

// readLine reads one line of an event stream without its line ending.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(line) > maxEventLine {
				return nil, err
			}
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			break // a last line without its ending
		}
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// sseRelay writes events to the client.
type sseRelay struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	sawUsage bool
	failed   bool // the client is gone
	// trim takes off each chunk the log-probabilities the client did not
	// ask for.
	trim *logprobTrim
	// outputs are the answer's, as its receipt hashes them.
	outputs receipt.Outputs
	badOut  bool
}

// event checks one chunk of the replica's and relays it; it reports
// whether the stream goes on.
func (s *sseRelay) event(data []byte, c *candidate) bool {
	var chunk struct {
		Usage json.RawMessage `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &chunk); err != nil || firstByte(data) != '{' {
		s.fail(errUpstream("The replica (service %d, provider %s) sent an event that is not a JSON chunk: %s", c.Service.ID, c.Provider, snippet(data)))
		return false
	}
	// An event goes out as one data: line. Its data may span lines (data:
	// lines joined by \n), or hold a lone \r, which JSON reads as
	// whitespace and a client as the end of a line: compacted, it holds
	// neither (JSON strings cannot hold them raw).
	if bytes.ContainsAny(data, "\r\n") {
		var buf bytes.Buffer
		if json.Compact(&buf, data) == nil {
			data = buf.Bytes()
		}
	}
	if !s.write(s.trim.apply(data)) {
		return false
	}
	if !s.badOut && s.outputs.Add(data) != nil {
		s.badOut = true
	}
	if len(chunk.Error) > 0 && !isNull(chunk.Error) {
		return false // the replica's own error event ends its stream
	}
	if len(chunk.Usage) > 0 && chunk.Usage[0] == '{' {
		s.sawUsage = true
	}
	return true
}

// write sends one event and flushes it; it reports whether the client
// took it.
func (s *sseRelay) write(data []byte) bool {
	if s.failed {
		return false
	}
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		s.failed = true
		return false
	}
	if err := s.rc.Flush(); err != nil {
		s.failed = true
		return false
	}
	return true
}

// fail ends the stream with e as an error event.
func (s *sseRelay) fail(e *apiError) {
	s.write(e.body())
}
