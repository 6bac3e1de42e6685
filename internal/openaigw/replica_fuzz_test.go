package openaigw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// sseEvents splits an event stream as a client does (the WHATWG rules: a
// line ends at CRLF, LF or a lone CR; an event at an empty line) and
// returns each event's lines.
func sseEvents(b []byte) [][]string {
	s := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n")
	var events [][]string
	var cur []string
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			if cur != nil {
				events = append(events, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, line)
	}
	if cur != nil {
		events = append(events, cur)
	}
	return events
}

// FuzzReplicaAnswer drives the gateway's relay of a replica's answer (a
// provider's bytes: the network, and a provider may lie) with any status,
// content type and body, streamed and not. The client always gets either
// the replica's answer in the form the gateway promises or an OpenAI error
// object: a stream is events of one "data: " line each, read as a client
// reads them (a lone CR ends a line), whose data is a JSON object, [DONE]
// only last, nothing after an error event; a whole answer is a JSON object
// with usage; an error is an OpenAI error object.
func FuzzReplicaAnswer(f *testing.F) {
	usage := `"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`
	f.Add(true, 200, "text/event-stream", []byte("data: {\"choices\":[]}\n\ndata: {\"choices\":[],"+usage+"}\n\ndata: [DONE]\n\n"))
	f.Add(true, 200, "text/event-stream", []byte("data: {\"choices\":[],\r"+usage+"}\n\ndata: [DONE]\n\n"))
	f.Add(true, 200, "text/event-stream", []byte("data: {\"a\":\ndata: 1}\n\n: comment\nevent: x\n\ndata: {\"error\":{\"message\":\"m\"}}\n\ndata: {}\n\n"))
	f.Add(true, 200, "text/event-stream", []byte("data: {\"choices\":[],"+usage+"}\r\n\r\ndata: [DONE]"))
	f.Add(true, 200, "application/json", []byte(`{"choices":[],`+usage+`}`))
	f.Add(false, 200, "application/json", []byte(`{"choices":[],`+usage+`}`))
	f.Add(false, 200, "application/json", []byte(`{"choices":[]}`))
	f.Add(false, 200, "application/json", []byte(`{"choices":[{"index":0,"message":{"content":"a<b"},"logprobs":{"content":[{"token":"a","logprob":-1,"top_logprobs":[{"token":"a","logprob":-1},{"token":"b","logprob":-2}]}]}}],"usage":{}}`))
	f.Add(true, 200, "text/event-stream", []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":-1,\"top_logprobs\":[{\"token\":\"a\",\"logprob\":-1},{\"token\":\"b\",\"logprob\":-2}]}]}}]}\n\ndata: {\"choices\":[],\"usage\":{}}\n\ndata: [DONE]\n\n"))
	f.Add(false, 400, "application/json", []byte(`{"error":{"message":"bad","type":"invalid_request_error"}}`))
	f.Add(false, 500, "text/plain", []byte("\xffboom"))
	f.Fuzz(func(t *testing.T, stream bool, status int, contentType string, body []byte) {
		if status < 200 || status > 599 {
			status = 200 + (status%400+400)%400
		}
		g := New(Options{Directory: &fakeDir{}, Authorized: authorized, FirstByteTimeout: 5 * time.Second, Log: slog.New(slog.DiscardHandler),
			Dial: func(context.Context, *ledger.Service, address.Address, uint64, string) (net.Conn, error) {
				return nil, errors.New("no dial in this test")
			}})
		defer g.Close()
		c := &candidate{Service: service(1, "m", false, 1, provider(1)), Provider: provider(1)}
		resp := &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}
		if !strings.ContainsAny(contentType, "\r\n") {
			resp.Header.Set("Content-Type", contentType)
		}
		// Some answers go through a trim of log-probabilities.
		u := &upstream{}
		switch len(body) % 3 {
		case 1:
			u.trim = &logprobTrim{drop: true}
		case 2:
			u.trim = &logprobTrim{top: 1}
		}
		w := httptest.NewRecorder()
		switch {
		case status/100 != 2:
			g.relayError(w, resp, c)
		case stream:
			_, cancel := context.WithCancel(t.Context())
			defer cancel()
			g.relayStream(w, resp, c, cancel, u)
		default:
			g.relayBody(w, resp, c, u)
		}
		out := w.Body.Bytes()
		isErrorObject := func(b []byte) bool {
			var eb struct {
				Error *errorDetail `json:"error"`
			}
			return json.Unmarshal(b, &eb) == nil && eb.Error != nil && eb.Error.Message != ""
		}
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			// A whole answer, or an error before any event.
			if w.Code == http.StatusOK {
				var reply struct {
					Usage map[string]any `json:"usage"`
				}
				if err := json.Unmarshal(out, &reply); err != nil || reply.Usage == nil {
					t.Fatalf("200 with %q: want a JSON chat completion with usage (%v)", out, err)
				}
				return
			}
			if !isErrorObject(out) {
				t.Fatalf("%d with %q: want an OpenAI error object", w.Code, out)
			}
			return
		}
		events := sseEvents(out)
		for i, ev := range events {
			if len(ev) != 1 || !strings.HasPrefix(ev[0], "data: ") {
				t.Fatalf("event %d of %q is %q: want one data: line (a client reads a lone CR as a line's end)", i, out, ev)
			}
			data := strings.TrimPrefix(ev[0], "data: ")
			if data == "[DONE]" {
				if i != len(events)-1 {
					t.Fatalf("[DONE] is event %d of %d in %q", i, len(events), out)
				}
				continue
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal([]byte(data), &obj); err != nil {
				t.Fatalf("event %d of %q: data %q is not a JSON object (%v)", i, out, data, err)
			}
			if e, ok := obj["error"]; ok && !isNull(e) && i != len(events)-1 {
				t.Fatalf("events after the error event %d in %q", i, out)
			}
		}
	})
}
