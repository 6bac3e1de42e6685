package relay

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestProbe: a probe reaches each replica as a request would and runs the
// readiness check there: a healthy replica passes through its agent's
// session; one whose server answers 500, one whose port is closed and one
// the node has no route to fail, each with why, however their providers
// report them. It needs the key (401), names an active service (404, 400)
// and runs one at a time per service (429).
func TestProbe(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(healthy.Close)
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	t.Cleanup(sick.Close)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	d := newDir()
	a := startNode(t, d, func(o *HubOptions) { o.HandshakeTimeout = 2 * time.Second })
	good := newProvider(1, map[uint64]string{8000: hostOf(healthy.URL)})
	bad := newProvider(2, map[uint64]string{8000: hostOf(sick.URL)})
	dead := newProvider(3, map[uint64]string{8000: closedAddr})
	gone := newProvider(4, nil) // no agent, no relay node
	svc := service(1, a.url, good, bad, dead, gone)
	svc.Spec.Readiness = ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 3, StartSeconds: 60}
	svc.Replicas[3].Relay = ""
	d.put(svc)
	for _, p := range []*provider{good, bad, dead} {
		d.providers[p.addr] = true
		p.run(t, a.url)
		waitConnected(t, a.hub, p.addr)
	}

	resp, b := do(t, "GET", a.url+"/v1/services/1/probe", "", map[string]string{HeaderKey: testKey})
	if resp.StatusCode != 200 {
		t.Fatalf("probe: %d %s", resp.StatusCode, b)
	}
	var p apiwire.ServiceProbe
	if err := json.Unmarshal(b, &p); err != nil || p.Service != 1 || p.Node != a.url || len(p.Replicas) != 4 {
		t.Fatalf("probe body %s (%v)", b, err)
	}
	for i, want := range []struct {
		ok     bool
		route  string
		status int
		err    string
	}{
		{true, "session", 200, ""},
		{false, "session", 500, "GET /health answered 500"},
		{false, "session", 0, "refused"},
		{false, "relay", 0, "no route"},
	} {
		r := p.Replicas[i]
		if r.Provider != svc.Replicas[i].Provider || !r.Ready || r.OK != want.ok || r.Route != want.route || r.Status != want.status ||
			!strings.Contains(r.Error, want.err) || (want.err == "" && r.Error != "") || r.Millis <= 0 {
			t.Errorf("replica %d: %+v, want ok %v via %s, status %d, error with %q", i, r, want.ok, want.route, want.status, want.err)
		}
	}

	for _, tc := range []struct {
		url    string
		hdr    map[string]string
		status int
	}{
		{"/v1/services/1/probe", nil, 401},
		{"/v1/services/1/probe", map[string]string{HeaderKey: "sk-gpunet-nope"}, 401},
		{"/v1/services/9/probe", map[string]string{HeaderKey: testKey}, 404},
		{"/v1/services/x/probe", map[string]string{HeaderKey: testKey}, 400},
	} {
		if resp, b := do(t, "GET", a.url+tc.url, "", tc.hdr); resp.StatusCode != tc.status {
			t.Errorf("GET %s: %d %s, want %d", tc.url, resp.StatusCode, b, tc.status)
		}
	}
}

// TestProbeOneAtATime: while a probe of a service runs, another of it at
// the same node is refused with 429 and Retry-After.
func TestProbeOneAtATime(t *testing.T) {
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-release
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	d := newDir()
	a := startNode(t, d, nil)
	p := newProvider(1, map[uint64]string{8000: hostOf(slow.URL)})
	svc := service(1, a.url, p)
	svc.Spec.Readiness = ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 10, TimeoutSeconds: 10, FailureThreshold: 3, StartSeconds: 60}
	d.put(svc)
	d.providers[p.addr] = true
	p.run(t, a.url)
	waitConnected(t, a.hub, p.addr)

	go func() {
		req, _ := http.NewRequest("GET", a.url+"/v1/services/1/probe", nil)
		req.Header.Set(HeaderKey, testKey)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the first probe never reached the replica")
	}
	resp, b := do(t, "GET", a.url+"/v1/services/1/probe", "", map[string]string{HeaderKey: testKey})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a second probe meanwhile: %d %s (Retry-After %q), want 429 with Retry-After", resp.StatusCode, b, resp.Header.Get("Retry-After"))
	}
}
