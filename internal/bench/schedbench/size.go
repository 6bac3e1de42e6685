package schedbench

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/bench/statestore"
	"github.com/gpunet/gpunet/internal/ledger"
)

// sizeRun is the measurement of one provider count: its chain, the
// consumers submitting the jobs and their next sequences.
type sizeRun struct {
	o         Options
	c         *chain
	consumers []market.Key
	seqs      []uint64
	sz        *Size
	progress  func(string, ...any)
}

// runSize builds a state of n providers, then measures the throughput
// phase, the fixed cost of a block's end and the latency phase on it;
// profile, if set, receives a CPU profile of the measured phases.
func runSize(ctx context.Context, o Options, n int, consumers []market.Key, jobs, latJobs []ledger.JobSpec, profile io.Writer) (*Size, error) {
	r := &sizeRun{o: o, consumers: consumers, seqs: make([]uint64, len(consumers)), sz: &Size{Providers: n}, progress: measure.Progress(o.Progress)}
	setupStart := time.Now()
	r.progress("%d providers: building the state…", n)
	kv, err := statestore.Open(o.Store)
	if err != nil {
		return nil, err
	}
	defer kv.Close()
	r.c = &chain{kv: &countingKV{Store: kv}, l: ledger.Ledger{Verify: func(ed25519.PublicKey, []byte, []byte) bool { return true }}}
	if err := r.setup(ctx, kv, n); err != nil {
		return nil, err
	}
	sz := r.sz
	sz.StateKeys = statestore.CountKeys(kv)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	sz.HeapMiB = float64(ms.HeapAlloc) / (1 << 20)
	sz.SetupSeconds = time.Since(setupStart).Seconds()
	r.progress("  state: %d keys, heap %.0f MiB, built in %.1fs", sz.StateKeys, sz.HeapMiB, sz.SetupSeconds)

	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	if err := r.throughput(ctx, jobs); err != nil {
		return nil, err
	}
	if err := r.emptyEnds(); err != nil {
		return nil, err
	}
	if err := r.latency(ctx, latJobs); err != nil {
		return nil, err
	}
	return sz, nil
}

// setup writes the genesis (providers and consumers funded) to kv and
// registers and stakes the market's n providers, not timed.
func (r *sizeRun) setup(ctx context.Context, kv statestore.Store, n int) error {
	params := ledger.DefaultParams()
	params.LivenessRatePPM = 0
	params.HWRatePPM = 0 // End() should time the scheduler, not challenge draws
	// The latency phase cancels its placed jobs after up to latencyBatch
	// one-second blocks: they must still be waiting for their grant then,
	// not failed by the grant deadline (30 s by default).
	params.JobGrantTimeout = 2 * latencyBatch
	params.MaxPlacementsPerBlock = uint64(r.o.BlockJobs)
	if r.o.MaxPlacementsPerBlock > 0 {
		params.MaxPlacementsPerBlock = r.o.MaxPlacementsPerBlock
	}
	provKeys := market.Keys("provider", n)
	g := ledger.Genesis{Params: params}
	for _, k := range provKeys {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Addr, Balance: 10_000_000_000})
	}
	for _, k := range r.consumers {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Addr, Balance: 1 << 50})
	}
	genesisKV := ledger.NewMemKV() // empty: InitGenesis only reads it to check it is
	changes, _, err := r.c.l.InitGenesis(genesisKV, chainID, g)
	if err != nil {
		return err
	}
	if err := kv.Apply(changes); err != nil {
		return err
	}
	provs := market.Providers(r.o.Seed, n, params)
	for from := 0; from < n; from += market.ProvidersPerBlock {
		if err := ctx.Err(); err != nil {
			return err
		}
		to := min(from+market.ProvidersPerBlock, n)
		var txs []market.Tx
		for i := from; i < to; i++ {
			txs = append(txs,
				market.Tx{Key: &provKeys[i], Seq: 0, Msg: &ledger.MsgRegisterProvider{ProviderInfo: provs[i].Info}},
				market.Tx{Key: &provKeys[i], Seq: 1, Msg: &ledger.MsgStake{Amount: ledger.Amount(provs[i].Stake)}})
		}
		raw, err := market.SignAll(chainID, txs)
		if err != nil {
			return err
		}
		if _, err := r.c.apply(raw, false); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
	}
	if got := ledger.OnlineCount(kv); got != uint64(n) {
		return fmt.Errorf("setup: %d providers online, want %d", got, n)
	}
	return nil
}

// submit returns txs submitting specs, spec i from consumer (first+i) mod
// the consumers.
func (r *sizeRun) submit(specs []ledger.JobSpec, first int) ([][]byte, error) {
	txs := make([]market.Tx, len(specs))
	for i := range specs {
		k := (first + i) % len(r.consumers)
		txs[i] = market.Tx{Key: &r.consumers[k], Seq: r.seqs[k], Msg: &ledger.MsgSubmitJob{Spec: specs[i], ConsumerKey: market.AgeRecipient("consumer/" + strconv.Itoa(k))}}
		r.seqs[k]++
	}
	return market.SignAll(chainID, txs)
}

// cancel applies, untimed, a block cancelling the jobs ids, job i owned by
// consumer owners[i].
func (r *sizeRun) cancel(ids []uint64, owners []int) error {
	txs := make([]market.Tx, len(ids))
	for i, id := range ids {
		k := owners[i]
		txs[i] = market.Tx{Key: &r.consumers[k], Seq: r.seqs[k], Msg: &ledger.MsgCancelJob{JobID: id}}
		r.seqs[k]++
	}
	raw, err := market.SignAll(chainID, txs)
	if err != nil {
		return err
	}
	if _, err := r.c.apply(raw, false); err != nil {
		return fmt.Errorf("cancelling: %w", err)
	}
	return nil
}

// throughput submits jobs in blocks of BlockJobs, each block's End()
// timed, each followed by an untimed block cancelling its jobs.
func (r *sizeRun) throughput(ctx context.Context, jobs []ledger.JobSpec) error {
	sz, o := r.sz, r.o
	r.progress("  throughput: %d jobs in blocks of %d…", len(jobs), o.BlockJobs)
	var ends []time.Duration
	var endTotal, hashTotal time.Duration
	var changesTotal, readsTotal int
	for from := 0; from < len(jobs); from += o.BlockJobs {
		if err := ctx.Err(); err != nil {
			return err
		}
		to := min(from+o.BlockJobs, len(jobs))
		raw, err := r.submit(jobs[from:to], from)
		if err != nil {
			return err
		}
		b, err := r.c.apply(raw, true)
		if err != nil {
			return err
		}
		ids, err := submittedIDs(b.results)
		if err != nil {
			return err
		}
		placed, assigned, dups := countPlacements(b.events)
		sz.Duplicates += dups
		placed -= dups
		sz.Submitted += len(ids)
		sz.Placed += placed
		sz.Assignments += assigned
		sz.Blocks++
		ends = append(ends, b.end)
		endTotal += b.end
		hashTotal += b.hash
		changesTotal += b.changes
		readsTotal += b.providerReads
		owners := make([]int, len(ids))
		for i := range ids {
			owners[i] = (from + i) % len(r.consumers)
		}
		if err := r.cancel(ids, owners); err != nil {
			return err
		}
	}
	ms := measure.ExactMs
	sz.Unplaced = sz.Submitted - sz.Placed
	sz.EndMs = ms(endTotal)
	sz.HashMs = ms(hashTotal)
	if endTotal > 0 {
		sz.PlacementsPerS = float64(sz.Placed) / endTotal.Seconds()
	}
	if d := endTotal - hashTotal; d > 0 {
		sz.SchedulerPerS = float64(sz.Placed) / d.Seconds()
	}
	sz.ChangesPerJob = float64(changesTotal) / float64(max(sz.Submitted, 1))
	sz.ProviderReadsPerJob = float64(readsTotal) / float64(max(sz.Submitted, 1))
	sz.EndP50Ms = ms(measure.Percentile(ends, 50))
	sz.EndMaxMs = ms(measure.Percentile(ends, 100))
	r.progress("  %.0f placements/s (%d of %d jobs placed), %.0f/s without the lattice hash; %.0f provider records read per job", sz.PlacementsPerS, sz.Placed, sz.Submitted, sz.SchedulerPerS, sz.ProviderReadsPerJob)
	return nil
}

// emptyEnds times the End() of empty blocks: the fixed cost of a block's
// end.
func (r *sizeRun) emptyEnds() error {
	var empty []time.Duration
	for range emptyBlocks {
		b, err := r.c.apply(nil, false)
		if err != nil {
			return err
		}
		empty = append(empty, b.end)
	}
	r.sz.EmptyEndP50Us = measure.Us(measure.Percentile(empty, 50))
	return nil
}

// latency submits one job per block, each End() one sample, the jobs
// cancelled in an untimed block after every latencyBatch of them.
func (r *sizeRun) latency(ctx context.Context, latJobs []ledger.JobSpec) error {
	sz := r.sz
	r.progress("  latency: %d one-job blocks…", len(latJobs))
	var all, placedLat, hashes []time.Duration
	for from := 0; from < len(latJobs); from += latencyBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		to := min(from+latencyBatch, len(latJobs))
		raw, err := r.submit(latJobs[from:to], from)
		if err != nil {
			return err
		}
		var ids []uint64
		var owners []int
		for i, tx := range raw {
			b, err := r.c.apply([][]byte{tx}, true)
			if err != nil {
				return err
			}
			id, err := submittedIDs(b.results)
			if err != nil {
				return err
			}
			ids = append(ids, id...)
			owners = append(owners, (from+i)%len(r.consumers))
			all = append(all, b.end)
			hashes = append(hashes, b.hash)
			placed, _, dups := countPlacements(b.events)
			sz.Duplicates += dups
			if placed > 0 {
				sz.LatencyPlaced++
				placedLat = append(placedLat, b.end)
			}
		}
		if err := r.cancel(ids, owners); err != nil {
			return err
		}
	}
	sz.LatencySamples = len(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	us, p := measure.Us, measure.Percentile
	sz.LatencyMeanUs = us(sum / time.Duration(max(len(all), 1)))
	sz.LatencyP50Us = us(p(all, 50))
	sz.LatencyP90Us = us(p(all, 90))
	sz.LatencyP99Us = us(p(all, 99))
	sz.LatencyMaxUs = us(p(all, 100))
	sz.PlacedP50Us = us(p(placedLat, 50))
	sz.PlacedP99Us = us(p(placedLat, 99))
	sz.LatencyHashP50Us = us(p(hashes, 50))
	r.progress("  one job per block: End() p50 %.0fµs, p99 %.0fµs (empty block %.0fµs)", sz.LatencyP50Us, sz.LatencyP99Us, sz.EmptyEndP50Us)
	return nil
}
