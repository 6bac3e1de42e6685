package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/clock/clocktest"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
	"github.com/gpunet/gpunet/internal/seal"
)

// svcChain is a node, in memory, that lists the services a test sets and
// records what the agent sends: the agent's side of services is tested
// without the ledger's placement and billing.
type svcChain struct {
	me address.Address

	mu       sync.Mutex
	info     ledger.ProviderInfo
	services []*ledger.Service
	msgs     []ledger.Msg
	logs     map[uint64][][]byte
	lastSeq  map[uint64]uint64 // the last post number per service
}

func (c *svcChain) Provider(ctx context.Context, a address.Address) (*apiwire.ProviderBody, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &apiwire.ProviderBody{Record: &ledger.Provider{Address: a, ProviderInfo: c.info, Online: true, Stake: 1 << 40}}, nil
}

func (c *svcChain) Balance(ctx context.Context, a address.Address) (*apiwire.BalanceBody, error) {
	return &apiwire.BalanceBody{Address: a.String()}, nil
}

func (c *svcChain) Params(ctx context.Context) (*ledger.Params, error) {
	return &ledger.Params{ServiceHeartbeatInterval: 2}, nil
}

func (c *svcChain) SendMsg(ctx context.Context, key chainclient.Signer, fee uint64, msg ledger.Msg) (*apiwire.TxResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m := msg.(type) {
	case *ledger.MsgRegisterProvider:
		c.info = m.ProviderInfo
	case *ledger.MsgUpdateProvider:
		c.info = m.ProviderInfo
	}
	c.msgs = append(c.msgs, msg)
	return &apiwire.TxResult{}, nil
}

func (c *svcChain) SubmitMsg(ctx context.Context, key chainclient.Signer, fee uint64, msg ledger.Msg) (*apiwire.TxResult, error) {
	return c.SendMsg(ctx, key, fee, msg)
}

func (c *svcChain) ProviderJobs(ctx context.Context, p address.Address) (*apiwire.JobList, error) {
	return &apiwire.JobList{}, nil
}

func (c *svcChain) PostLog(ctx context.Context, key chainclient.Signer, job, seq uint64, data []byte) error {
	return nil
}

func (c *svcChain) ProviderServices(ctx context.Context, p address.Address) (*apiwire.ServiceList, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &apiwire.ServiceList{Services: slices.Clone(c.services)}, nil
}

func (c *svcChain) PostServiceLog(ctx context.Context, key chainclient.Signer, service, seq uint64, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// As a node does: a provider's post numbers for a service rise, and
	// may jump (each run of a replica numbers from its start time).
	if last, ok := c.lastSeq[service]; ok && seq <= last {
		return fmt.Errorf("log chunk %d of service %d out of order (last %d)", seq, service, last)
	}
	if c.lastSeq == nil {
		c.lastSeq = map[uint64]uint64{}
	}
	c.lastSeq[service] = seq
	c.logs[service] = append(c.logs[service], data)
	return nil
}

func (c *svcChain) setServices(s ...*ledger.Service) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.services = s
}

// sent returns the messages of type T sent so far.
func sent[T ledger.Msg](c *svcChain) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []T
	for _, m := range c.msgs {
		if t, ok := m.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// serviceLog is what the agent relayed of a service's log, decrypted.
func (c *svcChain) serviceLog(t *testing.T, id uint64, owner age.Identity) string {
	c.mu.Lock()
	chunks := slices.Clone(c.logs[id])
	c.mu.Unlock()
	var all bytes.Buffer
	for _, ch := range chunks {
		r, err := seal.Decrypt(bytes.NewReader(ch), owner)
		if err != nil {
			t.Fatalf("a log chunk does not open with the owner's key: %v", err)
		}
		io.Copy(&all, r)
	}
	return all.String()
}

type fakeLink struct{ dial provider.ReplicaDialer }

func (l *fakeLink) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (l *fakeLink) Relay() string                 { return "http://node-a:8080" }

// eventually waits (in real time) for cond, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestServiceReplicas runs an agent on a fast fake clock against svcChain,
// with the fake executor's services: a listed replica starts, goes ready
// (reported in a heartbeat with the relay link's node), answers through
// DialReplica (declared ports of known services only) and relays its log
// sealed to the owner; when its readiness fails FailureThreshold times in
// a row it is stopped and given back, and not started again while the
// chain still lists it; a replica no longer listed is stopped without a
// release; at shutdown the running replica is given back and stopped.
func TestServiceReplicas(t *testing.T) {
	kr, err := keys.Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.AddUnencrypted("p1")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	chain := &svcChain{me: k.Address, logs: map[uint64][][]byte{}}
	healthy := map[uint64]*atomic.Bool{}
	var hmu sync.Mutex
	ex := fake.New(nil).WithName("oci").WithService(func(svc *sandbox.Service, logs io.Writer) ([]uint16, http.Handler, error) {
		var id uint64
		fmt.Sscanf(svc.ID, "svc-%d", &id)
		hmu.Lock()
		ok := healthy[id]
		hmu.Unlock()
		fmt.Fprintf(logs, "service %d listening\n", id)
		mux := http.NewServeMux()
		mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
			if !ok.Load() {
				http.Error(w, "sick", http.StatusServiceUnavailable)
			}
		})
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello from %d", id) })
		return []uint16{8000}, mux, nil
	})
	service := func(id uint64) *ledger.Service {
		ok := &atomic.Bool{}
		ok.Store(true)
		hmu.Lock()
		healthy[id] = ok
		hmu.Unlock()
		return &ledger.Service{
			ID: id, State: ledger.ServiceActive, ConsumerKey: owner.Recipient().String(),
			Spec: ledger.ServiceSpec{
				Name: "s", Image: "example.com/s@sha256:" + strings.Repeat("a", 64), Memory: 64 << 20, CPUMilli: 500, Disk: 1 << 20,
				Ports:     []ledger.ServicePort{{Port: 8000, Protocol: ledger.PortHTTP}},
				Readiness: ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 2, StartSeconds: 30},
			},
			Replicas: []ledger.Replica{{Provider: k.Address, AssignedAt: 100}},
		}
	}
	var link *fakeLink
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	a := provider.New(provider.Options{
		Key: k, Chain: chain, Region: "eu", Executors: []string{"oci"}, Poll: 100 * time.Millisecond, Clock: clk,
		Sandboxes: map[string]sandbox.Executor{"oci": ex},
		Inventory: &hwinfo.Inventory{CPUModel: "test", CPUCores: 4, RAMBytes: 8 << 30, DiskFreeBytes: 100 << 30, OS: "linux", Arch: "amd64"},
		Figures:   figures(), WorkDir: t.TempDir(),
		// As the devnet and provider start do: metrics wrap the chain,
		// which must not hide that it runs services.
		Metrics: provider.NewMetrics(prometheus.NewRegistry()),
		Relay: func(dial provider.ReplicaDialer) provider.RelayLink {
			link = &fakeLink{dial: dial}
			return link
		},
	})
	// The clock runs at about 50 times real time.
	stopClock := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopClock:
				return
			case <-time.After(2 * time.Millisecond):
				clk.Advance(100 * time.Millisecond)
			}
		}
	}()
	defer close(stopClock)
	s1 := service(1)
	chain.setServices(s1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	defer stop()

	readyIn := func(id uint64) func() bool {
		return func() bool {
			for _, hb := range sent[*ledger.MsgServiceHeartbeat](chain) {
				for _, r := range hb.Replicas {
					if r.ServiceID == id && r.Ready && r.Relay == "http://node-a:8080" {
						return true
					}
				}
			}
			return false
		}
	}
	eventually(t, "a heartbeat reporting service 1 ready through node-a", readyIn(1))

	// The relay link's dial reaches the replica's declared port only.
	get := func(dial func(context.Context) (net.Conn, error)) (string, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}}
		resp, err := c.Get("http://replica/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	body, err := get(func(ctx context.Context) (net.Conn, error) { return link.dial(ctx, 1, 8000) })
	if err != nil || body != "hello from 1" {
		t.Fatalf("GET through the relay's dial: %q, %v", body, err)
	}
	if c, err := link.dial(t.Context(), 1, 9000); err == nil {
		c.Close()
		t.Errorf("dial of an undeclared port succeeded")
	}
	if c, err := link.dial(t.Context(), 7, 8000); err == nil {
		c.Close()
		t.Errorf("dial of an unknown service succeeded")
	}
	eventually(t, "service 1's log relayed, sealed to the owner", func() bool {
		return strings.Contains(chain.serviceLog(t, 1, owner), "service 1 listening")
	})

	// Readiness fails: after 2 failed checks in a row, the replica is
	// stopped and given back.
	healthy[1].Store(false)
	eventually(t, "service 1 given back", func() bool { return len(sent[*ledger.MsgReleaseReplica](chain)) > 0 })
	rel := sent[*ledger.MsgReleaseReplica](chain)[0]
	if rel.ServiceID != 1 || !strings.Contains(rel.Reason, "readiness check failed 2 times in a row") {
		t.Errorf("release = %+v", rel)
	}
	eventually(t, "service 1's container stopped", func() bool { return len(ex.Running()) == 0 })
	if got := chain.serviceLog(t, 1, owner); !strings.Contains(got, "giving the replica back") {
		t.Errorf("the log does not say why the replica was given back:\n%s", got)
	}
	if c, err := link.dial(t.Context(), 1, 8000); err == nil {
		c.Close()
		t.Errorf("dial of a released replica succeeded")
	}

	// The chain still lists it (the release's block has not come): the
	// agent does not start it again. A new service starts.
	chain.setServices(s1, service(2))
	eventually(t, "service 2 ready", readyIn(2))
	if n := len(ex.Services()); n != 2 {
		t.Errorf("%d containers started, want 2 (service 1 must not be started again)", n)
	}
	for _, hb := range sent[*ledger.MsgServiceHeartbeat](chain) {
		if hb.Replicas[len(hb.Replicas)-1].ServiceID == 2 {
			for _, r := range hb.Replicas {
				if r.ServiceID == 1 {
					t.Errorf("a heartbeat after the release reports service 1: %+v", hb)
				}
			}
		}
	}

	// No longer listed (stopped, say): stopped, not given back.
	chain.setServices(service(3))
	eventually(t, "service 2's container stopped", func() bool {
		for _, s := range ex.Running() {
			if s.Spec.ID == "svc-2" {
				return false
			}
		}
		return true
	})
	eventually(t, "service 3 ready", readyIn(3))
	for _, r := range sent[*ledger.MsgReleaseReplica](chain) {
		if r.ServiceID == 2 {
			t.Errorf("service 2, no longer listed, was given back: %+v", r)
		}
	}

	// Shutdown: service 3 is given back, then stopped.
	stop()
	var released []uint64
	for _, r := range sent[*ledger.MsgReleaseReplica](chain) {
		released = append(released, r.ServiceID)
	}
	if want := []uint64{1, 3}; !slices.Equal(released, want) {
		t.Errorf("released %v, want %v", released, want)
	}
	if n := len(ex.Running()); n != 0 {
		t.Errorf("%d containers still running after the agent stopped", n)
	}
}

// startServiceAgent runs an agent with the fake executor's services (b)
// against chain, on clk, which a goroutine advances by step every 2 ms of
// real time until the test ends; link, when set, is its relay link.
func startServiceAgent(t *testing.T, chain *svcChain, k *keys.Key, clk *clocktest.Fake, step time.Duration, b fake.ServiceBehavior, link func(provider.ReplicaDialer) provider.RelayLink) {
	t.Helper()
	ex := fake.New(nil).WithName("oci").WithService(b)
	a := provider.New(provider.Options{
		Key: k, Chain: chain, Region: "eu", Executors: []string{"oci"}, Poll: 100 * time.Millisecond, Clock: clk,
		Sandboxes: map[string]sandbox.Executor{"oci": ex},
		Inventory: &hwinfo.Inventory{CPUModel: "test", CPUCores: 4, RAMBytes: 8 << 30, DiskFreeBytes: 100 << 30, OS: "linux", Arch: "amd64"},
		Figures:   figures(), WorkDir: t.TempDir(), Relay: link,
	})
	stopClock := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopClock:
				return
			case <-time.After(2 * time.Millisecond):
				clk.Advance(step)
			}
		}
	}()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		close(stopClock)
	})
}

func serviceKey(t *testing.T) *keys.Key {
	t.Helper()
	kr, err := keys.Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.AddUnencrypted("p1")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestServiceReadyCheckedSoon (issue 36): a replica whose server listens
// a moment after its container starts is reported ready within a fraction
// of its readiness interval: checked at once, then again soon after,
// backing off, rather than only an interval later.
func TestServiceReadyCheckedSoon(t *testing.T) {
	k := serviceKey(t)
	owner, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	chain := &svcChain{me: k.Address, logs: map[uint64][][]byte{}}
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	var mu sync.Mutex
	var checks []time.Time // fake time of each readiness check
	startServiceAgent(t, chain, k, clk, 10*time.Millisecond, func(svc *sandbox.Service, logs io.Writer) ([]uint16, http.Handler, error) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			checks = append(checks, clk.Now())
			n := len(checks)
			mu.Unlock()
			if n <= 2 { // not listening yet
				http.Error(w, "starting", http.StatusServiceUnavailable)
			}
		})
		return []uint16{8000}, h, nil
	}, func(dial provider.ReplicaDialer) provider.RelayLink { return &fakeLink{dial: dial} })
	chain.setServices(&ledger.Service{
		ID: 1, State: ledger.ServiceActive, ConsumerKey: owner.Recipient().String(),
		Spec: ledger.ServiceSpec{
			Name: "s", Image: "example.com/s@sha256:" + strings.Repeat("a", 64), Memory: 64 << 20, CPUMilli: 500, Disk: 1 << 20,
			Ports:     []ledger.ServicePort{{Port: 8000, Protocol: ledger.PortHTTP}},
			Readiness: ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 10, TimeoutSeconds: 1, FailureThreshold: 2, StartSeconds: 300},
		},
		Replicas: []ledger.Replica{{Provider: k.Address, AssignedAt: 100}},
	})
	eventually(t, "a heartbeat reporting the replica ready", func() bool {
		for _, hb := range sent[*ledger.MsgServiceHeartbeat](chain) {
			for _, r := range hb.Replicas {
				if r.Ready {
					return true
				}
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	if len(checks) < 3 {
		t.Fatalf("%d readiness checks, want 3 (two failed, then ready)", len(checks))
	}
	if took := checks[2].Sub(checks[0]); took >= 10*time.Second {
		t.Errorf("ready %s after the first check, want well within the 10 s interval (checks at %v)", took, checks)
	}
}

// runLink is a relay link that says when it was started.
type runLink struct {
	fakeLink
	started chan struct{}
}

func (l *runLink) Run(ctx context.Context) error {
	close(l.started)
	<-ctx.Done()
	return nil
}

// TestRelayLinkAtStart (issue 36): an agent that can run services opens
// its relay session when it starts, before any replica is placed on it,
// so that the session's handshake is not on a first answer's path.
func TestRelayLinkAtStart(t *testing.T) {
	k := serviceKey(t)
	chain := &svcChain{me: k.Address, logs: map[uint64][][]byte{}}
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	link := &runLink{started: make(chan struct{})}
	startServiceAgent(t, chain, k, clk, 10*time.Millisecond, fake.Serve(http.NotFoundHandler()), func(dial provider.ReplicaDialer) provider.RelayLink {
		link.dial = dial
		return link
	})
	select {
	case <-link.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no relay link started by an agent that runs services and has no replica yet")
	}
}
