package ledgerbench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// timedApp wraps an ABCI application and times the calls that carry the
// load: CheckTx (new and recheck), FinalizeBlock and Commit. The wrapping
// costs two clock reads a call, the same for both apps.
type timedApp struct {
	abci.Application

	checkN, checkNs     atomic.Int64
	recheckN, recheckNs atomic.Int64

	mu       sync.Mutex
	finalize []time.Duration // per block with txs
	commit   []time.Duration // per block with txs
	lastTxs  int             // txs in the block being finalised
}

func (t *timedApp) CheckTx(ctx context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	start := time.Now()
	res, err := t.Application.CheckTx(ctx, req)
	d := int64(time.Since(start))
	if req.Type == abci.CHECK_TX_TYPE_RECHECK {
		t.recheckN.Add(1)
		t.recheckNs.Add(d)
	} else {
		t.checkN.Add(1)
		t.checkNs.Add(d)
	}
	return res, err
}

func (t *timedApp) FinalizeBlock(ctx context.Context, req *abci.FinalizeBlockRequest) (*abci.FinalizeBlockResponse, error) {
	start := time.Now()
	res, err := t.Application.FinalizeBlock(ctx, req)
	d := time.Since(start)
	t.mu.Lock()
	t.lastTxs = len(req.Txs)
	if len(req.Txs) > 0 {
		t.finalize = append(t.finalize, d)
	}
	t.mu.Unlock()
	return res, err
}

func (t *timedApp) Commit(ctx context.Context, req *abci.CommitRequest) (*abci.CommitResponse, error) {
	start := time.Now()
	res, err := t.Application.Commit(ctx, req)
	d := time.Since(start)
	t.mu.Lock()
	if t.lastTxs > 0 {
		t.commit = append(t.commit, d)
	}
	t.mu.Unlock()
	return res, err
}

// reset forgets what was timed so far (the blocks before the measured run).
func (t *timedApp) reset() {
	t.checkN.Store(0)
	t.checkNs.Store(0)
	t.recheckN.Store(0)
	t.recheckNs.Store(0)
	t.mu.Lock()
	t.finalize, t.commit = nil, nil
	t.mu.Unlock()
}

func (t *timedApp) durations() (finalize, commit []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.finalize...), append([]time.Duration(nil), t.commit...)
}

// figures fills the phase's app timings: FinalizeBlock and Commit per
// block, CheckTx and rechecks per tx.
func (t *timedApp) figures(ph *Phase) {
	p, ms := measure.Percentile, measure.Ms
	fin, com := t.durations()
	ph.FinalizeP50Ms, ph.FinalizeP99Ms = ms(p(fin, 50)), ms(p(fin, 99))
	ph.CommitP50Ms, ph.CommitP99Ms = ms(p(com, 50)), ms(p(com, 99))
	if n := t.checkN.Load(); n > 0 {
		ph.CheckTxAvgUs = float64(t.checkNs.Load()) / float64(n) / 1e3
	}
	ph.Rechecks = t.recheckN.Load()
	if ph.Rechecks > 0 {
		ph.RecheckAvgUs = float64(t.recheckNs.Load()) / float64(ph.Rechecks) / 1e3
	}
}
