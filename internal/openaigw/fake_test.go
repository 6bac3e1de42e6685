package openaigw

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// fakeModel is a model server speaking OpenAI's chat completions format,
// as a replica's container would: it answers with words, one chunk each
// when streaming, and can be told to misbehave.
type fakeModel struct {
	Words      []string
	Delay      time.Duration // before each streamed chunk
	FirstByte  time.Duration // before the answer's headers
	NoUsage    bool          // omit usage (a broken server)
	Status     int           // answer this status with an OpenAI error instead
	RetryAfter string        // with Status: the Retry-After header to send
	HangAfter  int           // streaming: after this many content chunks, send nothing more (0: never)
	NoDone     bool          // streaming: end without data: [DONE]
	TailDelay  time.Duration // streaming: wait this long after [DONE] before ending the response

	requests atomic.Int32
	mu       sync.Mutex
	last     map[string]json.RawMessage // the last request's body
	gone     chan struct{}              // closed when a request's context ends early
}

func (m *fakeModel) lastBody() map[string]json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

func (m *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"no such path","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	m.requests.Add(1)
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.last = body
	m.mu.Unlock()
	if m.FirstByte > 0 {
		select {
		case <-time.After(m.FirstByte):
		case <-r.Context().Done():
			return
		}
	}
	if m.Status != 0 {
		if m.RetryAfter != "" {
			w.Header().Set("Retry-After", m.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(m.Status)
		fmt.Fprintf(w, `{"error":{"message":"the model says %d","type":"invalid_request_error","param":null,"code":null}}`, m.Status)
		return
	}
	var model string
	json.Unmarshal(body["model"], &model)
	var stream bool
	json.Unmarshal(body["stream"], &stream)
	var so struct {
		IncludeUsage bool `json:"include_usage"`
	}
	json.Unmarshal(body["stream_options"], &so)
	prompt := 0
	var msgs []struct {
		Content any `json:"content"`
	}
	json.Unmarshal(body["messages"], &msgs)
	for _, msg := range msgs {
		if s, ok := msg.Content.(string); ok {
			prompt += len(strings.Fields(s))
		}
	}
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, len(m.Words), prompt+len(m.Words))
	created := time.Now().Unix()
	if !stream {
		content, _ := json.Marshal(strings.Join(m.Words, ""))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-fake","object":"chat.completion","created":%d,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}]`, created, model, content)
		if !m.NoUsage {
			fmt.Fprintf(w, `,"usage":%s`, usage)
		}
		fmt.Fprint(w, "}\n")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	nullUsage := ""
	if so.IncludeUsage {
		nullUsage = `,"usage":null`
	}
	send := func(delta, finish string) bool {
		if m.Delay > 0 {
			select {
			case <-time.After(m.Delay):
			case <-r.Context().Done():
				m.markGone()
				return false
			}
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\",\"created\":%d,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]%s}\n\n", created, model, delta, finish, nullUsage)
		return rc.Flush() == nil
	}
	if !send(`{"role":"assistant","content":""}`, "null") {
		return
	}
	for i, word := range m.Words {
		if m.HangAfter > 0 && i == m.HangAfter {
			<-r.Context().Done()
			m.markGone()
			return
		}
		c, _ := json.Marshal(word)
		if !send(`{"content":`+string(c)+`}`, "null") {
			return
		}
	}
	if !send(`{}`, `"stop"`) {
		return
	}
	if so.IncludeUsage && !m.NoUsage {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\",\"created\":%d,\"model\":%q,\"choices\":[],\"usage\":%s}\n\n", created, model, usage)
	}
	if !m.NoDone {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	if m.TailDelay > 0 {
		rc.Flush()
		time.Sleep(m.TailDelay)
	}
}

func (m *fakeModel) markGone() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone != nil {
		select {
		case <-m.gone:
		default:
			close(m.gone)
		}
	}
}

// fakeDir is a Directory over a fixed set of services.
type fakeDir struct {
	mu   sync.Mutex
	svcs []*ledger.Service
	rep  map[address.Address]uint64
}

func (d *fakeDir) ServicesForModel(model string) ([]*ledger.Service, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*ledger.Service
	for _, s := range d.svcs {
		if !s.Done() && s.ServesModel(model) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (d *fakeDir) OpenAIServices() ([]*ledger.Service, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*ledger.Service
	for _, s := range d.svcs {
		if !s.Done() && s.Spec.OpenAI != nil {
			out = append(out, s)
		}
	}
	return out, nil
}

func (d *fakeDir) Access() (*Access, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := &Access{Keys: map[ledger.Hash]struct{}{}}
	for _, s := range d.svcs {
		if s.Done() || s.Spec.OpenAI == nil {
			continue
		}
		a.Public = a.Public || s.Public
		for _, h := range s.KeyHashes {
			a.Keys[h] = struct{}{}
		}
	}
	return a, nil
}

func (d *fakeDir) Reputation(p address.Address) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.rep[p]; ok {
		return r
	}
	return maxReputation / 2
}

// keyOf is the service key a request carries, as the design's access rule
// reads it: Authorization: Bearer KEY or X-Gpunet-Key: KEY.
func keyOf(r *http.Request) string {
	if k := r.Header.Get("X-Gpunet-Key"); k != "" {
		return k
	}
	k, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return k
}

// authorized is the design's access rule (the relay's Authorized in a
// node): a public service, or a key whose SHA-256 is one of its hashes.
func authorized(svc *ledger.Service, r *http.Request) (string, bool) {
	k := keyOf(r)
	if svc.Public {
		return k, true
	}
	if k == "" {
		return "", false
	}
	h := ledger.Hash(sha256.Sum256([]byte(k)))
	for _, kh := range svc.KeyHashes {
		if kh == h {
			return k, true
		}
	}
	return "", false
}

func provider(i byte) address.Address { return address.Address{0: 0xaa, 1: i} }

const testKey = "sk-gpunet-test-key"

// service is an active service serving model on port 8000, public or
// reachable with testKey, with a ready replica on each provider.
func service(id uint64, model string, public bool, price uint64, provs ...address.Address) *ledger.Service {
	s := &ledger.Service{
		ID: id, Owner: address.Address{0: 0x0e, 1: byte(id)}, State: ledger.ServiceActive, Public: public,
		CreatedAt: 1_700_000_000 + int64(id),
		Spec: ledger.ServiceSpec{
			Name: "svc", Ports: []ledger.ServicePort{{Port: 8000, Protocol: ledger.PortHTTP}},
			OpenAI: &ledger.ServiceOpenAI{Port: 8000, Models: []string{model}},
		},
	}
	if !public {
		s.KeyHashes = []ledger.Hash{sha256.Sum256([]byte(testKey))}
	}
	for _, p := range provs {
		s.Replicas = append(s.Replicas, ledger.Replica{Provider: p, PricePerHour: price, Ready: true, ReadyAt: 1})
	}
	return s
}

// harness is a gateway served over real HTTP, whose Dial reaches each
// replica's fake model server over TCP on loopback.
type harness struct {
	t   *testing.T
	dir *fakeDir
	gw  *Gateway
	url string // the gateway's base URL

	mu       sync.Mutex
	backends map[replicaKey]string // replica → its model server's address ("" refuses)
	dials    []replicaKey
}

func newHarness(t *testing.T, o Options, svcs ...*ledger.Service) *harness {
	t.Helper()
	h := &harness{t: t, dir: &fakeDir{svcs: svcs, rep: map[address.Address]uint64{}}, backends: map[replicaKey]string{}}
	o.Directory = h.dir
	o.Authorized = authorized
	o.Dial = h.dial
	h.gw = New(o)
	t.Cleanup(h.gw.Close)
	srv := httptest.NewServer(h.gw)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// serve puts m behind provider p's replica of service id.
func (h *harness) serve(id uint64, p address.Address, m http.Handler) {
	srv := httptest.NewServer(m)
	h.t.Cleanup(srv.Close)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.backends[replicaKey{id, p}] = srv.Listener.Addr().String()
}

// refuse makes dials to provider p's replica of service id fail.
func (h *harness) refuse(id uint64, p address.Address) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.backends[replicaKey{id, p}] = ""
}

func (h *harness) dial(ctx context.Context, svc *ledger.Service, p address.Address, port uint64, cred string) (net.Conn, error) {
	k := replicaKey{svc.ID, p}
	h.mu.Lock()
	addr, ok := h.backends[k]
	h.dials = append(h.dials, k)
	h.mu.Unlock()
	if port != svc.Spec.OpenAI.Port {
		return nil, fmt.Errorf("dialled port %d, not the OpenAI port", port)
	}
	if !ok || addr == "" {
		return nil, fmt.Errorf("agent: ERR replica %d on %s refused", svc.ID, p)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// post sends body to the gateway's chat completions with the given
// headers (a Content-Type of JSON unless given).
func (h *harness) post(body string, hdr ...string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), http.MethodPost, h.url+PathCompletions, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// apiErr decodes an OpenAI error answer.
func apiErr(t *testing.T, resp *http.Response) errorDetail {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type %q, want application/json (body %s)", ct, b)
	}
	var eb struct {
		Error *errorDetail `json:"error"`
	}
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error == nil {
		t.Fatalf("answer %d is not an OpenAI error object: %s", resp.StatusCode, b)
	}
	if eb.Error.Message == "" || eb.Error.Type == "" {
		t.Errorf("error lacks message or type: %s", b)
	}
	return *eb.Error
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
