package openaigw

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestErrors sends each kind of bad request, and requests that the
// replicas fail, and checks the status and the OpenAI error object.
func TestErrors(t *testing.T) {
	ok, slow, broken, noUsage, bad, down1, down2 := provider(1), provider(2), provider(3), provider(4), provider(5), provider(6), provider(7)
	starting := service(6, "starting", true, 1, provider(8))
	starting.Replicas[0].Ready, starting.Replicas[0].ReadyAt = false, 0
	h := newHarness(t, Options{MaxBody: 4096, FirstByteTimeout: 300 * time.Millisecond},
		service(1, "tinylm", false, 1, ok),
		service(2, "slow", true, 1, slow),
		service(3, "broken", true, 1, broken),
		service(4, "nousage", true, 1, noUsage),
		service(5, "picky", true, 1, bad),
		starting,
		service(7, "down", true, 1, down1, down2),
	)
	h.serve(1, ok, &fakeModel{Words: []string{"hi"}})
	h.serve(2, slow, &fakeModel{Words: []string{"hi"}, FirstByte: 5 * time.Second})
	h.serve(3, broken, &fakeModel{Status: http.StatusInternalServerError})
	h.serve(4, noUsage, &fakeModel{Words: []string{"hi"}, NoUsage: true})
	h.serve(5, bad, &fakeModel{Status: http.StatusBadRequest})
	h.refuse(7, down1)
	h.refuse(7, down2)

	key := []string{"Authorization", "Bearer " + testKey}
	msg := func(model, extra string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	for _, tc := range []struct {
		name       string
		method     string // POST if empty
		path       string // PathCompletions if empty
		body       string
		hdr        []string
		status     int
		typ, code  string
		param      string
		msgHas     string
		retryAfter bool
	}{
		{name: "not json", body: `{"model":`, hdr: key, status: 400, typ: typeInvalidRequest, msgHas: "parse the JSON"},
		{name: "array body", body: `[1,2]`, hdr: key, status: 400, typ: typeInvalidRequest, msgHas: "JSON object"},
		{name: "no model", body: `{"messages":[{"role":"user","content":"hi"}]}`, hdr: key, status: 400, param: "model"},
		{name: "model not string", body: `{"model":3,"messages":[{"role":"user","content":"hi"}]}`, hdr: key, status: 400, param: "model"},
		{name: "no messages", body: `{"model":"tinylm"}`, hdr: key, status: 400, param: "messages"},
		{name: "empty messages", body: `{"model":"tinylm","messages":[]}`, hdr: key, status: 400, param: "messages"},
		{name: "bad role", body: `{"model":"tinylm","messages":[{"role":"robot","content":"hi"}]}`, hdr: key, status: 400, param: "messages[0].role"},
		{name: "no content", body: `{"model":"tinylm","messages":[{"role":"user","content":"a"},{"role":"user"}]}`, hdr: key, status: 400, param: "messages[1].content"},
		{name: "content number", body: `{"model":"tinylm","messages":[{"role":"user","content":5}]}`, hdr: key, status: 400, param: "messages[0].content"},
		{name: "part without type", body: `{"model":"tinylm","messages":[{"role":"user","content":[{"text":"x"}]}]}`, hdr: key, status: 400, param: "messages[0].content[0].type"},
		{name: "temperature", body: msg("tinylm", `,"temperature":2.5`), hdr: key, status: 400, param: "temperature"},
		{name: "temperature string", body: msg("tinylm", `,"temperature":"hot"`), hdr: key, status: 400, param: "temperature"},
		{name: "top_p", body: msg("tinylm", `,"top_p":-0.1`), hdr: key, status: 400, param: "top_p"},
		{name: "max_tokens 0", body: msg("tinylm", `,"max_tokens":0`), hdr: key, status: 400, param: "max_tokens"},
		{name: "max_completion_tokens fraction", body: msg("tinylm", `,"max_completion_tokens":1.5`), hdr: key, status: 400, param: "max_completion_tokens"},
		{name: "n 2", body: msg("tinylm", `,"n":2`), hdr: key, status: 400, param: "n", msgHas: "n must be 1"},
		{name: "stream not bool", body: msg("tinylm", `,"stream":"yes"`), hdr: key, status: 400, param: "stream"},
		{name: "stream_options without stream", body: msg("tinylm", `,"stream_options":{"include_usage":true}`), hdr: key, status: 400, param: "stream_options"},
		{name: "stream_options not object", body: msg("tinylm", `,"stream":true,"stream_options":true`), hdr: key, status: 400, param: "stream_options"},
		{name: "too large", body: msg("tinylm", `,"pad":"`+strings.Repeat("x", 5000)+`"`), hdr: key, status: 413, typ: typeInvalidRequest, code: CodeRequestTooLarge},
		{name: "form body", body: "model=tinylm", hdr: []string{"Content-Type", "application/x-www-form-urlencoded"}, status: 400},
		{name: "text body", body: msg("tinylm", ""), hdr: []string{"Content-Type", "text/plain"}, status: 415, code: CodeUnsupportedMedia},
		{name: "GET completions", method: http.MethodGet, status: 405, code: CodeMethodNotAllowed},
		{name: "POST models", path: PathModels, body: "{}", status: 405, code: CodeMethodNotAllowed},
		{name: "unknown path", path: "/openai/v1/embeddings", body: "{}", status: 404, code: CodeUnknownURL},
		{name: "unknown model", body: msg("nope", ""), hdr: key, status: 404, typ: typeInvalidRequest, code: CodeModelNotFound, param: "model"},
		{name: "no key", body: msg("tinylm", ""), status: 401, typ: typeInvalidRequest, code: CodeInvalidAPIKey, msgHas: "didn't provide an API key"},
		{name: "wrong key", body: msg("tinylm", ""), hdr: []string{"Authorization", "Bearer sk-gpunet-wrong"}, status: 401, code: CodeInvalidAPIKey, msgHas: "Incorrect API key"},
		{name: "wrong X-Gpunet-Key", body: msg("tinylm", ""), hdr: []string{"X-Gpunet-Key", "sk-gpunet-wrong"}, status: 401, code: CodeInvalidAPIKey},
		{name: "no replica ready", body: msg("starting", ""), status: 503, typ: typeServer, code: CodeNoReplicaReady, retryAfter: true},
		{name: "all replicas refuse", body: msg("down", ""), status: 503, code: CodeNoReplicaReady, msgHas: "2 replicas", retryAfter: true},
		{name: "replica 500", body: msg("broken", ""), status: 502, typ: typeServer, code: CodeUpstreamError, msgHas: "the model says 500"},
		{name: "replica 500 streamed", body: msg("broken", `,"stream":true`), status: 502, code: CodeUpstreamError},
		{name: "replica without usage", body: msg("nousage", ""), status: 502, code: CodeUpstreamError, msgHas: "no usage"},
		{name: "replica slow", body: msg("slow", ""), status: 504, typ: typeServer, code: CodeUpstreamTimeout},
		{name: "replica slow streamed", body: msg("slow", `,"stream":true`), status: 504, code: CodeUpstreamTimeout},
		// A replica's own 4xx verdict on the request passes through.
		{name: "replica 400", body: msg("picky", ""), status: 400, msgHas: "the model says 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, path := tc.method, tc.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = PathCompletions
			}
			req, err := http.NewRequestWithContext(t.Context(), method, h.url+path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v", d)
			}
			if resp.StatusCode != tc.status {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			e := apiErr(t, resp)
			if tc.typ != "" && e.Type != tc.typ {
				t.Errorf("type %q, want %q", e.Type, tc.typ)
			}
			if tc.code != "" && str(e.Code) != tc.code {
				t.Errorf("code %q, want %q", str(e.Code), tc.code)
			}
			if tc.param != "" && str(e.Param) != tc.param {
				t.Errorf("param %q, want %q (%s)", str(e.Param), tc.param, e.Message)
			}
			if !strings.Contains(e.Message, tc.msgHas) {
				t.Errorf("message %q lacks %q", e.Message, tc.msgHas)
			}
			if got := resp.Header.Get("Retry-After") != ""; got != tc.retryAfter {
				t.Errorf("Retry-After %q, want set: %v", resp.Header.Get("Retry-After"), tc.retryAfter)
			}
			if tc.status == 405 && resp.Header.Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
		})
	}
}

// TestStreamFailures: a replica that fails after the stream began ends it
// with an error event, never a hang and never a [DONE] without usage.
func TestStreamFailures(t *testing.T) {
	hang, noUsage, noDone := provider(1), provider(2), provider(3)
	h := newHarness(t, Options{FirstByteTimeout: 300 * time.Millisecond},
		service(1, "hang", true, 1, hang),
		service(2, "nousage", true, 1, noUsage),
		service(3, "nodone", true, 1, noDone),
	)
	h.serve(1, hang, &fakeModel{Words: strings.Fields("a b c d"), HangAfter: 2})
	h.serve(2, noUsage, &fakeModel{Words: strings.Fields("a b"), NoUsage: true})
	h.serve(3, noDone, &fakeModel{Words: strings.Fields("a b"), NoDone: true})

	for _, tc := range []struct {
		model, lastHas string
	}{
		{"hang", `"code":"upstream_timeout"`},
		{"nousage", "without a usage chunk"},
		// Usage came, only [DONE] was missing: the gateway ends the stream.
		{"nodone", "[DONE]"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			start := time.Now()
			resp := h.post(`{"model":"` + tc.model + `","stream":true,"messages":[{"role":"user","content":"x"}]}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			data, _ := readEvents(t, resp.Body, start)
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v", d)
			}
			if len(data) < 2 {
				t.Fatalf("events %q", data)
			}
			last := data[len(data)-1]
			if !strings.Contains(last, tc.lastHas) {
				t.Errorf("last event %q lacks %q", last, tc.lastHas)
			}
			if tc.model != "nodone" {
				if !strings.HasPrefix(last, `{"error":{`) {
					t.Errorf("last event %q is not an error object", last)
				}
				for _, d := range data {
					if d == "[DONE]" {
						t.Errorf("a failed stream sent [DONE]")
					}
				}
			}
		})
	}
}

// TestClientGoneCancelsUpstream: a client that leaves mid-stream ends the
// replica's request.
func TestClientGoneCancelsUpstream(t *testing.T) {
	p := provider(1)
	h := newHarness(t, Options{}, service(1, "tinylm", true, 1, p))
	m := &fakeModel{Words: strings.Fields(strings.Repeat("w ", 100)), Delay: 50 * time.Millisecond, gone: make(chan struct{})}
	h.serve(1, p, m)

	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+PathCompletions,
		strings.NewReader(`{"model":"tinylm","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-m.gone:
	case <-time.After(3 * time.Second):
		t.Fatal("the replica's request went on after the client left")
	}
	// And the gateway counts nothing in flight to the replica any more.
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, n := h.gw.stats.get(replicaKey{1, p})
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in flight", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCORSPreflight(t *testing.T) {
	h := newHarness(t, Options{}, service(1, "tinylm", true, 1))
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodOptions, h.url+PathCompletions, nil)
	req.Header.Set("Origin", "https://example.test")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		resp.Header.Get("Access-Control-Allow-Headers") != "authorization, content-type" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestNewNeedsItsParts(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New without Dial did not panic")
		}
	}()
	New(Options{Directory: &fakeDir{}, Authorized: func(*ledger.Service, *http.Request) (string, bool) { return "", true }})
}
