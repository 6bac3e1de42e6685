package daemon

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The service witness (issue 29, docs/ledger.md "Service billing"): a node
// whose consensus key is a validator in the active set probes, once in
// each billing period and at a random moment of it, every ready replica
// of every active service through the relay, as a user's request reaches
// it; once the chain's block time has passed the period's end it sends
// the replicas that answered in one attest_served tx (ledger msg 83),
// signed with the consensus key. The ledger pays a replica for a period
// only when service_serve_witnesses validators attested it. The witness
// runs beside the gateway and never blocks it: its probes are bounded
// (witnessMaxProbes per period, witnessParallel at a time, each within
// the hub's handshake and readiness timeouts), and its failures are
// logged.

// Bounds of the witness's work.
const (
	// witnessMaxProbes bounds the replicas probed per period: more are
	// skipped (those of the services with the highest ids), and logged.
	witnessMaxProbes = 1024
	// witnessParallel bounds the probes in flight.
	witnessParallel = 8
	// witnessSendWait bounds how long the witness waits for a block past
	// a period's end before it gives the period up.
	witnessSendWait = 2 * time.Minute
)

// witnessChain is what the witness needs of the node.
type witnessChain interface {
	View() (ledger.KV, func())
	NextSequence(addr address.Address) (uint64, error)
	BroadcastTx(ctx context.Context, tx []byte) (*apiwire.TxResult, error)
	Status(ctx context.Context) (*apiwire.Status, error)
}

// witness is a node's service witness.
type witness struct {
	key     ed25519.PrivateKey
	chainID string
	chain   witnessChain
	// probe reaches a replica as a user's request would; nil: it
	// answered.
	probe func(ctx context.Context, svc *ledger.Service, provider address.Address) error
	log   *slog.Logger
	// txMu, when set, is held while a tx is sent: the replica-down
	// reporter signs with the same key (one sequence at a time).
	txMu *sync.Mutex
	// now is the wall clock (tests may set it).
	now func() time.Time

	// lowFunds is when the witness last said its account cannot pay the
	// fee (said at most hourly).
	lowFunds time.Time
}

// run witnesses periods until ctx ends. Each period's probes run at a
// random moment of its first three fifths and must end with it; its
// attestations are sent while the next period's probes run.
func (w *witness) run(ctx context.Context) {
	if w.now == nil {
		w.now = time.Now
	}
	pub := w.key.Public().(ed25519.PublicKey)
	var sending sync.WaitGroup
	defer sending.Wait()
	var next uint64 // the next period to witness (0: the current one)
	for ctx.Err() == nil {
		p, isWitness := w.state(pub)
		period := time.Duration(p.ServiceServePeriod) * time.Second
		if period <= 0 {
			period = 30 * time.Second
		}
		if !isWitness {
			// Not a validator in the active set (yet): look again
			// within a period.
			next = 0
			sleep(ctx, period/2+rand.N(period/2))
			continue
		}
		now := w.now()
		k := max(next, ledger.ServePeriod(now.Unix(), p))
		start := time.Unix(int64(k*p.ServiceServePeriod), 0)
		end := start.Add(period)
		// A random moment in the period's first three fifths (after its
		// first tenth), so a provider cannot learn when witnesses come;
		// a witness that is late probes at once, unless too little of
		// the period is left.
		at := start.Add(period/10 + rand.N(period/2+1))
		if at.Before(now) {
			at = now
		}
		if end.Sub(at) < period/5 {
			next = k + 1
			sleep(ctx, end.Sub(now))
			continue
		}
		sleep(ctx, at.Sub(now))
		if ctx.Err() != nil {
			return
		}
		pctx, cancel := context.WithDeadline(ctx, end)
		served := w.probeAll(pctx)
		cancel()
		next = k + 1
		if len(served) == 0 {
			continue
		}
		// The ledger takes period k once a block is past its end;
		// meanwhile the next period is witnessed. One send at a time.
		sending.Wait()
		sending.Go(func() {
			if w.waitBlockPast(ctx, end) {
				w.send(ctx, k, served, p)
			}
		})
	}
}

// state reads the chain's params and whether pub is a witness.
func (w *witness) state(pub ed25519.PublicKey) (ledger.Params, bool) {
	kv, release := w.chain.View()
	defer release()
	p, err := ledger.GetParams(kv)
	if err != nil {
		w.log.Warn("witness: cannot read the chain's params", "err", err)
		return p, false
	}
	return p, ledger.IsServeWitness(kv, pub)
}

// probeAll probes every ready replica of every active service, at most
// witnessMaxProbes, and returns those that answered, sorted as
// attest_served wants them.
func (w *witness) probeAll(ctx context.Context) []ledger.ServedReplica {
	type target struct {
		svc      *ledger.Service
		provider address.Address
	}
	var targets []target
	skipped := 0
	kv, release := w.chain.View()
	var err error
	ledger.ActiveServices(kv, func(id uint64) bool {
		var s *ledger.Service
		var ok bool
		if s, ok, err = ledger.GetService(kv, id); err != nil || !ok {
			return err == nil
		}
		for _, r := range s.Replicas {
			if !r.Ready || r.ReadyAt == 0 {
				continue
			}
			if len(targets) >= witnessMaxProbes {
				skipped++
				continue
			}
			targets = append(targets, target{s, r.Provider})
		}
		return true
	})
	release()
	if err != nil {
		w.log.Warn("witness: cannot read the services", "err", err)
	}
	if skipped > 0 {
		w.log.Warn("witness: too many replicas to probe in one period; some are not witnessed by this node", "probed", len(targets), "skipped", skipped)
	}
	var mu sync.Mutex
	var served []ledger.ServedReplica
	sem := make(chan struct{}, witnessParallel)
	var wg sync.WaitGroup
	for _, t := range targets {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := w.probe(ctx, t.svc, t.provider); err != nil {
				w.log.Debug("witness: replica did not answer", "service", t.svc.ID, "provider", t.provider, "err", err)
				return
			}
			mu.Lock()
			served = append(served, ledger.ServedReplica{ServiceID: t.svc.ID, Provider: t.provider})
			mu.Unlock()
		})
	}
	wg.Wait()
	ledger.SortServed(served)
	return served
}

// waitBlockPast waits until the node has a block at or after t, for at
// most witnessSendWait; false: it has none (or ctx ended).
func (w *witness) waitBlockPast(ctx context.Context, t time.Time) bool {
	if d := t.Sub(w.now()); d > 0 {
		sleep(ctx, d)
	}
	deadline := w.now().Add(witnessSendWait)
	for ctx.Err() == nil {
		st, err := w.chain.Status(ctx)
		if err == nil && !st.LatestBlockTime.Before(t) {
			return true
		}
		if w.now().After(deadline) {
			w.log.Warn("witness: no block past the period's end; its attestations are dropped", "period_end", t, "err", err)
			return false
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return false
}

// send submits the attestations of period k, in txs of at most
// ledger.MaxServedReplicas replicas.
func (w *witness) send(ctx context.Context, k uint64, served []ledger.ServedReplica, p ledger.Params) {
	if w.txMu != nil {
		w.txMu.Lock()
		defer w.txMu.Unlock()
	}
	pub := w.key.Public().(ed25519.PublicKey)
	from := address.FromPubKey(pub)
	if !w.canPay(from, p.MinFee) {
		return
	}
	for len(served) > 0 {
		n := min(len(served), ledger.MaxServedReplicas)
		batch := served[:n]
		served = served[n:]
		seq, err := w.chain.NextSequence(from)
		if err != nil {
			w.log.Warn("witness: cannot read the account's sequence", "account", from, "err", err)
			return
		}
		tx := &ledger.Tx{ChainID: w.chainID, Sequence: seq, Fee: p.MinFee, Msg: &ledger.MsgAttestServed{Period: k, Replicas: batch}}
		if err := tx.Sign(w.key); err != nil {
			w.log.Error("witness: cannot sign", "err", err)
			return
		}
		raw, err := tx.Encode()
		if err != nil {
			w.log.Error("witness: cannot encode", "err", err)
			return
		}
		res, err := w.chain.BroadcastTx(ctx, raw)
		switch {
		case err != nil:
			w.log.Warn("witness: attestations not sent", "period", k, "replicas", n, "err", err)
			return
		case res.Code != 0:
			w.log.Warn("witness: attestations refused", "period", k, "replicas", n, "code", res.Code, "log", res.Log)
			return
		}
		w.log.Debug("witness: attested", "period", k, "replicas", n, "tx", res.Hash)
	}
}

// canPay reports whether from can pay a tx's fee, saying once an hour
// when it cannot.
func (w *witness) canPay(from address.Address, fee uint64) bool {
	if fee == 0 {
		return true
	}
	kv, release := w.chain.View()
	acct, err := ledger.GetAccount(kv, from)
	release()
	if err == nil && acct.Balance >= fee {
		return true
	}
	if now := w.now(); now.Sub(w.lowFunds) > time.Hour {
		w.lowFunds = now
		w.log.Warn("witness: the node's witness account cannot pay the fee of its attestations; send it some SYNC", "account", from, "balance", acct.Balance, "fee", fee, "err", err)
	}
	return false
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
