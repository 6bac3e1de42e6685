package relay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// gangProvider is a provider whose agent serves gang streams: each stream
// first gets the line "m<rank><-<from> job <job>/<placement>", then its
// bytes back.
func gangProvider(seed byte) *provider {
	p := newProvider(seed, nil)
	p.gang = func(s GangStream) (func(net.Conn), error) {
		return func(c net.Conn) {
			fmt.Fprintf(c, "m%d<-%d job %d/%d\n", s.Rank, s.From, s.Job, s.Placement)
			io.Copy(c, c)
		}, nil
	}
	return p
}

// gangJob is an assigned gang job of the providers, rank i on providers[i].
func gangJob(id, placement uint64, providers ...*provider) *ledger.Job {
	j := &ledger.Job{ID: id, State: ledger.JobRunning, Attempts: placement, Spec: ledger.JobSpec{Nodes: uint64(len(providers))}}
	for i, p := range providers {
		j.Assignments = append(j.Assignments, ledger.Assignment{Provider: p.addr, Rank: uint64(i)})
	}
	return j
}

// askGang opens a gang stream from p and returns the target's first line.
func askGang(t *testing.T, p *provider, job, placement uint64, rank int) (string, net.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := p.agent.DialGang(ctx, job, placement, rank)
	if err != nil {
		return "", nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	c.SetDeadline(time.Time{})
	if err != nil {
		c.Close()
		return "", nil, err
	}
	t.Cleanup(func() { c.Close() })
	return strings.TrimSpace(line), c, nil
}

type gangSetup struct {
	d       *dir
	n       *node
	members []*provider // ranks 0, 1, 2 of job 7, placement 2
	other   *provider   // rank 0 of job 8
	outside *provider   // a provider in no gang
}

func newGangSetup(t *testing.T) *gangSetup {
	t.Helper()
	g := &gangSetup{d: newDir()}
	g.n = startNode(t, g.d, nil)
	for i := range 3 {
		g.members = append(g.members, gangProvider(byte(10+i)))
	}
	g.other, g.outside = gangProvider(20), gangProvider(21)
	second := gangProvider(22)
	all := append([]*provider{g.other, g.outside, second}, g.members...)
	for _, p := range all {
		g.d.providers[p.addr] = true
	}
	g.d.putJob(gangJob(7, 2, g.members...))
	g.d.putJob(gangJob(8, 1, g.other, second))
	for _, p := range all {
		p.run(t, g.n.url)
		waitConnected(t, g.n.hub, p.addr)
	}
	return g
}

// TestGangStreamBetweenMembers: a member's agent opens a stream to another
// member of its gang through the node; the target's agent is told the
// gang, placement and both ranks (the asker's as the ledger has it), and
// bytes flow both ways.
func TestGangStreamBetweenMembers(t *testing.T) {
	g := newGangSetup(t)
	for from := range 3 {
		for to := range 3 {
			if from == to {
				continue
			}
			line, c, err := askGang(t, g.members[from], 7, 2, to)
			if want := fmt.Sprintf("m%d<-%d job 7/2", to, from); err != nil || line != want {
				t.Fatalf("rank %d → rank %d: %q, %v; want %q", from, to, line, err, want)
			}
			msg := fmt.Sprintf("packet %d→%d", from, to)
			if _, err := c.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len(msg))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
				t.Fatalf("echo through the gang stream: %q, %v", buf, err)
			}
		}
	}
}

// TestGangStreamRefused: only a member of the gang's current placement
// that has not ended its run may open a stream, and only to another such
// member; each refusal says why.
func TestGangStreamRefused(t *testing.T) {
	g := newGangSetup(t)
	m := g.members
	for _, c := range []struct {
		name      string
		from      *provider
		job, plac uint64
		rank      int
		want      string
	}{
		{"a provider in no gang", g.outside, 7, 2, 1, "holds no member of job 7's placement 2"},
		{"a member of another gang", g.other, 7, 2, 1, "holds no member of job 7's placement 2"},
		{"into another gang", m[0], 8, 1, 1, "holds no member of job 8's placement 1"},
		{"an earlier placement", m[0], 7, 1, 1, "job 7 is in its placement 2, not 1"},
		{"a rank that is no member's", m[0], 7, 2, 3, "has no member of rank 3"},
		{"its own rank", m[1], 7, 2, 1, "is the asker's own"},
		{"no such job", m[0], 99, 2, 1, "no active job 99"},
		{"a rank past any gang", m[0], 7, 2, ledger.MaxGangNodes, fmt.Sprintf("a gang has at most %d members", ledger.MaxGangNodes)},
	} {
		_, _, err := askGang(t, c.from, c.job, c.plac, c.rank)
		if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a refusal saying %q", c.name, err, c.want)
		}
	}

	// A member that handed the job back: the gang is placed again
	// without it (placement 3), and its requests are refused, as are the
	// others' for the old placement.
	j := gangJob(7, 3, m[0], m[1], g.outside)
	g.d.putJob(j)
	if _, _, err := askGang(t, m[2], 7, 3, 0); err == nil || !strings.Contains(err.Error(), "holds no member of job 7's placement 3") {
		t.Errorf("a released member: %v; want refused", err)
	}
	if _, _, err := askGang(t, m[0], 7, 2, 1); err == nil || !strings.Contains(err.Error(), "placement 3, not 2") {
		t.Errorf("the old placement: %v; want refused", err)
	}
	if line, _, err := askGang(t, m[0], 7, 3, 2); err != nil || line != "m2<-0 job 7/3" {
		t.Errorf("the new placement's rank 2: %q, %v", line, err)
	}
	// A member that reported its result ended its run: it may not ask,
	// nor be asked for.
	j.Assignments[1].Result = &ledger.JobResult{}
	g.d.putJob(j)
	if _, _, err := askGang(t, m[1], 7, 3, 0); err == nil || !strings.Contains(err.Error(), "ended its run") {
		t.Errorf("a member that ended: %v; want refused", err)
	}
	if _, _, err := askGang(t, m[0], 7, 3, 1); err == nil || !strings.Contains(err.Error(), "ended its run") {
		t.Errorf("to a member that ended: %v; want refused", err)
	}
	// A job that is done is no gang any more; a job of one node never was.
	j.State = ledger.JobSucceeded
	g.d.putJob(j)
	if _, _, err := askGang(t, m[0], 7, 3, 2); err == nil || !strings.Contains(err.Error(), "no active job 7") {
		t.Errorf("a finished gang: %v; want refused", err)
	}
	single := gangJob(9, 1, m[0])
	single.Spec.Nodes = 0
	g.d.putJob(single)
	if _, _, err := askGang(t, m[0], 9, 1, 0); err == nil || !strings.Contains(err.Error(), "job 9 is not a gang") {
		t.Errorf("a single job: %v; want refused", err)
	}
	// Replica gangs (a gang at verification full): a member reaches the
	// rank of its own replica gang, never the other gang's, and a rank its
	// gang lacks is refused even where another gang has it.
	rj := gangJob(10, 1, m[0], m[1])
	rj.Assignments = append(rj.Assignments, ledger.Assignment{Provider: m[2].addr, Rank: 1, Gang: 1})
	g.d.putJob(rj)
	if line, _, err := askGang(t, m[0], 10, 1, 1); err != nil || !strings.HasSuffix(line, "<-0 job 10/1") {
		t.Errorf("rank 1 of its own replica gang: %q, %v; want joined to the member of gang 0", line, err)
	}
	if _, _, err := askGang(t, m[2], 10, 1, 0); err == nil || !strings.Contains(err.Error(), "no member of rank 0 in replica gang 1") {
		t.Errorf("a rank only the other replica gang has: %v; want refused", err)
	}
	rj.Assignments = append(rj.Assignments, ledger.Assignment{Provider: g.other.addr, Rank: 1})
	g.d.putJob(rj)
	if _, _, err := askGang(t, m[0], 10, 1, 1); err == nil || !strings.Contains(err.Error(), "2 members of rank 1 in replica gang 0") {
		t.Errorf("two members of rank 1 in one replica gang: %v; want refused", err)
	}
}

// TestGangStreamRoutes: a target whose agent is not connected here, or
// whose agent runs no gang members, is refused with that reason; a node
// whose directory reads no jobs routes no gang streams.
func TestGangStreamRoutes(t *testing.T) {
	g := newGangSetup(t)
	away := gangProvider(30)
	g.d.providers[away.addr] = true
	noGang := newProvider(31, nil)
	g.d.providers[noGang.addr] = true
	noGang.run(t, g.n.url)
	waitConnected(t, g.n.hub, noGang.addr)
	g.d.putJob(gangJob(11, 1, g.members[0], away, noGang))
	if _, _, err := askGang(t, g.members[0], 11, 1, 1); err == nil || !strings.Contains(err.Error(), "holds no relay session with this node") {
		t.Errorf("to a member not connected here: %v", err)
	}
	if _, _, err := askGang(t, g.members[0], 11, 1, 2); err == nil || !strings.Contains(err.Error(), "runs no gang members") {
		t.Errorf("to an agent without gangs: %v", err)
	}

	// A directory without jobs.
	d := &servicesOnly{newDir()}
	n := startNode(t, d, nil)
	p, q := gangProvider(40), gangProvider(41)
	d.d.providers[p.addr], d.d.providers[q.addr] = true, true
	d.d.putJob(gangJob(12, 1, p, q))
	for _, x := range []*provider{p, q} {
		x.run(t, n.url)
		waitConnected(t, n.hub, x.addr)
	}
	if _, _, err := askGang(t, p, 12, 1, 1); err == nil || !strings.Contains(err.Error(), "routes no gang streams") {
		t.Errorf("a node without a gang directory: %v", err)
	}
}

// servicesOnly is a Directory that is not a GangDirectory.
type servicesOnly struct{ d *dir }

func (s *servicesOnly) Service(id uint64) (*ledger.Service, bool, error) { return s.d.Service(id) }
func (s *servicesOnly) IsProvider(a address.Address) bool                { return s.d.IsProvider(a) }

// TestGangStreamBounds: a member holds at most 2 × (members − 1) gang
// streams at a node at once, and a gang at most MaxGangStreams; a closed
// stream frees its slot.
func TestGangStreamBounds(t *testing.T) {
	g := newGangSetup(t)
	var open []net.Conn
	for i := range 4 { // 2 × (3 − 1)
		_, c, err := askGang(t, g.members[0], 7, 2, 1+i%2)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		open = append(open, c)
	}
	if _, _, err := askGang(t, g.members[0], 7, 2, 1); err == nil || !strings.Contains(err.Error(), "has 4 gang streams open") {
		t.Fatalf("a fifth stream: %v; want refused as busy", err)
	}
	// Another member still may.
	if _, _, err := askGang(t, g.members[1], 7, 2, 0); err != nil {
		t.Fatalf("another member: %v", err)
	}
	open[0].Close()
	waitFor(t, 5*time.Second, func() bool {
		_, c, err := askGang(t, g.members[0], 7, 2, 1)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	// The gang's bound.
	d := newDir()
	n := startNode(t, d, func(o *HubOptions) { o.MaxGangStreams = 2 })
	ps := []*provider{gangProvider(50), gangProvider(51), gangProvider(52)}
	for _, p := range ps {
		d.providers[p.addr] = true
	}
	d.putJob(gangJob(13, 1, ps...))
	for _, p := range ps {
		p.run(t, n.url)
		waitConnected(t, n.hub, p.addr)
	}
	for i := range 2 {
		if _, _, err := askGang(t, ps[i], 13, 1, 2); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if _, _, err := askGang(t, ps[2], 13, 1, 0); err == nil || !strings.Contains(err.Error(), "job 13 has 2 gang streams open") {
		t.Fatalf("a third stream of the gang: %v; want refused as busy", err)
	}
}

func FuzzGangRequest(f *testing.F) {
	for _, s := range []string{
		`{"gang":7,"placement":2,"rank":1}`,
		`{"gang":7,"placement":2,"rank":1,"pass":"` + signGangPass(gangProvider(1).key, testChain, "http://n", 7, 2, 1, time.Unix(1e9, 0)) + `"}`,
		`{"gang":7,"placement":2,"rank":1,"pass":"ab.1.cd.ef"}`,
		`{"gang":7,"placement":2}`,
		`{"gang":0,"placement":2,"rank":1}`,
		`{"gang":7,"placement":2,"rank":1,"from":0}`,
		`{"gang":7,"placement":2,"rank":99999}`,
		`{"gang":7,"placement":2,"rank":1} x`,
		`{"gang":-1}`,
		``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		q, err := parseGangRequest(line)
		if err != nil {
			return
		}
		if q.Gang == 0 || q.Rank >= ledger.MaxGangNodes {
			t.Fatalf("%q accepted as %+v", line, q)
		}
	})
}

func FuzzGangHeader(f *testing.F) {
	for _, s := range []string{
		`{"gang":7,"placement":2,"rank":1,"from":0}`,
		`{"gang":7,"placement":2,"rank":1,"from":1}`,
		`{"gang":7,"placement":2,"rank":1}`,
		`{"gang":7,"placement":2,"rank":1,"from":0,"port":9}`,
		`{"service":3,"port":9000}`,
		`{"gang":7,"placement":2,"rank":1,"from":0,"x":1}`,
		``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		g, err := parseGangHeader(line)
		if err != nil {
			return
		}
		if g.Job == 0 || g.Rank == g.From || g.Rank < 0 || g.From < 0 || g.Rank >= ledger.MaxGangNodes || g.From >= ledger.MaxGangNodes {
			t.Fatalf("%q accepted as %+v", line, g)
		}
	})
}
