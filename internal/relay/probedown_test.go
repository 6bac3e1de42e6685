package relay

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestProbeDown: ProbeDown calls a replica down only for a reason that is
// the replica's: at the node its record names as relay (or at any node,
// when it names none), an agent not connected or one refusing the stream
// (its port closed); through a peer,
// that node answering it cannot reach it. A replica that answers is not
// down, and neither is one this node has no route to, or whose relay
// node cannot be reached at all (the prober's problem, or the relay
// node's). A failed dial and an ended session are told to the hooks.
func TestProbeDown(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(healthy.Close)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	var mu sync.Mutex
	failed := map[address.Address]int{}
	ended := map[address.Address]int{}
	d := newDir()
	a := startNode(t, d, func(o *HubOptions) {
		o.HandshakeTimeout = 2 * time.Second
		o.OnSessionEnded = func(p address.Address) { mu.Lock(); ended[p]++; mu.Unlock() }
	})
	b := startNode(t, d, func(o *HubOptions) {
		o.HandshakeTimeout = 2 * time.Second
		o.IsPeer = func(u string) bool { return u == a.url || u == "http://"+closedAddr }
		o.OnDialFailed = func(_ uint64, p address.Address) { mu.Lock(); failed[p]++; mu.Unlock() }
	})
	c := startNode(t, d, nil) // no peers

	good := newProvider(1, map[uint64]string{8000: hostOf(healthy.URL)})
	dead := newProvider(2, map[uint64]string{8000: closedAddr}) // its container is gone
	gone := newProvider(3, nil)                                 // its agent is gone
	lost := newProvider(4, nil)                                 // its relay node is gone
	nowhere := newProvider(6, nil)                              // its record names no relay node
	leaving := newProvider(5, map[uint64]string{8000: hostOf(healthy.URL)})
	svc := service(1, a.url, good, dead, gone, lost, nowhere)
	svc.Public = true
	svc.Replicas[3].Relay = "http://" + closedAddr
	svc.Replicas[4].Relay = ""
	svc.Spec.Readiness = ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 3, StartSeconds: 60}
	d.put(svc)
	for _, p := range []*provider{good, dead, gone, lost, nowhere, leaving} {
		d.providers[p.addr] = true
	}
	for _, p := range []*provider{good, dead} {
		p.run(t, a.url)
		waitConnected(t, a.hub, p.addr)
	}
	for _, tc := range []struct {
		name string
		at   *node
		p    *provider
		down bool
	}{
		{"answers, at its relay", a, good, false},
		{"answers, through a peer", b, good, false},
		{"port closed, at its relay", a, dead, true},
		{"port closed, through a peer", b, dead, true},
		{"agent gone, at its relay", a, gone, true},
		{"agent gone, through a peer", b, gone, true},
		{"agent gone, no route from here", c, gone, false},
		{"relay node unreachable", b, lost, false},
		{"no relay named, no session here", b, nowhere, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.at.hub.ProbeDown(t.Context(), svc, tc.p.addr)
			if got := errors.Is(err, ErrReplicaDown); got != tc.down {
				t.Fatalf("ProbeDown: %v; down %v, want %v", err, got, tc.down)
			}
			if !tc.down && tc.p == good && err != nil {
				t.Fatalf("ProbeDown of a replica that answers: %v", err)
			}
		})
	}
	if err := a.hub.ProbeDown(t.Context(), svc, leaving.addr); err == nil || errors.Is(err, ErrReplicaDown) {
		t.Fatalf("ProbeDown of no replica of the service: %v, want an error that is not down", err)
	}
	mu.Lock()
	if failed[gone.addr] == 0 || failed[dead.addr] == 0 || failed[good.addr] != 0 {
		t.Errorf("failed dials told: %v; want gone's and dead's, not good's", failed)
	}
	mu.Unlock()

	// An agent whose session ends, replaced by none, is told once.
	leaving.agent = NewAgent(AgentOptions{Nodes: []string{a.url}, Key: leaving.key, Dial: leaving.dial, ChainID: testChain})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { leaving.agent.Run(ctx); close(done) }()
	waitConnected(t, a.hub, leaving.addr)
	cancel()
	<-done
	waitFor(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return ended[leaving.addr] == 1 })
}
