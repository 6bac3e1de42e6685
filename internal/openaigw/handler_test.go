package openaigw

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

const hello = `{"model":"tinylm","messages":[{"role":"user","content":"say hello"}]}`

func TestNonStreamed(t *testing.T) {
	p := provider(1)
	h := newHarness(t, Options{}, service(7, "tinylm", false, 100, p))
	m := &fakeModel{Words: []string{"Hello", ",", " world"}}
	h.serve(7, p, m)

	resp := h.post(`{"model":"tinylm","messages":[{"role":"user","content":"say hello"}],"temperature":0.5,"seed":42,"x_custom":{"a":1}}`,
		"Authorization", "Bearer "+testKey)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got, want := resp.Header.Get(HeaderService), "7"; got != want {
		t.Errorf("%s = %q, want %q", HeaderService, got, want)
	}
	if got, want := resp.Header.Get(HeaderProvider), p.String(); got != want {
		t.Errorf("%s = %q, want %q", HeaderProvider, got, want)
	}
	var reply struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		t.Fatal(err)
	}
	if reply.Object != "chat.completion" || len(reply.Choices) != 1 || reply.Choices[0].Message.Content != "Hello, world" {
		t.Errorf("reply %+v, want one choice Hello, world", reply)
	}
	if reply.Usage == nil || reply.Usage.CompletionTokens != 3 || reply.Usage.PromptTokens != 2 || reply.Usage.TotalTokens != 5 {
		t.Errorf("usage %+v, want 2+3=5", reply.Usage)
	}
	// Unknown fields pass through; a request that does not stream is
	// forwarded as it came.
	up := m.lastBody()
	if string(up["seed"]) != "42" || string(up["x_custom"]) != `{"a":1}` {
		t.Errorf("upstream body lost unknown fields: %v", up)
	}
	if _, ok := up["stream_options"]; ok {
		t.Errorf("upstream body of a non-streamed request has stream_options")
	}
}

// readEvents reads a server-sent event stream's data payloads, with the
// time each arrived after start.
func readEvents(t *testing.T, body io.Reader, start time.Time) (data []string, at []time.Duration) {
	t.Helper()
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, d)
			at = append(at, time.Since(start))
		} else if line != "" {
			t.Errorf("unexpected stream line %q", line)
		}
	}
	return data, at
}

func TestStreamed(t *testing.T) {
	p := provider(1)
	h := newHarness(t, Options{}, service(7, "tinylm", true, 100, p))
	m := &fakeModel{Words: strings.Fields("one two three four five six seven eight"), Delay: 40 * time.Millisecond}
	h.serve(7, p, m)

	start := time.Now()
	// The client does not ask for usage: the gateway asks the replica and
	// passes the usage chunk anyway.
	resp := h.post(`{"model":"tinylm","stream":true,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"count"}]}]}`)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	if resp.Header.Get(HeaderProvider) != p.String() {
		t.Errorf("%s missing on a stream", HeaderProvider)
	}
	data, at := readEvents(t, resp.Body, start)
	total := time.Since(start)

	// role, 8 words, finish, usage, [DONE]
	if got, want := len(data), 12; got != want {
		t.Fatalf("got %d events, want %d: %q", got, want, data)
	}
	if data[len(data)-1] != "[DONE]" {
		t.Errorf("last event %q, want [DONE]", data[len(data)-1])
	}
	var last struct {
		Choices []any `json:"choices"`
		Usage   *struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(data[len(data)-2]), &last); err != nil || last.Usage == nil || len(last.Choices) != 0 {
		t.Fatalf("event before [DONE] %q is not the usage chunk", data[len(data)-2])
	}
	if got, want := last.Usage.TotalTokens, 8+2; got != want {
		t.Errorf("usage total %d, want %d", got, want)
	}
	var text strings.Builder
	for _, d := range data[:len(data)-2] {
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		text.WriteString(c.Choices[0].Delta.Content)
	}
	if got, want := text.String(), "onetwothreefourfivesixseveneight"; got != want {
		t.Errorf("streamed text %q, want %q", got, want)
	}
	// Incremental: the first chunk came long before the last (9 delays of
	// 40 ms after it); a gateway that buffered would deliver them together.
	if at[0] > total/2 {
		t.Errorf("first chunk at %v of %v: the stream was not relayed as it came", at[0], total)
	}
	var so struct {
		IncludeUsage bool `json:"include_usage"`
	}
	json.Unmarshal(m.lastBody()["stream_options"], &so)
	if !so.IncludeUsage {
		t.Errorf("upstream stream_options %s, want include_usage true", m.lastBody()["stream_options"])
	}
}

func TestFailoverToNextReplica(t *testing.T) {
	cheap, dear := provider(1), provider(2)
	svc := service(7, "tinylm", true, 0, cheap, dear)
	svc.Replicas[0].PricePerHour = 100
	svc.Replicas[1].PricePerHour = 300
	h := newHarness(t, Options{}, svc)
	h.refuse(7, cheap) // ranked first (cheaper), but its agent refuses
	h.serve(7, dear, &fakeModel{Words: []string{"ok"}})

	resp := h.post(hello)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if got := resp.Header.Get(HeaderProvider); got != dear.String() {
		t.Errorf("served by %s, want the second replica %s", got, dear)
	}
	h.mu.Lock()
	dials := h.dials
	h.mu.Unlock()
	if len(dials) != 2 || dials[0].provider != cheap || dials[1].provider != dear {
		t.Errorf("dials %v, want the cheap replica then the dear one", dials)
	}
	// The failure is remembered: the next request goes to the replica that
	// answered without trying the other first.
	h.mu.Lock()
	h.dials = nil
	h.mu.Unlock()
	resp = h.post(hello)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderProvider) != dear.String() {
		t.Errorf("second request: status %d from %s", resp.StatusCode, resp.Header.Get(HeaderProvider))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.dials) > 0 && h.dials[0].provider == cheap {
		t.Errorf("second request dialled the failed replica first: %v", h.dials)
	}
}

// TestRetryOnBusyReplica: a replica that answers it did not take the
// request on (429, 502, 503, 504) is passed over for the next, each asked
// once; when the last one tried says so too, its answer reaches the client
// with its Retry-After. A 500 (the replica failed at the work) is not
// retried.
func TestRetryOnBusyReplica(t *testing.T) {
	a, b, c := provider(1), provider(2), provider(3)
	threeReplicas := func() *ledger.Service {
		svc := service(7, "tinylm", true, 0, a, b, c)
		for i := range svc.Replicas {
			svc.Replicas[i].PricePerHour = uint64(100 * (i + 1)) // ranked a, b, c
		}
		return svc
	}
	for _, tc := range []struct {
		name       string
		models     [3]*fakeModel
		status     int
		servedBy   address.Address
		asked      [3]int32
		retryAfter string
	}{
		{"busy then overloaded then ok",
			[3]*fakeModel{{Status: 503}, {Status: 429, RetryAfter: "2"}, {Words: []string{"ok"}}},
			http.StatusOK, c, [3]int32{1, 1, 1}, ""},
		{"a gateway error then ok",
			[3]*fakeModel{{Status: 502}, {Words: []string{"ok"}}, {Words: []string{"no"}}},
			http.StatusOK, b, [3]int32{1, 1, 0}, ""},
		{"all busy: the last one's answer",
			[3]*fakeModel{{Status: 503}, {Status: 504}, {Status: 429, RetryAfter: "7"}},
			http.StatusTooManyRequests, c, [3]int32{1, 1, 1}, "7"},
		{"a failure is not retried",
			[3]*fakeModel{{Status: 500}, {Words: []string{"ok"}}, {Words: []string{"ok"}}},
			http.StatusBadGateway, a, [3]int32{1, 0, 0}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{}, threeReplicas())
			for i, p := range []address.Address{a, b, c} {
				h.serve(7, p, tc.models[i])
			}
			resp := h.post(hello)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Get(HeaderProvider); got != tc.servedBy.String() {
				t.Errorf("answered by %s, want %s", got, tc.servedBy)
			}
			if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			for i, m := range tc.models {
				if got := m.requests.Load(); got != tc.asked[i] {
					t.Errorf("replica %d asked %d times, want %d", i, got, tc.asked[i])
				}
			}
		})
	}
}

func TestModels(t *testing.T) {
	pub := service(1, "open-model", true, 1, provider(1))
	priv := service(2, "secret-model", false, 1, provider(2))
	both := service(3, "open-model", false, 1, provider(3)) // a second service of a listed model
	stopped := service(4, "gone-model", true, 1)
	stopped.State = "stopped"
	h := newHarness(t, Options{}, pub, priv, both, stopped)

	list := func(hdr ...string) []modelObject {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, h.url+PathModels, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var l modelList
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != http.StatusOK || l.Object != "list" {
			t.Fatalf("models: status %d, %+v, %v", resp.StatusCode, l, err)
		}
		return l.Data
	}
	ids := func(ms []modelObject) string {
		var s []string
		for _, m := range ms {
			s = append(s, m.ID)
		}
		return strings.Join(s, ",")
	}

	anon := list()
	if got, want := ids(anon), "open-model"; got != want {
		t.Errorf("without a key: %s, want %s", got, want)
	}
	if anon[0].Object != "model" || anon[0].OwnedBy != pub.Owner.String() || anon[0].Created != pub.CreatedAt {
		t.Errorf("model object %+v, want owned by %s created %d", anon[0], pub.Owner, pub.CreatedAt)
	}
	if got, want := ids(list("Authorization", "Bearer "+testKey)), "open-model,secret-model"; got != want {
		t.Errorf("with the key: %s, want %s", got, want)
	}
	if got, want := ids(list("X-Gpunet-Key", testKey)), "open-model,secret-model"; got != want {
		t.Errorf("with the key in X-Gpunet-Key: %s, want %s", got, want)
	}
	if got, want := ids(list("Authorization", "Bearer sk-wrong")), "open-model"; got != want {
		t.Errorf("with a wrong key: %s, want %s", got, want)
	}

	// One model.
	resp, err := http.Get(h.url + PathModels + "/open-model")
	if err != nil {
		t.Fatal(err)
	}
	var m modelObject
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || m.ID != "open-model" {
		t.Errorf("GET models/open-model: %d %+v", resp.StatusCode, m)
	}
	resp, err = http.Get(h.url + PathModels + "/secret-model")
	if err != nil {
		t.Fatal(err)
	}
	if e := apiErr(t, resp); resp.StatusCode != http.StatusNotFound || str(e.Code) != CodeModelNotFound {
		t.Errorf("GET models/secret-model without a key: %d %+v, want 404 model_not_found", resp.StatusCode, e)
	}
	resp.Body.Close()
}

// TestReplicaConnectionsReused: requests to a replica, streamed or not,
// reuse one connection (one dial through the relay) when they come one
// after another.
func TestReplicaConnectionsReused(t *testing.T) {
	p := provider(1)
	h := newHarness(t, Options{}, service(1, "tinylm", true, 1, p))
	// The end of a stream's response comes after its [DONE].
	h.serve(1, p, &fakeModel{Words: []string{"a", "b"}, TailDelay: 20 * time.Millisecond})
	for i := range 6 {
		body := hello
		if i%2 == 1 {
			body = `{"model":"tinylm","stream":true,"messages":[{"role":"user","content":"x"}]}`
		}
		resp := h.post(body)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.dials) != 1 {
		t.Errorf("%d dials for 6 requests, want 1", len(h.dials))
	}
}
