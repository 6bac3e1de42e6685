package provider

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/relay"
)

// chainStatus is what a relayLink reads of its nodes: their status, for
// the chain ID.
type chainStatus interface {
	Status(ctx context.Context) (*apiwire.StatusBody, error)
}

// relayLink is the RelayLink of an agent run from a home (NewInHome): a
// relay.Agent for the chain the agent's nodes serve. It reads the chain
// ID once, before it connects, from the nodes the operator configured (as
// every tx the agent signs does: a wrong one would fail those too), and
// keeps it: a relay answer never changes what the agent signs for.
type relayLink struct {
	status chainStatus
	o      relay.AgentOptions
	agent  atomic.Pointer[relay.Agent]
	gang   atomic.Pointer[gangAcceptor]
}

// gangAcceptor finds the member a gang stream is for (gangrelay.go).
type gangAcceptor func(s relay.GangStream) (serve func(net.Conn), err error)

// Run reads the chain ID, retrying with a backoff of 1 s doubling to 30 s
// while no node answers, then runs the relay agent until ctx ends.
func (l *relayLink) Run(ctx context.Context) error {
	log := l.o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		st, err := l.status.Status(ctx)
		if err == nil {
			l.o.ChainID = st.ChainID
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("relay: cannot read the chain ID from the node; trying again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	l.o.AcceptGang = l.acceptGang
	a := relay.NewAgent(l.o)
	l.agent.Store(a)
	return a.Run(ctx)
}

// Relay is the relay agent's node ("" before it runs).
func (l *relayLink) Relay() string {
	if a := l.agent.Load(); a != nil {
		return a.Relay()
	}
	return ""
}

// AcceptGang sets what finds the member of each gang stream a node opens
// to the link.
func (l *relayLink) AcceptGang(fn gangAcceptor) { l.gang.Store(&fn) }

func (l *relayLink) acceptGang(s relay.GangStream) (func(net.Conn), error) {
	fn := l.gang.Load()
	if fn == nil {
		return nil, errors.New("this provider runs no gang members")
	}
	return (*fn)(s)
}

// DialGang opens a gang stream through the link's node (relay.Agent's
// DialGang); relay.ErrNoSession before the link runs.
func (l *relayLink) DialGang(ctx context.Context, job, placement uint64, rank int) (net.Conn, error) {
	a := l.agent.Load()
	if a == nil {
		return nil, relay.ErrNoSession
	}
	return a.DialGang(ctx, job, placement, rank)
}
