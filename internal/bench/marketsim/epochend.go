package marketsim

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/bench/statestore"
	"github.com/gpunet/gpunet/internal/ledger"
)

// EpochEnd is what an epoch's end costs at a provider count: End() of the
// blocks that close an epoch against End() of the blocks that do not, on
// the same state in the same run.
type EpochEnd struct {
	Providers int
	Classes   int
	// Median End() of blocks that close an epoch and of those that do not
	// (the baseline), and the difference: the epoch's own work.
	Closing, Baseline time.Duration
	Blocks            int // of each kind timed
}

// MeasureEpochEnd registers n providers of the benchmark market (its eight
// GPU classes and cpu) in a store of kind (statestore.Pebble, the nodes'
// store, or statestore.BTree), then times End() of 20 epochs of 5 blocks.
func MeasureEpochEnd(n int, kind string) (*EpochEnd, error) {
	p := ledger.DefaultParams()
	p.LivenessRatePPM, p.HWRatePPM = 0, 0
	p.EpochBlocks = 5
	keys := market.Keys("provider", n)
	g := ledger.Genesis{Params: p}
	for _, k := range keys {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Addr, Balance: 10_000_000_000})
	}
	var l ledger.Ledger
	kv, err := statestore.Open(kind)
	if err != nil {
		return nil, err
	}
	defer kv.Close()
	changes, _, err := l.InitGenesis(ledger.NewMemKV(), chainID, g)
	if err != nil {
		return nil, err
	}
	if err := kv.Apply(changes); err != nil {
		return nil, err
	}
	h := int64(0)
	apply := func(txs [][]byte) (time.Duration, error) {
		h++
		b := l.BeginBlock(kv, ledger.BlockInfo{Height: h, Time: time.Unix(1_700_000_000+6*h, 0).UTC()})
		for i, tx := range txs {
			if r := b.DeliverTx(tx); r.Err != nil {
				return 0, fmt.Errorf("block %d tx %d: %w", h, i, r.Err)
			}
		}
		start := time.Now()
		changes, _, err := b.End()
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		return d, kv.Apply(changes)
	}
	provs := market.Providers(1, n, p)
	for from := 0; from < n; from += market.ProvidersPerBlock {
		var txs []market.Tx
		for i := from; i < min(from+market.ProvidersPerBlock, n); i++ {
			txs = append(txs, market.Tx{Key: &keys[i], Seq: 0, Msg: &ledger.MsgRegisterProvider{ProviderInfo: provs[i].Info}},
				market.Tx{Key: &keys[i], Seq: 1, Msg: &ledger.MsgStake{Amount: ledger.Amount(provs[i].Stake)}})
		}
		raw, err := market.SignAll(chainID, txs)
		if err != nil {
			return nil, err
		}
		if _, err := apply(raw); err != nil {
			return nil, err
		}
	}
	ms, err := ledger.Market(kv, "", 0)
	if err != nil {
		return nil, err
	}
	out := &EpochEnd{Providers: n, Classes: len(ms)}
	var closing, baseline []time.Duration
	for len(closing) < 20 {
		before := ledger.GetEpoch(kv).Number
		d, err := apply(nil)
		if err != nil {
			return nil, err
		}
		if ledger.GetEpoch(kv).Number != before {
			closing = append(closing, d)
		} else {
			baseline = append(baseline, d)
		}
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	out.Closing, out.Baseline, out.Blocks = median(closing), median(baseline), len(closing)
	return out, nil
}
