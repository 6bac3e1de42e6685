package relay

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
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

// dir is an in-memory Directory.
type dir struct {
	mu        sync.Mutex
	services  map[uint64]*ledger.Service
	providers map[address.Address]bool
	jobs      map[uint64]*ledger.Job
}

func newDir() *dir {
	return &dir{services: map[uint64]*ledger.Service{}, providers: map[address.Address]bool{}, jobs: map[uint64]*ledger.Job{}}
}

// Job makes dir a GangDirectory.
func (d *dir) Job(id uint64) (*ledger.Job, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, ok := d.jobs[id]
	if !ok {
		return nil, false, nil
	}
	c := *j
	c.Assignments = append([]ledger.Assignment(nil), j.Assignments...)
	return &c, true, nil
}

func (d *dir) putJob(j *ledger.Job) {
	d.mu.Lock()
	d.jobs[j.ID] = j
	d.mu.Unlock()
}

func (d *dir) Service(id uint64) (*ledger.Service, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.services[id]
	if !ok {
		return nil, false, nil
	}
	c := *s
	return &c, true, nil
}

func (d *dir) IsProvider(a address.Address) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.providers[a]
}

func (d *dir) put(s *ledger.Service) {
	d.mu.Lock()
	d.services[s.ID] = s
	d.mu.Unlock()
}

// node is a hub served over real HTTP on loopback.
type node struct {
	hub     *Hub
	srv     *httptest.Server
	url     string
	tunnels atomic.Int64 // requests to the tunnel route
}

// startNode serves a hub; edit adjusts its options (Self and Directory are
// set already).
func startNode(t testing.TB, d Directory, edit func(*HubOptions)) *node {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startNodeOn(t, l, d, edit)
}

func startNodeOn(t testing.TB, l net.Listener, d Directory, edit func(*HubOptions)) *node {
	t.Helper()
	n := &node{url: "http://" + l.Addr().String()}
	o := HubOptions{Directory: d, Self: n.url, ChainID: testChain}
	if edit != nil {
		edit(&o)
	}
	n.hub = NewHub(o)
	mux := http.NewServeMux()
	mux.Handle("GET "+AgentPath, n.hub.AgentHandler())
	mux.Handle("POST "+NoncePath, n.hub.NonceHandler())
	tun := n.hub.TunnelHandler()
	mux.Handle(TunnelPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.tunnels.Add(1)
		tun.ServeHTTP(w, r)
	}))
	mux.Handle(ServicePrefix, n.hub.ServiceHandler())
	mux.Handle("GET /v1/services/{id}/probe", n.hub.ProbeHandler())
	n.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	n.srv.Start()
	t.Cleanup(n.stop)
	return n
}

func (n *node) stop() {
	n.hub.Close()
	n.srv.Close()
}

// provider is a key with an agent serving ports from a table.
type provider struct {
	key   ed25519.PrivateKey
	addr  address.Address
	ports map[uint64]string // port → backend address
	agent *Agent
	dials atomic.Int64
	// gang, when set, is the agent's AcceptGang.
	gang func(s GangStream) (func(net.Conn), error)
}

func newProvider(seed byte, ports map[uint64]string) *provider {
	var s [32]byte
	s[0] = seed
	key := ed25519.NewKeyFromSeed(s[:])
	return &provider{key: key, addr: address.FromPubKey(key.Public().(ed25519.PublicKey)), ports: ports}
}

func (p *provider) dial(ctx context.Context, service, port uint64) (net.Conn, error) {
	p.dials.Add(1)
	a, ok := p.ports[port]
	if !ok {
		return nil, errNoSuchPort
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", a)
}

var errNoSuchPort = &net.AddrError{Err: "no such port", Addr: "replica"}

// run starts p's agent against nodes until the test ends.
func (p *provider) run(t testing.TB, nodes ...string) {
	t.Helper()
	p.agent = NewAgent(AgentOptions{Nodes: nodes, Key: p.key, Dial: p.dial, AcceptGang: p.gang, ChainID: testChain})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.agent.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitConnected waits until hub holds p's session.
func waitConnected(t testing.TB, h *Hub, p address.Address) {
	t.Helper()
	waitFor(t, 10*time.Second, func() bool { return h.Connected(p) })
}

func waitFor(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const testKey = "sk-gpunet-test-key"

// testChain is the chain of the test nodes and agents.
const testChain = "test-chain"

func keyHash(k string) ledger.Hash { return ledger.Hash(sha256.Sum256([]byte(k))) }

// service returns an active private service (key testKey) with an http
// port 8000 and a tcp port 9000, a ready replica on each provider, whose
// agent is at relay.
func service(id uint64, relay string, providers ...*provider) *ledger.Service {
	s := &ledger.Service{
		ID:    id,
		State: ledger.ServiceActive,
		Spec: ledger.ServiceSpec{Ports: []ledger.ServicePort{
			{Port: 8000, Protocol: ledger.PortHTTP},
			{Port: 9000, Protocol: ledger.PortTCP},
		}},
		KeyHashes: []ledger.Hash{keyHash(testKey)},
	}
	for _, p := range providers {
		s.Replicas = append(s.Replicas, ledger.Replica{Provider: p.addr, Ready: true, ReadyAt: 1, Relay: relay})
	}
	return s
}

func hostOf(u string) string { _, h, _ := strings.Cut(u, "://"); return h }

func addrFromKey(k ed25519.PrivateKey) address.Address {
	return address.FromPubKey(k.Public().(ed25519.PublicKey))
}
