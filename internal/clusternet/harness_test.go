package clusternet

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/relay"
	"github.com/gpunet/gpunet/internal/testnet"
)

// The tests here run each member as the containers of a gang run: a
// provider's host (a testnet host: its own network namespace, reaching the
// other hosts through testnet's delaying router) and, beside it, the
// member's own namespace holding only loopback and the WireGuard
// interface. They need root, the ip command and /dev/net/tun: without them
// they skip, and under CI=true they fail.

func needNetns(t testing.TB) {
	t.Helper()
	err := testnet.Check()
	if err == nil {
		if _, lerr := exec.LookPath("ip"); lerr != nil {
			err = lerr
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and this test needs network namespaces: %v", err)
		}
		t.Skip(err)
	}
}

// gang is n members on n testnet hosts, plus whatever strangers a test
// adds.
type gang struct {
	net     *testnet.Net
	hosts   []*testnet.Host
	nss     []string // member namespaces' names
	cfgs    []Config
	members []*Net
	prefix  string
}

type gangOptions struct {
	n int
	// delay is the one-way delay between hosts.
	delay time.Duration
	// noEndpoints gives no member a direct endpoint.
	noEndpoints bool
}

func ipRun(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// addNS makes a network namespace with loopback up, removed when the test
// ends.
func addNS(t testing.TB, name string) string {
	t.Helper()
	ipRun(t, "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	ipRun(t, "-n", name, "link", "set", "lo", "up")
	return name
}

// testLog logs WireGuard's and the relay's debug lines with
// CLUSTERNET_DEBUG=1.
func testLog() *slog.Logger {
	if os.Getenv("CLUSTERNET_DEBUG") != "1" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func nsPath(name string) string { return "/run/netns/" + name }

// newGang makes the hosts, namespaces and configurations; start brings
// the members up.
func newGang(t testing.TB, o gangOptions) *gang {
	t.Helper()
	needNetns(t)
	tn, err := testnet.New(testnet.Options{Delay: o.delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.Close() })
	var r [3]byte
	rand.Read(r[:])
	g := &gang{net: tn, prefix: fmt.Sprintf("gcn%d-%s-", os.Getpid(), hex.EncodeToString(r[:]))}
	var keys []Key
	var members []Member
	for i := range o.n {
		h, err := tn.AddHost(t.Context(), fmt.Sprintf("h%d", i))
		if err != nil {
			t.Fatal(err)
		}
		g.hosts = append(g.hosts, h)
		g.nss = append(g.nss, addNS(t, fmt.Sprintf("%sm%d", g.prefix, i)))
		k, err := NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := k.PublicKey()
		keys = append(keys, k)
		m := Member{Rank: i, PublicKey: pub}
		if !o.noEndpoints {
			m.Endpoint = netip.AddrPortFrom(h.Addr, DefaultListenPort)
		}
		members = append(members, m)
	}
	for i := range o.n {
		g.cfgs = append(g.cfgs, Config{Rank: i, PrivateKey: keys[i], Members: members})
	}
	return g
}

func (g *gang) start(t testing.TB, relayOf func(rank int) Relay) {
	t.Helper()
	for i, c := range g.cfgs {
		opt := Options{MemberNS: nsPath(g.nss[i]), HostNS: nsPath(g.hosts[i].NS), Log: testLog()}
		if relayOf != nil {
			opt.Relay = relayOf(i)
		}
		n, err := Up(c, opt)
		if err != nil {
			t.Fatalf("member %d up: %v", i, err)
		}
		t.Cleanup(func() { n.Close() })
		g.members = append(g.members, n)
	}
}

// dialFrom connects from inside namespace ns.
func dialFrom(ctx context.Context, ns, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(nsPath(ns), func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// listenIn listens inside namespace ns.
func listenIn(ns, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNetns(nsPath(ns), func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// echo serves l: each connection gets back what it sends, prefixed by
// who.
func echo(l net.Listener, who string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			buf := make([]byte, 256)
			n, _ := c.Read(buf)
			c.Write(append([]byte(who+":"), buf[:n]...))
		}()
	}
}

// ask sends msg to addr from ns and returns the answer.
func ask(ctx context.Context, ns, addr, msg string) (string, error) {
	c, err := dialFrom(ctx, ns, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if n == 0 && err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// hubRelay is the relay as a gang uses it: a node's relay.Hub served over
// HTTP on loopback, with every member's provider holding an agent session
// with it, and the gang (job gangJob, placement gangPlacement, rank i on
// provider i) in the node's directory. A member's Dial is its provider's
// agent's DialGang: member → its agent (a yamux stream on the agent's own
// session) → node (which checks both ranks against the job) → the other
// member's agent (a yamux stream), whose AcceptGang hands the stream to
// that member's Net (ServeStreamFrom the rank the node vouched for).
//
// newHubRelayNodes serves several such nodes, peers of each other, each
// reading the same gang; member i's agent holds its session with node
// i mod nodes, so a stream between members on different nodes hops from
// the asker's node to the target's (the relay's gang route across nodes).
type hubRelay struct {
	hub       *relay.Hub // the first node's
	url       string     // the first node's
	hubs      []*relay.Hub
	urls      []string
	job       *ledger.Job
	providers []address.Address
	agents    []*relay.Agent
	mu        sync.Mutex
	nets      map[int]*Net
}

const (
	gangJob       = 100
	gangPlacement = 1
)

type hubDir struct{ hr *hubRelay }

func (d hubDir) Service(uint64) (*ledger.Service, bool, error) { return nil, false, nil }

func (d hubDir) IsProvider(a address.Address) bool {
	return slices.Contains(d.hr.providers, a)
}

func (d hubDir) Job(id uint64) (*ledger.Job, bool, error) {
	if id != d.hr.job.ID {
		return nil, false, nil
	}
	c := *d.hr.job
	return &c, true, nil
}

const testChain = "clusternet-test"

func newHubRelay(t testing.TB, n int) *hubRelay { return newHubRelayNodes(t, n, 1) }

func newHubRelayNodes(t testing.TB, n, nodes int) *hubRelay {
	t.Helper()
	var ls []net.Listener
	hr := &hubRelay{nets: map[int]*Net{},
		job: &ledger.Job{ID: gangJob, State: ledger.JobRunning, Attempts: gangPlacement, Spec: ledger.JobSpec{Nodes: uint64(n)}}}
	for range nodes {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		hr.urls = append(hr.urls, "http://"+l.Addr().String())
	}
	keys := make([]ed25519.PrivateKey, n)
	for i := range n {
		_, keys[i], _ = ed25519.GenerateKey(rand.Reader)
		a := address.FromPubKey(keys[i].Public().(ed25519.PublicKey))
		hr.providers = append(hr.providers, a)
		hr.job.Assignments = append(hr.job.Assignments, ledger.Assignment{Provider: a, Rank: uint64(i)})
	}
	var srvs []*httptest.Server
	for k, l := range ls {
		others := slices.Delete(slices.Clone(hr.urls), k, k+1)
		h := relay.NewHub(relay.HubOptions{Directory: hubDir{hr}, Self: hr.urls[k], ChainID: testChain,
			IsPeer: func(u string) bool { return slices.Contains(others, u) },
			Peers:  func() []string { return others }})
		hr.hubs = append(hr.hubs, h)
		mux := http.NewServeMux()
		mux.Handle("GET "+relay.AgentPath, h.AgentHandler())
		mux.Handle("POST "+relay.NoncePath, h.NonceHandler())
		mux.Handle("GET "+relay.TunnelPath, h.TunnelHandler())
		srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
		srv.Start()
		srvs = append(srvs, srv)
	}
	hr.hub, hr.url = hr.hubs[0], hr.urls[0]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		for k, h := range hr.hubs {
			h.Close()
			srvs[k].Close()
		}
		wg.Wait()
	})
	for i := range n {
		agent := relay.NewAgent(relay.AgentOptions{
			Nodes: []string{hr.urls[i%nodes]}, Key: keys[i], ChainID: testChain,
			Dial: func(context.Context, uint64, uint64) (net.Conn, error) {
				return nil, errors.New("no services here")
			},
			AcceptGang: func(s relay.GangStream) (func(net.Conn), error) {
				hr.mu.Lock()
				m := hr.nets[i]
				hr.mu.Unlock()
				if s.Job != gangJob || s.Placement != gangPlacement || s.Rank != i || m == nil {
					return nil, errors.New("no such gang member here")
				}
				return func(c net.Conn) { m.ServeStreamFrom(c, s.From) }, nil
			},
		})
		hr.agents = append(hr.agents, agent)
		wg.Add(1)
		go func() { defer wg.Done(); agent.Run(ctx) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, p := range hr.providers {
		for !hr.hubs[i%nodes].Connected(p) {
			if time.Now().After(deadline) {
				t.Fatalf("agent %s did not connect to the hub", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The agent takes its session a moment after the node does.
	for _, a := range hr.agents {
		for a.Relay() == "" {
			if time.Now().After(deadline) {
				t.Fatal("an agent did not take its session")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return hr
}

// forMember returns rank's Relay: its provider's agent's gang route.
func (hr *hubRelay) forMember(rank int) Relay { return hubDialer{hr.agents[rank]} }

type hubDialer struct{ a *relay.Agent }

func (d hubDialer) Dial(ctx context.Context, rank int) (net.Conn, error) {
	return d.a.DialGang(ctx, gangJob, gangPlacement, rank)
}

func (hr *hubRelay) attach(rank int, n *Net) {
	hr.mu.Lock()
	hr.nets[rank] = n
	hr.mu.Unlock()
}
