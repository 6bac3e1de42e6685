package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// twoNodes are two nodes that know each other as peers, each reading its
// own directory (its own ledger): da for a, db for b.
type twoNodes struct {
	a, b   *node
	da, db *dir
}

func startTwoNodes(t *testing.T, edit func(*HubOptions)) *twoNodes {
	t.Helper()
	la, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ua, ub := "http://"+la.Addr().String(), "http://"+lb.Addr().String()
	peer := func(other string) func(*HubOptions) {
		return func(o *HubOptions) {
			o.IsPeer = func(u string) bool { return normURL(u) == other }
			o.Peers = func() []string { return []string{other} }
			if edit != nil {
				edit(o)
			}
		}
	}
	tn := &twoNodes{da: newDir(), db: newDir()}
	tn.a = startNodeOn(t, la, tn.da, peer(ub))
	tn.b = startNodeOn(t, lb, tn.db, peer(ua))
	return tn
}

// put records j and the providers in both nodes' ledgers.
func (tn *twoNodes) put(j *ledger.Job, ps ...*provider) {
	for _, d := range []*dir{tn.da, tn.db} {
		for _, p := range ps {
			d.mu.Lock()
			d.providers[p.addr] = true
			d.mu.Unlock()
		}
		c := *j
		c.Assignments = append([]ledger.Assignment(nil), j.Assignments...)
		d.putJob(&c)
	}
}

// TestGangStreamAcrossNodes: members whose agents hold their sessions
// with different nodes are joined: the asker's node carries the stream
// to the target's node, which hands it to the target's agent with both
// ranks as its own ledger has them; bytes flow both ways, both ways
// round.
func TestGangStreamAcrossNodes(t *testing.T) {
	tn := startTwoNodes(t, nil)
	m := []*provider{gangProvider(60), gangProvider(61), gangProvider(62)}
	tn.put(gangJob(7, 2, m...), m...)
	m[0].run(t, tn.a.url)
	waitConnected(t, tn.a.hub, m[0].addr)
	for _, p := range m[1:] {
		p.run(t, tn.b.url)
		waitConnected(t, tn.b.hub, p.addr)
	}
	for _, c := range [][2]int{{0, 1}, {0, 2}, {1, 0}, {2, 0}, {1, 2}} {
		from, to := c[0], c[1]
		line, conn, err := askGang(t, m[from], 7, 2, to)
		if want := fmt.Sprintf("m%d<-%d job 7/2", to, from); err != nil || line != want {
			t.Fatalf("rank %d → rank %d: %q, %v; want %q", from, to, line, err, want)
		}
		msg := fmt.Sprintf("packet %d→%d", from, to)
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != msg {
			t.Fatalf("rank %d → rank %d: echo across the nodes: %q, %v", from, to, buf, err)
		}
	}
	// Rank 0's node remembers where ranks 1 and 2 were found.
	tn.a.hub.mu.Lock()
	home := tn.a.hub.gangHomes[m[1].addr]
	tn.a.hub.mu.Unlock()
	if home != tn.b.url {
		t.Errorf("a remembers rank 1 at %q; want %q", home, tn.b.url)
	}

	// A member connected to neither node is refused with that reason.
	away := gangProvider(63)
	tn.put(gangJob(8, 1, m[0], away), m[0], away)
	if _, _, err := askGang(t, m[0], 8, 1, 1); err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "holds no relay session with this node or the 1 other nodes asked") {
		t.Errorf("to a member connected nowhere: %v", err)
	}
}

// TestGangStreamAcrossNodesRefused: the target's node checks the asker
// against its OWN ledger, whatever the asker's node says: a provider that
// node a takes for a member, but node b's ledger does not, is refused at
// b; and so is a member of another replica gang.
func TestGangStreamAcrossNodesRefused(t *testing.T) {
	tn := startTwoNodes(t, nil)
	m := []*provider{gangProvider(70), gangProvider(71), gangProvider(72)}
	outside := gangProvider(73)
	all := append([]*provider{outside}, m...)
	tn.put(gangJob(7, 2, m...), all...)
	// Node a's ledger (wrongly) has outside as rank 0; b's has m[0].
	tn.da.putJob(gangJob(7, 2, outside, m[1], m[2]))
	outside.run(t, tn.a.url)
	m[0].run(t, tn.a.url)
	for _, p := range m[1:] {
		p.run(t, tn.b.url)
	}
	for _, p := range all {
		waitFor(t, 10*time.Second, func() bool { return tn.a.hub.Connected(p.addr) || tn.b.hub.Connected(p.addr) })
	}
	if _, _, err := askGang(t, outside, 7, 2, 1); err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "holds no member of job 7's placement 2") || !strings.Contains(err.Error(), tn.b.url) {
		t.Errorf("a provider only the asker's node takes for a member: %v; want refused by %s", err, tn.b.url)
	}

	// Replica gangs: a's ledger has m[0] and m[1] in one gang; b's puts
	// m[0] in replica gang 1, which has no rank 1, so b refuses it the
	// rank 1 of gang 0.
	tn.da.putJob(gangJob(10, 1, m[0], m[1]))
	rb2 := gangJob(10, 1)
	rb2.Spec.Nodes = 2
	rb2.Assignments = []ledger.Assignment{{Provider: m[1].addr, Rank: 1}, {Provider: m[0].addr, Rank: 0, Gang: 1}}
	tn.db.putJob(rb2)
	if _, _, err := askGang(t, m[0], 10, 1, 1); err == nil || !strings.Contains(err.Error(), "no member of rank 1 in replica gang 1") {
		t.Errorf("a rank only another replica gang has, at b: %v; want refused", err)
	}
}

// gangTunnel opens a node-to-node gang tunnel at n as node via would,
// for asker's rank of job 7 placement 2, showing pass.
func gangTunnel(t *testing.T, n *node, via string, asker *provider, rank uint64, pass string) (net.Conn, error) {
	t.Helper()
	u := n.url + TunnelPath + "?" + url.Values{
		"gang": {"7"}, "placement": {"2"}, "rank": {strconv.FormatUint(rank, 10)},
		"provider": {asker.addr.String()}, "via": {via},
	}.Encode()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := dialUpgrade(ctx, u, ProtoTCP, http.Header{HeaderHop: {"1"}, HeaderGangPass: {pass}}, 10*time.Second)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestGangTunnelPass: the target's node takes a gang tunnel only with a
// pass the asker signed for that node's chain, the asker's node, that
// gang, placement and rank, within a minute of its clock, once; from a
// node that is a peer; for a member by its own ledger.
func TestGangTunnelPass(t *testing.T) {
	tn := startTwoNodes(t, nil)
	m := []*provider{gangProvider(80), gangProvider(81)}
	outside := gangProvider(82)
	tn.put(gangJob(7, 2, m...), append(m, outside)...)
	m[1].run(t, tn.b.url)
	waitConnected(t, tn.b.hub, m[1].addr)
	now := time.Now()
	sign := func(p *provider, chain, via string, rank uint64, at time.Time) string {
		return signGangPass(p.key, chain, via, 7, 2, rank, at)
	}
	good := sign(m[0], testChain, tn.a.url, 1, now)
	for _, c := range []struct {
		name  string
		via   string
		asker *provider
		rank  uint64
		pass  string
		want  string
	}{
		{"no pass", tn.a.url, m[0], 1, "", "no gang pass"},
		{"a malformed pass", tn.a.url, m[0], 1, "ab.1.cd.ef", "not a hex ed25519 public key"},
		{"a pass of another key", tn.a.url, m[0], 1, sign(outside, testChain, tn.a.url, 1, now), "not by the asker"},
		{"a pass for another rank", tn.a.url, m[0], 1, sign(m[0], testChain, tn.a.url, 0, now), "bad gang pass signature"},
		{"a pass for another node", tn.a.url, m[0], 1, sign(m[0], testChain, tn.b.url, 1, now), "bad gang pass signature"},
		{"a pass for another chain", tn.a.url, m[0], 1, sign(m[0], "other-chain", tn.a.url, 1, now), "bad gang pass signature"},
		{"an old pass", tn.a.url, m[0], 1, sign(m[0], testChain, tn.a.url, 1, now.Add(-2*time.Minute)), "from this node's clock"},
		{"a pass from the future", tn.a.url, m[0], 1, sign(m[0], testChain, tn.a.url, 1, now.Add(2*time.Minute)), "from this node's clock"},
		{"a caller that is no peer", "http://127.0.0.1:1", m[0], 1, sign(m[0], testChain, "http://127.0.0.1:1", 1, now), "is not a peer of this node"},
		{"a non-member's own good pass", tn.a.url, outside, 1, sign(outside, testChain, tn.a.url, 1, now), "holds no member of job 7's placement 2"},
		{"to a member connected elsewhere", tn.a.url, m[1], 0, sign(m[1], testChain, tn.a.url, 0, now), "holds no relay session with this node"},
	} {
		_, err := gangTunnel(t, tn.b, c.via, c.asker, c.rank, c.pass)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a refusal saying %q", c.name, err, c.want)
		}
	}
	// A query with a field twice, or one more.
	for _, extra := range []string{"&rank=0", "&service=1"} {
		u := tn.b.url + TunnelPath + "?gang=7&placement=2&rank=1&provider=" + m[0].addr.String() + "&via=" + url.QueryEscape(tn.a.url) + extra
		if _, _, err := dialUpgrade(t.Context(), u, ProtoTCP, http.Header{HeaderHop: {"1"}, HeaderGangPass: {good}}, 5*time.Second); err == nil || !strings.Contains(err.Error(), "once each, only") {
			t.Errorf("query with %s: %v; want refused", extra, err)
		}
	}
	c, err := gangTunnel(t, tn.b, tn.a.url, m[0], 1, good)
	if err != nil {
		t.Fatalf("a good pass: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := readLine(c, MaxLine); err != nil || line != "m1<-0 job 7/2" {
		t.Fatalf("through the tunnel: %q, %v", line, err)
	}
	if _, err := gangTunnel(t, tn.b, tn.a.url, m[0], 1, good); err == nil || !strings.Contains(err.Error(), "used already") {
		t.Errorf("the same pass again: %v; want refused as replayed", err)
	}
}

// TestGangHopBounds: the gang streams open between two nodes are bounded
// per node (MaxGangHopsPerNode), at the asker's node and at the target's.
func TestGangHopBounds(t *testing.T) {
	tn := startTwoNodes(t, func(o *HubOptions) { o.MaxGangHopsPerNode = 1 })
	m := []*provider{gangProvider(90), gangProvider(91), gangProvider(92)}
	tn.put(gangJob(7, 2, m...), m...)
	m[0].run(t, tn.a.url)
	waitConnected(t, tn.a.hub, m[0].addr)
	for _, p := range m[1:] {
		p.run(t, tn.b.url)
		waitConnected(t, tn.b.hub, p.addr)
	}
	_, c, err := askGang(t, m[0], 7, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := askGang(t, m[0], 7, 2, 2); err == nil || !strings.Contains(err.Error(), "1 gang streams are open between this node and "+tn.b.url) {
		t.Errorf("a second stream a → b: %v; want refused by a's bound", err)
	}
	// At b: a tunnel from a beside the open one.
	if _, err := gangTunnel(t, tn.b, tn.a.url, m[0], 2, signGangPass(m[0].key, testChain, tn.a.url, 7, 2, 2, time.Now())); err == nil || !strings.Contains(err.Error(), "between this node and "+tn.a.url) {
		t.Errorf("a second tunnel at b: %v; want refused by b's bound", err)
	}
	c.Close()
	waitFor(t, 5*time.Second, func() bool {
		_, c, err := askGang(t, m[0], 7, 2, 2)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func FuzzGangPass(f *testing.F) {
	k := gangProvider(1).key
	for _, s := range []string{
		signGangPass(k, testChain, "http://n", 7, 2, 1, time.Unix(1e9, 0)),
		"ab.1.cd.ef",
		"..." + strings.Repeat("0", 64),
		"",
		strings.Repeat("a", maxGangPassLen+1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseGangPass(s)
		if err != nil {
			return
		}
		if len(p.pub) != 32 || len(p.sig) != 64 || len(p.nonce) != gangPassNonceSize || p.unix <= 0 || len(s) > maxGangPassLen {
			t.Fatalf("%q accepted as %+v", s, p)
		}
	})
}

// TestGangPassBook: a nonce is taken once per asker; an asker that used
// its quota of passes within the window is refused while another is not;
// passes past the window are forgotten to make room.
func TestGangPassBook(t *testing.T) {
	var b gangPassBook
	p, q := gangProvider(1).addr, gangProvider(2).addr
	now := time.Unix(1e9, 0)
	nonce := func(i int) []byte {
		n := make([]byte, gangPassNonceSize)
		binary.BigEndian.PutUint64(n, uint64(i))
		return n
	}
	if err := b.use(p, nonce(0), now); err != nil {
		t.Fatal(err)
	}
	if err := b.use(p, nonce(0), now); err == nil || !strings.Contains(err.Error(), "used already") {
		t.Fatalf("a replay: %v", err)
	}
	if err := b.use(q, nonce(0), now); err != nil {
		t.Fatalf("another asker's nonce that happens to be equal: %v", err)
	}
	for i := 1; i < maxGangPassesPerAsker; i++ {
		if err := b.use(p, nonce(i), now); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
	}
	if err := b.use(p, nonce(maxGangPassesPerAsker), now); err == nil || !strings.Contains(err.Error(), "gang passes at this node within") {
		t.Fatalf("past the asker's quota: %v", err)
	}
	if err := b.use(q, nonce(1), now); err != nil {
		t.Fatalf("another asker beside a full one: %v", err)
	}
	if err := b.use(p, nonce(maxGangPassesPerAsker), now.Add(2*gangPassSkew+time.Second)); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}
