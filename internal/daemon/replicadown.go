package daemon

import (
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/relay"
)

// The replica-down reporter (issue 36, docs/ledger.md "Replicas reported
// down"): a node whose consensus key is a validator in the active set
// reports a ready replica it cannot reach (ledger msg 84), so that the
// ledger replaces it when more than two thirds of the power agree rather
// than at its missed heartbeats. A replica becomes a suspect when a dial
// of it fails at this node (the relay's OnDialFailed: a request of a
// gateway here, another node's tunnel, a probe), when its agent's
// session here ends (OnSessionEnded), or when another validator's report
// of it is in a block. Each suspect is probed through
// the relay (relay.Hub.ProbeDown, which tells the replica's failures from
// this node's own); one found down is looked at again after
// downSettleBlocks blocks (an agent that moved its session to another
// node says so in a heartbeat at once, and is then not reported; one
// whose provider still heartbeats is probed again) and reported when
// still down. Everything is bounded: the queue of suspects (a full queue
// drops new ones), the probes in flight, and the replicas remembered as
// handled lately, which are not probed again for a while (downRecheck,
// downRetry).

// Bounds of the reporter's work.
const (
	downQueue     = 256
	downParallel  = 4
	downMaxRecent = 4096
	// A replica handled is not probed again, while its check runs, for
	// downInFlight at most; then for downRecheck after it was reported
	// (or found answering), downRetry after a check that could say
	// nothing or a report not sent (so that the next failed dial, or
	// another validator's report, looks again soon).
	downInFlight = 2 * time.Minute
	downRecheck  = 5 * time.Second
	downRetry    = time.Second // a witness pass is good once a second
	downAttempts = 3
	// downSettleBlocks is how many blocks a replica found down is given
	// to show that its agent moved before it is probed again and
	// reported; downSettleMax bounds the wait for them.
	downSettleBlocks = 2
	downSettleMax    = 10 * time.Second
)

// downChain is what the reporter needs of the node.
type downChain interface {
	witnessChain
	Subscribe(ctx context.Context, client string) (<-chan int64, error)
	Block(ctx context.Context, height int64) (*apiwire.Block, error)
}

// downReporter is a node's replica-down reporter.
type downReporter struct {
	key     ed25519.PrivateKey
	chainID string
	chain   downChain
	// probe is relay.Hub.ProbeDown: nil when the replica answered, an
	// error wrapping relay.ErrReplicaDown when it is down.
	probe func(ctx context.Context, svc *ledger.Service, provider address.Address) error
	// txMu is held while a tx signed with the consensus key is sent (the
	// witness sends with the same key: one sequence at a time).
	txMu *sync.Mutex
	log  *slog.Logger

	suspects chan ledger.ServedReplica
	height   atomic.Int64 // the newest block the node has
	mu       sync.Mutex
	recent   map[ledger.ServedReplica]time.Time // handled lately: not probed again before this time
}

func newDownReporter(key ed25519.PrivateKey, chainID string, chain downChain, txMu *sync.Mutex, log *slog.Logger) *downReporter {
	return &downReporter{key: key, chainID: chainID, chain: chain, txMu: txMu, log: log,
		suspects: make(chan ledger.ServedReplica, downQueue), recent: map[ledger.ServedReplica]time.Time{}}
}

// suspect queues provider's replica of service to be probed; it never
// blocks (a full queue drops it).
func (d *downReporter) suspect(service uint64, provider address.Address) {
	select {
	case d.suspects <- ledger.ServedReplica{ServiceID: service, Provider: provider}:
	default:
	}
}

// suspectProvider queues every replica of provider (its agent's session
// here ended).
func (d *downReporter) suspectProvider(provider address.Address) {
	kv, release := d.chain.View()
	ids := ledger.ServicesOfProvider(kv, provider)
	release()
	for _, id := range ids {
		d.suspect(id, provider)
	}
}

// run handles suspects until ctx ends.
func (d *downReporter) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if heights, err := d.chain.Subscribe(ctx, "gpunet-replica-down"); err != nil {
		d.log.Warn("replica reports: cannot follow blocks; other validators' reports are not confirmed by this node", "err", err)
	} else {
		wg.Go(func() { d.follow(ctx, heights) })
	}
	sem := make(chan struct{}, downParallel)
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-d.suspects:
			if !d.take(r) {
				continue
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-sem }()
				d.done(r, d.check(ctx, r))
			})
		}
	}
}

// take reports whether r is to be probed now: not handled lately, and
// room to remember it.
func (d *downReporter) take(r ledger.ServedReplica) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if until, ok := d.recent[r]; ok && now.Before(until) {
		return false
	}
	if len(d.recent) >= downMaxRecent {
		for k, until := range d.recent {
			if !now.Before(until) {
				delete(d.recent, k)
			}
		}
		if len(d.recent) >= downMaxRecent {
			return false
		}
	}
	d.recent[r] = now.Add(downInFlight)
	return true
}

// done records that r's check ended, and how soon it may be probed again.
func (d *downReporter) done(r ledger.ServedReplica, again time.Duration) {
	d.mu.Lock()
	d.recent[r] = time.Now().Add(again)
	d.mu.Unlock()
}

// follow keeps the newest height and makes a suspect of every replica
// that a block's report_replica_down counted.
func (d *downReporter) follow(ctx context.Context, heights <-chan int64) {
	for h := range heights {
		d.height.Store(h)
		var b *apiwire.Block
		for try := 0; try < 20 && ctx.Err() == nil; try++ {
			var err error
			if b, err = d.chain.Block(ctx, h); err != nil || b != nil {
				break
			}
			sleep(ctx, 25*time.Millisecond) // not executed here yet
		}
		if b == nil {
			continue
		}
		for _, tx := range b.Txs {
			if tx.Code != 0 || tx.Type != ledger.MsgTypeReportReplicaDown.String() {
				continue
			}
			for _, e := range tx.Events {
				if r, ok := reportedDown(e); ok {
					d.suspect(r.ServiceID, r.Provider)
				}
			}
		}
	}
}

// reportedDown reads a service_replica_reported_down event.
func reportedDown(e ledger.Event) (ledger.ServedReplica, bool) {
	var r ledger.ServedReplica
	if e.Type != "service_replica_reported_down" {
		return r, false
	}
	var okID, okProv bool
	for _, a := range e.Attrs {
		switch a.Key {
		case "service":
			id, err := strconv.ParseUint(a.Value, 10, 64)
			r.ServiceID, okID = id, err == nil && id != 0
		case "provider":
			p, err := address.Parse(a.Value)
			r.Provider, okProv = p, err == nil
		}
	}
	return r, okID && okProv
}

// replica reads r's service from the node's state when r is a ready
// replica that this node, a validator in the active set, has not
// reported in the ledger's window.
func (d *downReporter) replica(r ledger.ServedReplica) (*ledger.Service, *ledger.Replica, bool) {
	pub := d.key.Public().(ed25519.PublicKey)
	kv, release := d.chain.View()
	defer release()
	if !ledger.IsServeWitness(kv, pub) {
		return nil, nil, false
	}
	s, ok, err := ledger.GetService(kv, r.ServiceID)
	if err != nil || !ok || s.Done() {
		return nil, nil, false
	}
	me := ledger.ConsAddressOf(pub)
	for i := range s.Replicas {
		rep := &s.Replicas[i]
		if rep.Provider != r.Provider {
			continue
		}
		for _, dr := range rep.Down {
			if dr.Validator == me {
				return nil, nil, false // reported already
			}
		}
		return s, rep, rep.Ready && rep.ReadyAt != 0
	}
	return nil, nil, false
}

// check probes r and, when it is down, reports it downSettleBlocks
// blocks later if its relay is the same and its provider sent no
// heartbeat since, or if a second probe finds it down still. A check
// that could say nothing (a probe refused, the relay changed meanwhile,
// the report not sent) is tried again after downRetry, downAttempts
// times in all: the failed dial or ended session that made r a suspect
// may not come again. It returns how soon r may be probed again.
func (d *downReporter) check(ctx context.Context, r ledger.ServedReplica) time.Duration {
	for attempt := 1; ; attempt++ {
		again, retry := d.checkOnce(ctx, r)
		if !retry || attempt >= downAttempts || ctx.Err() != nil {
			return again
		}
		sleep(ctx, downRetry)
	}
}

// checkOnce is one try of check: how soon r may be probed again, and
// whether to try again now.
func (d *downReporter) checkOnce(ctx context.Context, r ledger.ServedReplica) (again time.Duration, retry bool) {
	s, rep, ok := d.replica(r)
	if !ok {
		return downRetry, false // not ready (yet), gone, or reported already
	}
	probed := time.Now()
	err := d.probe(ctx, s, r.Provider)
	switch {
	case err == nil:
		return downRecheck, false
	case !errors.Is(err, relay.ErrReplicaDown):
		d.log.Debug("replica reports: cannot tell whether the replica is down", "service", r.ServiceID, "provider", r.Provider, "err", err)
		return downRetry, true
	}
	via, heartbeat := rep.Relay, rep.HeartbeatAt
	if !d.waitBlocks(ctx, downSettleBlocks) {
		return downRetry, true
	}
	s, rep, ok = d.replica(r)
	if !ok {
		return downRetry, false // gone or reported meanwhile
	}
	if rep.Relay != via {
		return downRetry, true // its agent moved: look again there
	}
	if rep.HeartbeatAt != heartbeat {
		// Its provider still reports: look again before saying it is
		// down. A witness pass is good once per second (relay's
		// witness.go), so not within the first probe's second.
		sleep(ctx, time.Until(time.Unix(probed.Unix()+1, 0)))
		if err = d.probe(ctx, s, r.Provider); !errors.Is(err, relay.ErrReplicaDown) {
			d.log.Debug("replica reports: the replica answers again", "service", r.ServiceID, "provider", r.Provider, "err", err)
			return downRetry, err != nil
		}
	}
	if !d.send(ctx, r, err) {
		return downRetry, true
	}
	return downRecheck, false
}

// waitBlocks waits until the node has n blocks more than now, for at
// most downSettleMax; false: it has not (or ctx ended).
func (d *downReporter) waitBlocks(ctx context.Context, n int64) bool {
	height := func() int64 {
		if h := d.height.Load(); h > 0 {
			return h
		}
		// Not following blocks (Subscribe failed): ask the node.
		if st, err := d.chain.Status(ctx); err == nil {
			return st.Height
		}
		return 0
	}
	want := height() + n
	deadline := time.Now().Add(downSettleMax)
	for height() < want {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		sleep(ctx, 20*time.Millisecond)
	}
	return true
}

// send reports r down, why being what the probe found; false: it was
// not sent, or refused.
func (d *downReporter) send(ctx context.Context, r ledger.ServedReplica, why error) bool {
	d.txMu.Lock()
	defer d.txMu.Unlock()
	pub := d.key.Public().(ed25519.PublicKey)
	from := address.FromPubKey(pub)
	kv, release := d.chain.View()
	p, err := ledger.GetParams(kv)
	var acct ledger.Account
	if err == nil {
		acct, err = ledger.GetAccount(kv, from)
	}
	release()
	if err != nil || acct.Balance < p.MinFee {
		d.log.Warn("replica reports: the node's witness account cannot pay the fee; send it some SYNC", "account", from, "balance", acct.Balance, "fee", p.MinFee, "err", err)
		return false
	}
	seq, err := d.chain.NextSequence(from)
	if err != nil {
		d.log.Warn("replica reports: cannot read the account's sequence", "account", from, "err", err)
		return false
	}
	tx := &ledger.Tx{ChainID: d.chainID, Sequence: seq, Fee: p.MinFee, Msg: &ledger.MsgReportReplicaDown{Replicas: []ledger.ServedReplica{r}}}
	if err := tx.Sign(d.key); err != nil {
		d.log.Error("replica reports: cannot sign", "err", err)
		return false
	}
	raw, err := tx.Encode()
	if err != nil {
		d.log.Error("replica reports: cannot encode", "err", err)
		return false
	}
	res, err := d.chain.BroadcastTx(ctx, raw)
	switch {
	case err != nil:
		d.log.Warn("replica reports: not sent", "service", r.ServiceID, "provider", r.Provider, "err", err)
		return false
	case res.Code != 0:
		d.log.Warn("replica reports: refused", "service", r.ServiceID, "provider", r.Provider, "code", res.Code, "log", res.Log)
		return false
	}
	d.log.Info("replica reports: reported a replica down", "service", r.ServiceID, "provider", r.Provider, "tx", res.Hash, "why", why.Error())
	return true
}
