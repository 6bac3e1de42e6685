package clusternet

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/allreduce/ring"
)

const echoPort = 7000

// serveEchoes starts an echo server on every member's private address.
func (g *gang) serveEchoes(t *testing.T) {
	t.Helper()
	for i, ns := range g.nss {
		l, err := listenIn(ns, netip.AddrPortFrom(g.members[i].Address(), echoPort).String())
		if err != nil {
			t.Fatalf("member %d listen: %v", i, err)
		}
		t.Cleanup(func() { l.Close() })
		go echo(l, fmt.Sprintf("m%d", i))
	}
}

// checkAllReach asks every member's echo server from every other member.
func (g *gang) checkAllReach(t *testing.T) {
	t.Helper()
	for i := range g.members {
		for j := range g.members {
			if i == j {
				continue
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			to := netip.AddrPortFrom(Address(DefaultNetwork, j), echoPort).String()
			got, err := ask(ctx, g.nss[i], to, "hello")
			cancel()
			if want := fmt.Sprintf("m%d:hello", j); err != nil || got != want {
				for k, m := range g.members {
					p, _ := m.Peers()
					t.Logf("member %d: %+v\n%s", k, m.Stats(), p)
				}
				t.Fatalf("member %d asked member %d at %s: got %q, %v; want %q", i, j, to, got, err, want)
			}
		}
	}
}

// unreachable says whether a TCP connection to addr from ns fails within
// wait.
func unreachable(t *testing.T, ns, addr string, wait time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	got, err := ask(ctx, ns, addr, "let me in")
	if err == nil {
		t.Logf("from %s, %s answered %q", ns, addr, got)
	}
	return err != nil
}

// TestMembersReachOnlyEachOther: three members in three namespaces reach
// each other at their private addresses, through WireGuard over their
// hosts' UDP; a member's namespace holds nothing but loopback and the
// WireGuard interface, so it reaches no host; and a fourth party, on the
// hosts' network with a WireGuard of its own and the members' keys and
// endpoints, reaches no member.
func TestMembersReachOnlyEachOther(t *testing.T) {
	g := newGang(t, gangOptions{n: 3, delay: 2 * time.Millisecond})
	g.start(t, nil)
	g.serveEchoes(t)
	g.checkAllReach(t)
	for i, n := range g.members {
		if s := n.Stats(); s.DirectRecv == 0 || s.RelaySent != 0 {
			t.Errorf("member %d: %+v: want packets received directly and none relayed (no relay configured)", i, s)
		}
	}

	// The member's namespace: loopback and the WireGuard interface only.
	out, err := exec.Command("ip", "-n", g.nss[0], "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		links = append(links, strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
	}
	if strings.Join(links, ",") != "lo,"+DefaultInterface {
		t.Errorf("member 0's namespace has links %v; want lo and %s only", links, DefaultInterface)
	}
	// From a member, the hosts' network is not there: no route out.
	hostEcho, err := listenIn(g.hosts[1].NS, netip.AddrPortFrom(g.hosts[1].Addr, echoPort).String())
	if err != nil {
		t.Fatal(err)
	}
	defer hostEcho.Close()
	go echo(hostEcho, "host1")
	if !unreachable(t, g.nss[0], netip.AddrPortFrom(g.hosts[1].Addr, echoPort).String(), 3*time.Second) {
		t.Errorf("member 0 reached host 1's address %s: a member must reach members only", g.hosts[1].Addr)
	}
	// And the host's echo is reachable from host 0, so the check above
	// failed for the right reason.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	if got, err := ask(ctx, g.hosts[0].NS, netip.AddrPortFrom(g.hosts[1].Addr, echoPort).String(), "x"); err != nil || got != "host1:x" {
		t.Errorf("host 0 → host 1: %q, %v", got, err)
	}
	cancel()

	// A stranger: a fourth host with its own WireGuard configured as if
	// it were a fourth member (the members' keys and endpoints, a key of
	// its own), which the members' configurations do not list.
	sh, err := g.net.AddHost(t.Context(), "stranger")
	if err != nil {
		t.Fatal(err)
	}
	sns := addNS(t, g.prefix+"stranger")
	sk, _ := NewPrivateKey()
	spub, _ := sk.PublicKey()
	sc := Config{Rank: 3, PrivateKey: sk, Members: append(append([]Member(nil), g.cfgs[0].Members...),
		Member{Rank: 3, PublicKey: spub, Endpoint: netip.AddrPortFrom(sh.Addr, DefaultListenPort)})}
	sn, err := Up(sc, Options{MemberNS: nsPath(sns), HostNS: nsPath(sh.NS)})
	if err != nil {
		t.Fatalf("stranger up: %v", err)
	}
	defer sn.Close()
	for j := range g.members {
		to := netip.AddrPortFrom(Address(DefaultNetwork, j), echoPort).String()
		if !unreachable(t, sns, to, 3*time.Second) {
			t.Errorf("the stranger reached member %d at %s", j, to)
		}
		// Nor from the stranger's host, which has no route to the
		// private network at all.
		if !unreachable(t, sh.NS, to, time.Second) {
			t.Errorf("the stranger's host reached member %d at %s", j, to)
		}
	}
	if s := sn.Stats(); s.DirectRecv != 0 {
		t.Errorf("the stranger received %d packets from members: they must not answer an unknown key", s.DirectRecv)
	}
	// The members still reach each other.
	g.checkAllReach(t)
}

// buildAllreduce builds the example program once per test binary run.
func buildAllreduce(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "allreduce")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/gpunet/gpunet/examples/allreduce")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build allreduce: %v\n%s", err, out)
	}
	return bin
}

// runAllreduce runs the example as each member's one process, in the
// member's namespace with the gang's environment, and returns their
// digest lines' digests.
func runAllreduce(t *testing.T, g *gang, bin string, n int, seed uint64) []string {
	t.Helper()
	dir := t.TempDir()
	members := filepath.Join(dir, "members")
	if err := os.WriteFile(members, g.cfgs[0].WriteMembers(1), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	type result struct {
		out []byte
		err error
	}
	res := make([]chan result, len(g.members))
	for i, c := range g.cfgs {
		res[i] = make(chan result, 1)
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", g.nss[i], bin, "-n", fmt.Sprint(n), "-seed", fmt.Sprint(seed), "-timeout", "90s")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, c.Env(DefaultMasterPort, 1, 0, members)...)
		go func() {
			out, err := cmd.CombinedOutput()
			res[i] <- result{out, err}
		}()
	}
	var digests []string
	for i := range res {
		r := <-res[i]
		if r.err != nil {
			t.Fatalf("rank %d: %v\n%s", i, r.err, r.out)
		}
		_, d, ok := strings.Cut(strings.TrimSpace(string(r.out)), "sha256=")
		if !ok {
			t.Fatalf("rank %d printed %q", i, r.out)
		}
		t.Logf("rank %d: %s", i, strings.TrimSpace(string(r.out)))
		digests = append(digests, d)
	}
	return digests
}

// TestAllReduceOverPrivateNetwork: the example all-reduce, one process per
// member, over the private network, gives every rank the one-process
// result (the program's -local run and ring.Sum agree on it).
func TestAllReduceOverPrivateNetwork(t *testing.T) {
	g := newGang(t, gangOptions{n: 3, delay: 2 * time.Millisecond})
	g.start(t, nil)
	bin := buildAllreduce(t)
	const n, seed = 300_000, 42
	want := ring.Digest(ring.Sum(seed, 3, n))
	out, err := exec.Command(bin, "-local", "3", "-n", fmt.Sprint(n), "-seed", fmt.Sprint(seed)).Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "sha256="+want) {
		t.Fatalf("allreduce -local 3: %q, %v; want sha256=%s", out, err, want)
	}
	for i, d := range runAllreduce(t, g, bin, n, seed) {
		if d != want {
			t.Errorf("rank %d: sha256 %s, want the one-process %s", i, d, want)
		}
	}
}

// TestRelayWhenNoDirectPath: with no direct UDP path between the members
// (no endpoints for one gang; for another, endpoints that a blackhole
// route on every host makes unreachable), their packets go through the
// relay's gang route (a real relay.Hub and the members' providers'
// agents), and the all-reduce still gives the one-process result; also
// when the members' agents are connected to two different nodes, whose
// gang streams hop from one node to the other.
func TestRelayWhenNoDirectPath(t *testing.T) {
	for _, tc := range []struct {
		name        string
		noEndpoints bool
		nodes       int // relay nodes; member i's agent is on node i mod nodes
	}{{"no endpoints", true, 1}, {"direct UDP blocked", false, 1}, {"members on two nodes", true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGang(t, gangOptions{n: 3, delay: 2 * time.Millisecond, noEndpoints: tc.noEndpoints})
			if !tc.noEndpoints {
				// Every host drops what it would send to another host:
				// the endpoints are known but nothing reaches them.
				for i, h := range g.hosts {
					for j, o := range g.hosts {
						if i != j {
							ipRun(t, "-n", h.NS, "route", "add", "blackhole", o.Addr.String()+"/32")
						}
					}
				}
			}
			hr := newHubRelayNodes(t, 3, tc.nodes)
			g.start(t, hr.forMember)
			for i, m := range g.members {
				hr.attach(i, m)
			}
			g.serveEchoes(t)
			g.checkAllReach(t)
			bin := buildAllreduce(t)
			const n, seed = 100_000, 9
			want := ring.Digest(ring.Sum(seed, 3, n))
			for i, d := range runAllreduce(t, g, bin, n, seed) {
				if d != want {
					t.Errorf("rank %d: sha256 %s, want the one-process %s", i, d, want)
				}
			}
			for i, m := range g.members {
				s := m.Stats()
				if s.RelayRecv == 0 || s.RelaySent == 0 || s.DirectRecv != 0 {
					t.Errorf("member %d: %+v: want packets both ways through the relay and none directly", i, s)
				}
			}
		})
	}
}

// TestDirectPreferredOverRelay: with a relay configured and direct UDP
// working, the members' traffic goes direct once it is heard: the bulk of
// an all-reduce does not go through the relay.
func TestDirectPreferredOverRelay(t *testing.T) {
	g := newGang(t, gangOptions{n: 3, delay: 2 * time.Millisecond})
	hr := newHubRelay(t, 3)
	g.start(t, hr.forMember)
	for i, m := range g.members {
		hr.attach(i, m)
	}
	g.serveEchoes(t)
	g.checkAllReach(t)
	before := make([]Stats, 3)
	for i, m := range g.members {
		before[i] = m.Stats()
	}
	bin := buildAllreduce(t)
	const n, seed = 300_000, 5
	want := ring.Digest(ring.Sum(seed, 3, n))
	for i, d := range runAllreduce(t, g, bin, n, seed) {
		if d != want {
			t.Errorf("rank %d: sha256 %s, want %s", i, d, want)
		}
	}
	for i, m := range g.members {
		s := m.Stats()
		direct, relayed := s.DirectRecv-before[i].DirectRecv, s.RelayRecv-before[i].RelayRecv
		// 300k int64s: ~1.6 MB to each member in ~1100 packets.
		if direct < 500 || relayed > direct/10 {
			t.Errorf("member %d during the all-reduce: %d packets direct, %d relayed: want the bulk direct", i, direct, relayed)
		}
	}
}

// TestUpErrors: Up refuses a bad configuration before making anything,
// names a namespace it cannot enter, and leaves no interface behind when
// WireGuard cannot open its socket.
func TestUpErrors(t *testing.T) {
	c := testConfig(t, 2, 0)
	c.Members[1].Rank = 5
	if _, err := Up(c, Options{MemberNS: "/nonexistent"}); err == nil || !strings.Contains(err.Error(), "rank order") {
		t.Errorf("bad config: %v", err)
	}
	c = testConfig(t, 2, 0)
	if _, err := Up(c, Options{MemberNS: "/run/netns/gpunet-no-such-namespace"}); err == nil || !strings.Contains(err.Error(), "gpunet-no-such-namespace") {
		t.Errorf("missing namespace: %v", err)
	}
	if _, err := Up(c, Options{Interface: "a/b"}); err == nil || !strings.Contains(err.Error(), "interface name") {
		t.Errorf("bad interface name: %v", err)
	}
	needNetns(t)
	ns := addNS(t, fmt.Sprintf("gcn%d-uperr", os.Getpid()))
	_, err := Up(c, Options{MemberNS: nsPath(ns), HostNS: "/run/netns/gpunet-no-such-host"})
	if err == nil || !strings.Contains(err.Error(), "gpunet-no-such-host") {
		t.Errorf("missing host namespace: %v", err)
	}
	out, _ := exec.Command("ip", "-n", ns, "-o", "link", "show").Output()
	if strings.Contains(string(out), DefaultInterface) {
		t.Errorf("%s left behind after a failed Up:\n%s", DefaultInterface, out)
	}
}

// TestGreetAfterLateStart: member 0 comes up first, and its first
// handshake to member 1, not up yet, is lost; WireGuard would send the
// next only 5 s later. Member 1 comes up and greets (Net.Greet, as the
// provider agent does for the last member up): member 0 reaches member 1
// at once.
func TestGreetAfterLateStart(t *testing.T) {
	g := newGang(t, gangOptions{n: 2, delay: 2 * time.Millisecond})
	up := func(i int) *Net {
		n, err := Up(g.cfgs[i], Options{MemberNS: nsPath(g.nss[i]), HostNS: nsPath(g.hosts[i].NS), Log: testLog()})
		if err != nil {
			t.Fatalf("member %d up: %v", i, err)
		}
		t.Cleanup(func() { n.Close() })
		g.members = append(g.members, n)
		return n
	}
	up(0)
	time.Sleep(300 * time.Millisecond) // member 0's first handshake is lost meanwhile
	late := up(1)
	l, err := listenIn(g.nss[1], netip.AddrPortFrom(late.Address(), echoPort).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go echo(l, "m1")
	late.Greet()
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	got, err := ask(ctx, g.nss[0], netip.AddrPortFrom(late.Address(), echoPort).String(), "hello")
	if err != nil || got != "m1:hello" {
		p, _ := g.members[0].Peers()
		t.Fatalf("member 0 asked the late member 1: %q, %v after %s; want an answer within 2 s\n%s", got, err, time.Since(t0).Round(time.Millisecond), p)
	}
	t.Logf("member 0 reached the late member 1 in %s", time.Since(t0).Round(time.Millisecond))
}
