package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Gang streams carry a gang's private network between members that no
// direct UDP path joins (docs/clusters.md). The member's provider's agent
// opens a yamux stream on its own session with a node (so the node knows
// which provider asks: the session's handshake was signed by its key) and
// writes one line,
//
//	{"gang":J,"placement":A,"rank":R}
//
// The node checks against its ledger that job J is a live gang whose
// current placement is A, that the asking provider is one of its members
// and has not ended its run, and that rank R is another member that has
// not; then it opens a stream to the agent of rank R's provider (which
// holds its session with this node; one connected to another node is
// reached through that node: gang_hop.go) with the line
//
//	{"gang":J,"placement":A,"rank":R,"from":F}
//
// F being the asker's rank, as the ledger says. That agent hands the
// stream to its member of rank R (AgentOptions.AcceptGang) and answers "OK",
// or "ERR reason"; the node passes the answer to the asker and then
// splices the two streams. Anything else is refused with a reason: a
// provider that is not a member, a member of another placement (one that
// was released, or whose gang was placed again), a rank that is not a
// member's.
//
// Bounds: maxGangAsks requests being read or checked per session; per
// member at most 2 × (members − 1) streams open (one to each other member,
// and as many replacing them), per gang HubOptions.MaxGangStreams; each
// stream also takes one of the target session's MaxStreams.

// GangDirectory is a Directory that also reads jobs: a Hub whose
// Directory has it routes gang streams; one whose Directory has not
// refuses them.
type GangDirectory interface {
	// Job reads a job; ok is false when there is none.
	Job(id uint64) (job *ledger.Job, ok bool, err error)
}

// GangStream names a gang stream's ends: the member of rank Rank of gang
// job Job in its placement Placement (ledger.Job.Attempts), and the member
// of rank From that opened it.
type GangStream struct {
	Job, Placement uint64
	Rank, From     int
}

// DefaultMaxGangStreams is HubOptions.MaxGangStreams's default.
const DefaultMaxGangStreams = 1024

// maxGangAsks bounds the gang requests of one session being read or
// checked at once; past it a request is refused at once.
const maxGangAsks = 16

// ErrNotMember is a gang stream refused because the asker or the target
// is not a member of the gang's current placement.
var ErrNotMember = errors.New("relay: not a member of the gang's current placement")

// gangRequest is an asker's line.
type gangRequest struct {
	Gang      uint64 `json:"gang"`
	Placement uint64 `json:"placement"`
	Rank      uint64 `json:"rank"`
	// Pass is the asker's gang pass (gang_hop.go), which carries the
	// stream to another node when the target's agent is connected there;
	// optional.
	Pass string `json:"pass,omitempty"`
}

// gangHeader is the line a node writes to the target's agent.
type gangHeader struct {
	Gang      uint64 `json:"gang"`
	Placement uint64 `json:"placement"`
	Rank      uint64 `json:"rank"`
	From      uint64 `json:"from"`
}

type gangCaller struct {
	job      uint64
	provider address.Address
}

// parseGangRequest reads an asker's line strictly: the three fields,
// nothing else, a rank below ledger.MaxGangNodes.
func parseGangRequest(line string) (gangRequest, error) {
	var p struct {
		Gang      *uint64 `json:"gang"`
		Placement *uint64 `json:"placement"`
		Rank      *uint64 `json:"rank"`
		Pass      string  `json:"pass"`
	}
	if err := strictJSON(line, &p); err != nil {
		return gangRequest{}, fmt.Errorf("bad gang request: %w", err)
	}
	if p.Pass != "" {
		if _, err := parseGangPass(p.Pass); err != nil {
			return gangRequest{}, fmt.Errorf("bad gang request: %w", err)
		}
	}
	if p.Gang == nil || p.Placement == nil || p.Rank == nil {
		return gangRequest{}, errors.New("bad gang request: want gang, placement and rank")
	}
	q := gangRequest{Gang: *p.Gang, Placement: *p.Placement, Rank: *p.Rank, Pass: p.Pass}
	if q.Gang == 0 {
		return q, errors.New("bad gang request: gang 0 is no job")
	}
	if q.Rank >= ledger.MaxGangNodes {
		return q, fmt.Errorf("bad gang request: rank %d: a gang has at most %d members", q.Rank, ledger.MaxGangNodes)
	}
	return q, nil
}

// errNotGang: a stream header without "gang", a service's.
var errNotGang = errors.New("not a gang stream header")

// parseGangHeader reads a gang stream's header as the target's agent gets
// it from a node: the four fields, nothing else; errNotGang when the line
// has no "gang" (a service stream's header).
func parseGangHeader(line string) (GangStream, error) {
	var p struct {
		Gang      *uint64 `json:"gang"`
		Placement *uint64 `json:"placement"`
		Rank      *uint64 `json:"rank"`
		From      *uint64 `json:"from"`
		Service   *uint64 `json:"service"`
		Port      *uint64 `json:"port"`
	}
	if err := strictJSON(line, &p); err != nil {
		return GangStream{}, fmt.Errorf("bad stream header: %w", err)
	}
	if p.Gang == nil {
		return GangStream{}, errNotGang
	}
	if p.Service != nil || p.Port != nil || p.Placement == nil || p.Rank == nil || p.From == nil {
		return GangStream{}, errors.New("bad gang stream header: want gang, placement, rank and from only")
	}
	if *p.Rank >= ledger.MaxGangNodes || *p.From >= ledger.MaxGangNodes || *p.Rank == *p.From || *p.Gang == 0 {
		return GangStream{}, fmt.Errorf("bad gang stream header: gang %d, rank %d from %d: want a job and two ranks, apart, below %d", *p.Gang, *p.Rank, *p.From, ledger.MaxGangNodes)
	}
	return GangStream{Job: *p.Gang, Placement: *p.Placement, Rank: int(*p.Rank), From: int(*p.From)}, nil
}

// strictJSON decodes line into v: one JSON object, no unknown fields,
// nothing after it.
func strictJSON(line string, v any) error {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rest := strings.TrimSpace(line[dec.InputOffset():]); rest != "" {
		return fmt.Errorf("%.40q after the JSON object", rest)
	}
	return nil
}

// gangRoute is what checkGang found: the two members and the gang's size.
type gangRoute struct {
	stream  GangStream
	target  address.Address
	members int
}

// checkGang checks asker's request against the ledger (see the comment at
// the top of this file) and returns the route, or an error that says
// what is wrong, wrapping ErrNotMember when it is membership.
func (h *Hub) checkGang(asker address.Address, q gangRequest) (gangRoute, error) {
	var rt gangRoute
	gd, ok := h.o.Directory.(GangDirectory)
	if !ok {
		return rt, errors.New("this node routes no gang streams")
	}
	j, ok, err := gd.Job(q.Gang)
	if err != nil {
		h.log.Error("relay: reading a gang", "job", q.Gang, "err", err)
		return rt, errors.New("cannot read the job now")
	}
	if !ok || j.Done() {
		return rt, fmt.Errorf("no active job %d", q.Gang)
	}
	if j.Spec.Nodes < 2 {
		return rt, fmt.Errorf("job %d is not a gang", q.Gang)
	}
	if j.Attempts != q.Placement {
		return rt, fmt.Errorf("job %d is in its placement %d, not %d: %w", q.Gang, j.Attempts, q.Placement, ErrNotMember)
	}
	var from *ledger.Assignment
	for i := range j.Assignments {
		if x := &j.Assignments[i]; x.Provider == asker {
			from = x
		}
	}
	if from == nil {
		return rt, fmt.Errorf("provider %s holds no member of job %d's placement %d: %w", asker, q.Gang, q.Placement, ErrNotMember)
	}
	// A gang at verification full runs several replica gangs, each its
	// own private network: a member reaches only the ranks of its own
	// (Assignment.Gang), never a member of another replica gang.
	var to []*ledger.Assignment
	for i := range j.Assignments {
		if x := &j.Assignments[i]; x.Rank == q.Rank && x.Gang == from.Gang {
			to = append(to, x)
		}
	}
	switch {
	case from.Result != nil:
		return rt, fmt.Errorf("provider %s's member of job %d ended its run: %w", asker, q.Gang, ErrNotMember)
	case len(to) == 0:
		return rt, fmt.Errorf("job %d's placement %d has no member of rank %d in replica gang %d: %w", q.Gang, q.Placement, q.Rank, from.Gang, ErrNotMember)
	case len(to) > 1:
		// The ledger places one member of each rank in each replica
		// gang; a record that says otherwise joins nobody.
		return rt, fmt.Errorf("job %d has %d members of rank %d in replica gang %d: %w", q.Gang, len(to), q.Rank, from.Gang, ErrNotMember)
	case to[0] == from:
		return rt, fmt.Errorf("rank %d of job %d is the asker's own", q.Rank, q.Gang)
	case to[0].Result != nil:
		return rt, fmt.Errorf("the member of rank %d of job %d ended its run: %w", q.Rank, q.Gang, ErrNotMember)
	}
	rt.stream = GangStream{Job: q.Gang, Placement: q.Placement, Rank: int(q.Rank), From: int(from.Rank)}
	rt.target = to[0].Provider
	rt.members = max(len(j.Assignments), int(min(j.Spec.Nodes, ledger.MaxGangNodes)))
	return rt, nil
}

// takeGang takes a slot for a stream of rt: within the asker's 2 ×
// (members − 1) and the gang's MaxGangStreams.
func (h *Hub) takeGang(asker address.Address, rt gangRoute) (release func(), err error) {
	k := gangCaller{job: rt.stream.Job, provider: asker}
	per := 2 * (rt.members - 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return nil, ErrClosed
	case h.gangFrom[k] >= per:
		return nil, fmt.Errorf("the member of rank %d has %d gang streams open at this node: %w", rt.stream.From, per, ErrBusy)
	case h.gangs[k.job] >= h.o.MaxGangStreams:
		return nil, fmt.Errorf("job %d has %d gang streams open at this node: %w", k.job, h.o.MaxGangStreams, ErrBusy)
	}
	h.gangFrom[k]++
	h.gangs[k.job]++
	return func() {
		h.mu.Lock()
		if h.gangFrom[k]--; h.gangFrom[k] <= 0 {
			delete(h.gangFrom, k)
		}
		if h.gangs[k.job]--; h.gangs[k.job] <= 0 {
			delete(h.gangs, k.job)
		}
		h.mu.Unlock()
	}, nil
}

// acceptGangStreams serves the streams an agent opens on its session (gang
// requests) until the session ends.
func (h *Hub) acceptGangStreams(s *session) {
	for {
		st, err := s.mux.AcceptStream()
		if err != nil {
			return
		}
		select {
		case s.gangAsks <- struct{}{}:
			go h.serveGang(s, st)
		default:
			// Refused here, at once: a write that fits the stream's
			// window does not block.
			st.SetWriteDeadline(time.Now().Add(time.Second))
			st.Write([]byte(fmt.Sprintf("ERR busy: %d gang requests being read at once\n", maxGangAsks)))
			st.Close()
		}
	}
}

// serveGang reads, checks and routes one gang request of s's agent.
func (h *Hub) serveGang(s *session, st net.Conn) {
	asking := true
	done := func() {
		if asking {
			asking = false
			<-s.gangAsks
		}
	}
	defer done()
	deadline := time.Now().Add(h.o.HandshakeTimeout)
	st.SetDeadline(deadline)
	line, err := readLine(st, MaxLine)
	if err != nil {
		st.Close()
		return
	}
	q, err := parseGangRequest(line)
	if err != nil {
		refuse(st, err.Error())
		return
	}
	// Within the request's own deadline, however many nodes are asked
	// for the target (gang_hop.go).
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	back, release, err := h.dialGang(ctx, s.provider, q)
	if err != nil {
		h.log.Debug("relay: gang stream refused", "provider", s.provider, "job", q.Gang, "rank", q.Rank, "err", err)
		refuse(st, err.Error())
		return
	}
	defer release()
	if _, err := st.Write([]byte("OK\n")); err != nil {
		st.Close()
		back.Close()
		return
	}
	st.SetDeadline(time.Time{})
	done()
	splice(st, back, h.o.IdleTimeout)
}

// dialGang opens a gang stream for asker, a provider whose agent holds a
// session here, to the member of rank of gang job in its placement: after
// checking both are members (see the comment at the top of this file), a
// stream to the target's agent, which has answered OK. release frees the
// stream's slot once it is closed. Errors wrap ErrNotMember, ErrBusy,
// ErrNoRoute, ErrRefused or ErrClosed, or say what else is wrong.
func (h *Hub) dialGang(ctx context.Context, asker address.Address, q gangRequest) (c net.Conn, release func(), err error) {
	job, placement, rank := q.Gang, q.Placement, q.Rank
	if rank >= ledger.MaxGangNodes {
		return nil, nil, fmt.Errorf("rank %d: want 0 to %d", rank, ledger.MaxGangNodes-1)
	}
	rt, err := h.checkGang(asker, q)
	if err != nil {
		return nil, nil, err
	}
	release, err = h.takeGang(asker, rt)
	if err != nil {
		return nil, nil, err
	}
	h.mu.Lock()
	ts := h.sessions[rt.target]
	h.mu.Unlock()
	if ts == nil || ts.mux.IsClosed() {
		// Connected elsewhere, perhaps: carried to that node
		// (gang_hop.go).
		c, err = h.hopGang(ctx, asker, rt, q.Pass)
		if err != nil {
			release()
			return nil, nil, err
		}
		return c, release, nil
	}
	line, _ := json.Marshal(gangHeader{Gang: job, Placement: placement, Rank: rank, From: uint64(rt.stream.From)})
	c, err = h.openStreamWith(ctx, ts, line)
	if err != nil {
		release()
		return nil, nil, err
	}
	return c, release, nil
}
