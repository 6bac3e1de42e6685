package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/gpunet/gpunet/internal/clusternet"
	"github.com/gpunet/gpunet/internal/relay"
)

// GangRelay is a RelayLink that also carries gangs' private networks
// between members no direct UDP path joins: the relay's gang route
// (relay.Agent.DialGang; relaylink.go has it). An agent whose link has it
// gives each member's network the relay (clusternet.Options.Relay), and
// hands the gang streams nodes open to it to the member they name.
type GangRelay interface {
	// DialGang opens a stream to the member of rank of gang job in its
	// placement, for this provider's member of it.
	DialGang(ctx context.Context, job, placement uint64, rank int) (net.Conn, error)
	// AcceptGang sets what finds the member of each gang stream a node
	// opens to the link.
	AcceptGang(fn gangAcceptor)
}

// gangNets are the gang members' networks running here, by gang,
// placement and rank, so that the relay link hands each gang stream to
// its member; and the link, when it carries gangs.
type gangNets struct {
	mu   sync.Mutex
	link GangRelay
	nets map[gangSlot]*clusternet.Net
}

type gangSlot struct {
	job, placement uint64
	rank           int
}

// setGangLink notes the agent's relay link, and has it hand gang streams to
// the members here, when it carries gangs.
func (a *Agent) setGangLink(l RelayLink) {
	gl, ok := l.(GangRelay)
	if !ok {
		return
	}
	a.gangs.mu.Lock()
	a.gangs.link = gl
	a.gangs.mu.Unlock()
	gl.AcceptGang(a.acceptGangStream)
}

// gangRelayFor is the relay a member of gang job in placement uses: the
// link's gang route; nil when the agent has no relay link (direct UDP
// only). The link is looked up at each dial, not now: the link starts
// with the agent's service loops, and a member whose network came up
// before that must not be left without a relay for its whole run.
func (a *Agent) gangRelayFor(job, placement uint64) clusternet.Relay {
	if a.o.Relay == nil {
		return nil
	}
	return memberRelay{a, job, placement}
}

// errNoGangLink is a member's relay dial before the agent's relay link
// runs, or when it carries no gangs.
var errNoGangLink = errors.New("the provider's relay link carries no gang streams (yet)")

// memberRelay is a member's clusternet.Relay: the link's gang route.
type memberRelay struct {
	a              *Agent
	job, placement uint64
}

func (m memberRelay) Dial(ctx context.Context, rank int) (net.Conn, error) {
	m.a.gangs.mu.Lock()
	link := m.a.gangs.link
	m.a.gangs.mu.Unlock()
	if link == nil {
		return nil, errNoGangLink
	}
	return link.DialGang(ctx, m.job, m.placement, rank)
}

// addGangNet makes n reachable by gang streams for its slot until the
// returned function is called.
func (a *Agent) addGangNet(s gangSlot, n *clusternet.Net) (remove func()) {
	a.gangs.mu.Lock()
	if a.gangs.nets == nil {
		a.gangs.nets = map[gangSlot]*clusternet.Net{}
	}
	a.gangs.nets[s] = n
	a.gangs.mu.Unlock()
	return func() {
		a.gangs.mu.Lock()
		if a.gangs.nets[s] == n {
			delete(a.gangs.nets, s)
		}
		a.gangs.mu.Unlock()
	}
}

// acceptGangStream finds the member a gang stream a node opened (it
// checked both ends against the ledger) is for: this provider's member it
// names, which reads it as coming from the rank the node vouched for.
func (a *Agent) acceptGangStream(s relay.GangStream) (func(net.Conn), error) {
	a.gangs.mu.Lock()
	n := a.gangs.nets[gangSlot{s.Job, s.Placement, s.Rank}]
	a.gangs.mu.Unlock()
	if n == nil {
		return nil, fmt.Errorf("this provider runs no member of rank %d of job %d in placement %d now", s.Rank, s.Job, s.Placement)
	}
	return func(c net.Conn) { n.ServeStreamFrom(c, s.From) }, nil
}
