package relay

import (
	"bytes"
	"crypto/ed25519"
	"io"
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

// TestWitnessPass: a pass signed by a witness's key for this node, this
// replica and port, and about now, opens one tunnel; a reused pass, one
// for another node, replica or port, a stale one, a malformed one and one
// from a key that is not a witness here do not.
func TestWitnessPass(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	_, stranger, _ := ed25519.GenerateKey(nil)
	now := time.Unix(1_800_000_000, 0)
	const self, chain = "http://node-b:8080", "c1"
	h := NewHub(HubOptions{Self: self, ChainID: chain, Clock: func() time.Time { return now },
		IsWitness: func(pub []byte) bool { return bytes.Equal(pub, key.Public().(ed25519.PublicKey)) }})
	var prov, other address.Address
	prov[0], other[0] = 1, 2
	check := func(pass string, service uint64, p address.Address, port uint64) bool {
		r := httptest.NewRequest("GET", TunnelPath, nil)
		if pass != "" {
			r.Header.Set(HeaderWitness, pass)
		}
		return h.witnessPass(r, service, p, port)
	}
	pass := signWitnessPass(key, chain, self+"/", 7, prov, 8000, now.Add(-10*time.Second))
	for _, c := range []struct {
		name string
		pass string
		svc  uint64
		prov address.Address
		port uint64
		want bool
	}{
		{"valid", pass, 7, prov, 8000, true},
		{"reused", pass, 7, prov, 8000, false},
		{"another service", signWitnessPass(key, chain, self, 7, prov, 8000, now), 8, prov, 8000, false},
		{"another provider", signWitnessPass(key, chain, self, 7, prov, 8000, now.Add(time.Second)), 7, other, 8000, false},
		{"another port", signWitnessPass(key, chain, self, 7, prov, 8000, now.Add(2*time.Second)), 7, prov, 8001, false},
		{"another node", signWitnessPass(key, chain, "http://node-c:8080", 7, prov, 8000, now), 7, prov, 8000, false},
		{"another chain", signWitnessPass(key, "c2", self, 7, prov, 8000, now), 7, prov, 8000, false},
		{"stale", signWitnessPass(key, chain, self, 7, prov, 8000, now.Add(-2*time.Minute)), 7, prov, 8000, false},
		{"not a witness", signWitnessPass(stranger, chain, self, 7, prov, 8000, now), 7, prov, 8000, false},
		{"malformed", "zz.1.zz", 7, prov, 8000, false},
		{"truncated", strings.Join(strings.Split(pass, ".")[:2], "."), 7, prov, 8000, false},
		{"none", "", 7, prov, 8000, false},
		{"fresh", signWitnessPass(key, chain, self, 7, prov, 8000, now.Add(30*time.Second)), 7, prov, 8000, true},
	} {
		if got := check(c.pass, c.svc, c.prov, c.port); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// A node that takes no passes refuses a valid one.
	h.o.IsWitness = nil
	if check(signWitnessPass(key, chain, self, 7, prov, 8000, now), 7, prov, 8000) {
		t.Error("a hub without IsWitness took a pass")
	}
}

// FuzzWitnessPass: no header an outsider can write without a witness's
// key opens a tunnel, and none panics.
func FuzzWitnessPass(f *testing.F) {
	_, key, _ := ed25519.GenerateKey(nil)
	now := time.Unix(1_800_000_000, 0)
	var prov address.Address
	f.Add(signWitnessPass(key, "c1", "http://other:1", 7, prov, 8000, now))
	f.Add("00.0.00")
	f.Add(strings.Repeat("a", 64) + ".1800000000." + strings.Repeat("b", 128))
	h := NewHub(HubOptions{Self: "http://node-b:8080", ChainID: "c1", Clock: func() time.Time { return now },
		IsWitness: func(pub []byte) bool { return bytes.Equal(pub, key.Public().(ed25519.PublicKey)) }})
	f.Fuzz(func(t *testing.T, pass string) {
		r := httptest.NewRequest("GET", TunnelPath, nil)
		r.Header.Set(HeaderWitness, pass)
		if h.witnessPass(r, 7, prov, 8000) {
			t.Fatalf("pass %q opened a tunnel", pass)
		}
	})
}

// TestWitnessProbe: a witness at node A probes replicas whose agents hold
// their sessions at node B, of a private service whose key A does not
// hold: its tunnel's witness pass lets it through where B counts A's key
// a witness, and nowhere else. A service declaring OpenAI models is
// probed with a one-token chat completion sent as the gateway sends a
// user's: a replica that answers its readiness path but not completions
// fails it.
func TestWitnessProbe(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	var bodies []string
	serve := func(completions bool) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			seen, bodies = append(seen, r), append(bodies, string(b))
			mu.Unlock()
			switch {
			case r.URL.Path == "/health":
			case r.URL.Path == "/v1/chat/completions" && completions:
				io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"Hi"}}]}`)
			default:
				http.Error(w, "no", http.StatusNotFound)
			}
		}))
		t.Cleanup(s.Close)
		return s
	}
	good, healthOnly := serve(true), serve(false)
	_, key, _ := ed25519.GenerateKey(nil)
	witness := key.Public().(ed25519.PublicKey)
	d := newDir()
	var bURL atomic.Value
	a := startNode(t, d, func(o *HubOptions) {
		o.WitnessKey = key
		o.IsPeer = func(u string) bool { v, _ := bURL.Load().(string); return normURL(u) == normURL(v) }
	})
	takesPasses := atomic.Bool{}
	takesPasses.Store(true)
	b := startNode(t, d, func(o *HubOptions) {
		o.IsWitness = func(pub []byte) bool { return takesPasses.Load() && bytes.Equal(pub, witness) }
	})
	bURL.Store(b.url)
	p1 := newProvider(1, map[uint64]string{8000: hostOf(good.URL)})
	p2 := newProvider(2, map[uint64]string{8000: hostOf(healthOnly.URL)})
	svc := service(1, b.url, p1, p2)
	svc.Spec.Readiness = ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 3, StartSeconds: 60}
	d.put(svc)
	for _, p := range []*provider{p1, p2} {
		d.providers[p.addr] = true
		p.run(t, b.url)
		waitConnected(t, b.hub, p.addr)
	}
	// The readiness check, through B, with a pass.
	for _, p := range []*provider{p1, p2} {
		if err := a.hub.WitnessProbe(t.Context(), svc, p.addr); err != nil {
			t.Errorf("readiness probe of %s through B: %v", p.addr, err)
		}
	}
	mu.Lock()
	for _, r := range seen {
		if r.Header.Get(HeaderWitness) != "" || r.Header.Get(HeaderHop) != "" || strings.Contains(r.UserAgent(), "gpunet") {
			t.Errorf("the replica saw a probe marker: %v", r.Header)
		}
	}
	mu.Unlock()
	// B no longer counts A a witness: no tunnel, no probe.
	takesPasses.Store(false)
	if err := a.hub.WitnessProbe(t.Context(), svc, p1.addr); err == nil {
		t.Error("a probe through a node that takes no pass from A succeeded")
	}
	takesPasses.Store(true)

	// OpenAI: a one-token completion, as the gateway sends one.
	svc2 := service(2, b.url, p1, p2)
	svc2.Spec.Readiness = svc.Spec.Readiness
	svc2.Spec.OpenAI = &ledger.ServiceOpenAI{Port: 8000, Models: []string{"tinylm"}}
	d.put(svc2)
	mu.Lock()
	seen, bodies = nil, nil
	mu.Unlock()
	if err := a.hub.WitnessProbe(t.Context(), svc2, p1.addr); err != nil {
		t.Errorf("completion probe of an answering replica: %v", err)
	}
	if err := a.hub.WitnessProbe(t.Context(), svc2, p2.addr); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("completion probe of a replica that answers only its readiness path: %v, want a 404 failure", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("the replicas saw %d requests, want 2", len(seen))
	}
	r := seen[0]
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || r.Header.Get("Content-Type") != "application/json" ||
		r.Header.Get("Accept") != "application/json" || !strings.HasSuffix(r.Host, ".s2.replica.gpunet.invalid") {
		t.Errorf("completion probe: %s %s host %s headers %v", r.Method, r.URL.Path, r.Host, r.Header)
	}
	// Not declared exact: log-probabilities asked for, as the gateway asks.
	if !strings.HasPrefix(bodies[0], `{"logprobs":true,"max_tokens":1,"messages":[{"role":"user","content":"`) || !strings.HasSuffix(bodies[0], `"}],"model":"tinylm","top_logprobs":5}`) {
		t.Errorf("completion probe body %s", bodies[0])
	}
	mu.Unlock()
	svc3 := service(3, b.url, p1, p2)
	svc3.Spec.Readiness = svc.Spec.Readiness
	svc3.Spec.OpenAI = &ledger.ServiceOpenAI{Port: 8000, Models: []string{"tinylm"}, Exact: true}
	d.put(svc3)
	if err := a.hub.WitnessProbe(t.Context(), svc3, p1.addr); err != nil {
		t.Errorf("completion probe of an exact service's answering replica: %v", err)
	}
	mu.Lock()
	if n := len(bodies); n != 3 || !strings.HasPrefix(bodies[n-1], `{"max_tokens":1,"messages":[{"role":"user","content":"`) || !strings.HasSuffix(bodies[n-1], `"}],"model":"tinylm"}`) {
		t.Errorf("completion probe bodies %q: want a third, of an exact service, without log-probabilities", bodies)
	}
}
