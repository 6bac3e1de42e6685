package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// The scheduler benchmark (`gpunet bench scheduler`) measures the ledger's
// job placement at the end of a block, in the ledger itself: no CometBFT,
// no network, one goroutine, as every validator runs it.
//
// For each provider count it builds a state through the real ledger code:
// a genesis funding the providers and consumers, then blocks of
// MsgRegisterProvider and MsgStake txs (not timed). It then submits jobs of
// a mixed market (see sched_workload.go) in two phases:
//
//   - throughput: blocks of BlockJobs MsgSubmitJob txs; the block's End(),
//     which runs the scheduler over the queued jobs and reserves the chosen
//     providers (assignment, provider slot, indexes), is timed. Placements/s
//     is the jobs placed over the total time in End. Each such block is
//     followed by an untimed block cancelling its jobs, so every timed
//     block starts from idle providers and an empty queue.
//   - latency: blocks holding one MsgSubmitJob each; each block's End() is
//     one sample of the time to place one job (with the block's fixed
//     end-of-block costs, reported apart as the End() of an empty block).
//     Jobs are cancelled in an untimed block after every latencyBatch of
//     them.
//
// End() also folds the block's changes, those of the submissions included,
// into the state's lattice hash. The benchmark re-hashes each timed block's
// change set afterwards to estimate that share and reports the scheduler's
// rate without it as well.
//
// DeliverTx is never timed. Signatures are not verified (Ledger.Verify
// accepts all): they are irrelevant to the scheduler and would only
// lengthen the setup. Liveness challenges are off (liveness_rate_ppm 0) so
// that End() does no other work.

// Defaults of SchedOptions.
var DefaultSchedProviders = []int{1_000, 10_000, 100_000}

const (
	DefaultSchedJobs        = 20_000
	DefaultSchedBlockJobs   = 1_000
	DefaultSchedLatencyJobs = 5_000
	DefaultSchedConsumers   = 500
	DefaultSchedStore       = StorePebble
	DefaultSchedSeed        = 1

	latencyBatch       = 50    // one-job blocks between cancellations
	setupBlockProvider = 2_500 // providers registered (and staked) per setup block
	emptyBlocks        = 200   // empty blocks timed for the fixed End() cost
	schedChainID       = "gpunet-bench-sched"
)

// SchedTarget is the scheduler's acceptance target (DESIGN.md section 9).
var SchedTarget = SchedTargetFigures{Providers: 100_000, PlacementsPerS: 20_000, P99Us: 250, Ratio: 0.5}

// SchedTargetFigures are the figures a run must reach at Providers.
type SchedTargetFigures struct {
	Providers      int     `json:"providers"`
	PlacementsPerS float64 `json:"placements_per_s"`
	P99Us          float64 `json:"p99_us"`
	Ratio          float64 `json:"ratio_to_smallest"` // placements/s at Providers over that at the smallest count
}

// SchedOptions tune a scheduler run. Zero fields take the defaults.
type SchedOptions struct {
	// Providers are the provider counts to measure, in order.
	Providers []int
	// Jobs is the number of jobs submitted in the throughput phase, in
	// blocks of BlockJobs.
	Jobs      int
	BlockJobs int
	// LatencyJobs is the number of one-job blocks of the latency phase.
	LatencyJobs int
	// Consumers is the number of accounts submitting the jobs.
	Consumers int
	// Store is StorePebble or StoreBTree.
	Store string
	// Seed draws the market; the same seed gives the same providers and
	// jobs.
	Seed uint64
	// MaxPlacementsPerBlock sets the chain parameter; 0 means BlockJobs
	// (whose default, 1000, is the chain's default), so that the
	// scheduler takes each timed block's jobs in one pass. That pass
	// never wraps around the queue, which keeps clear of the ledger
	// placing jobs twice when it does (SchedSize.Duplicates). Below
	// BlockJobs, jobs stay queued and are cancelled unplaced.
	MaxPlacementsPerBlock uint64
	// Progress, if set, receives a line per phase.
	Progress io.Writer
	// CPUProfile, if set, receives a CPU profile (pprof) of both phases at
	// the largest provider count (setup excluded; DeliverTx and the
	// cancelling blocks included: focus on ledger.(*Block).End).
	CPUProfile io.Writer
}

// Validate fills in defaults and checks the rest.
func (o *SchedOptions) Validate() error {
	if len(o.Providers) == 0 {
		o.Providers = DefaultSchedProviders
	}
	if o.Jobs == 0 {
		o.Jobs = DefaultSchedJobs
	}
	if o.BlockJobs == 0 {
		o.BlockJobs = DefaultSchedBlockJobs
	}
	if o.LatencyJobs == 0 {
		o.LatencyJobs = DefaultSchedLatencyJobs
	}
	if o.Consumers == 0 {
		o.Consumers = DefaultSchedConsumers
	}
	if o.Store == "" {
		o.Store = DefaultSchedStore
	}
	if o.Seed == 0 {
		o.Seed = DefaultSchedSeed
	}
	for _, n := range o.Providers {
		if n < 1 || n > 1_000_000 {
			return fmt.Errorf("provider count %d out of range [1, 1000000]", n)
		}
	}
	switch {
	case o.Store != StorePebble && o.Store != StoreBTree:
		return fmt.Errorf("store %q: want %q or %q", o.Store, StorePebble, StoreBTree)
	case o.Jobs < 1 || o.Jobs > 1_000_000:
		return fmt.Errorf("jobs %d out of range [1, 1000000]", o.Jobs)
	case o.BlockJobs < 1 || o.BlockJobs > 10_000:
		return fmt.Errorf("jobs per block %d out of range [1, 10000]", o.BlockJobs)
	case o.LatencyJobs < 1 || o.LatencyJobs > 1_000_000:
		return fmt.Errorf("latency jobs %d out of range [1, 1000000]", o.LatencyJobs)
	case o.Consumers < 1 || o.Consumers > 100_000:
		return fmt.Errorf("consumers %d out of range [1, 100000]", o.Consumers)
	}
	return nil
}

// SchedResult is the outcome of a scheduler run.
type SchedResult struct {
	Date        time.Time          `json:"date"`
	Store       string             `json:"store"`
	Jobs        int                `json:"jobs"`
	BlockJobs   int                `json:"block_jobs"`
	LatencyJobs int                `json:"latency_jobs"`
	Consumers   int                `json:"consumers"`
	Seed        uint64             `json:"seed"`
	GOMAXPROCS  int                `json:"gomaxprocs"`
	Sizes       []SchedSize        `json:"sizes"`
	Target      SchedTargetFigures `json:"target"`
	// RatioLargestToSmallest is placements/s at the largest provider count
	// over that at the smallest.
	RatioLargestToSmallest float64 `json:"ratio_largest_to_smallest"`
	// Verdicts, when the target's provider count was measured.
	MeetsPlacementsPerS *bool `json:"meets_placements_per_s,omitempty"`
	MeetsP99            *bool `json:"meets_p99,omitempty"`
	MeetsRatio          *bool `json:"meets_ratio,omitempty"`
}

// SchedSize is what one provider count gave.
type SchedSize struct {
	Providers    int     `json:"providers"`
	StateKeys    int     `json:"state_keys"`
	SetupSeconds float64 `json:"setup_s"`
	HeapMiB      float64 `json:"heap_mib"` // live heap after setup

	// Throughput phase.
	Submitted   int `json:"submitted"`
	Placed      int `json:"placed"`      // jobs assigned
	Assignments int `json:"assignments"` // providers reserved (2 for a replicated job)
	Unplaced    int `json:"unplaced"`    // left queued at the end of their block
	// Duplicates counts placements of a job already placed in the same
	// block (a ledger bug when the queue cursor wraps; see BENCHMARKS.md).
	// Any makes the figures suspect.
	Duplicates int `json:"duplicate_placements"`
	Blocks     int `json:"blocks"`
	// PlacementsPerS is Placed over the total time spent in End() of the
	// blocks holding the submissions.
	PlacementsPerS float64 `json:"placements_per_s"`
	EndMs          float64 `json:"end_ms_total"`
	EndP50Ms       float64 `json:"end_block_p50_ms"`
	EndMaxMs       float64 `json:"end_block_max_ms"`
	// HashMs estimates the part of EndMs that folds the blocks' changes
	// into the lattice hash; SchedulerPerS is Placed over EndMs − HashMs.
	HashMs        float64 `json:"hash_ms_total"`
	SchedulerPerS float64 `json:"scheduler_placements_per_s"`
	// Changes per block written by End() (submissions and placements),
	// and provider records End() read, per job submitted.
	ChangesPerJob       float64 `json:"changes_per_job"`
	ProviderReadsPerJob float64 `json:"provider_reads_per_job"`

	// Latency phase: End() of a block holding one submission.
	LatencySamples int     `json:"latency_samples"`
	LatencyPlaced  int     `json:"latency_placed"`
	LatencyMeanUs  float64 `json:"latency_mean_us"`
	LatencyP50Us   float64 `json:"latency_p50_us"`
	LatencyP90Us   float64 `json:"latency_p90_us"`
	LatencyP99Us   float64 `json:"latency_p99_us"`
	LatencyMaxUs   float64 `json:"latency_max_us"`
	// The same over the blocks whose job was placed.
	PlacedP50Us float64 `json:"placed_p50_us"`
	PlacedP99Us float64 `json:"placed_p99_us"`
	// Of those samples, the lattice-hash share (p50) and End() of an
	// empty block (p50): the fixed cost of any block's end.
	LatencyHashP50Us float64 `json:"latency_hash_p50_us"`
	EmptyEndP50Us    float64 `json:"empty_end_p50_us"`
}

// RunScheduler measures each provider count in turn.
func RunScheduler(ctx context.Context, o SchedOptions) (*SchedResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	res := &SchedResult{
		Date: time.Now().UTC().Truncate(time.Second), Store: o.Store,
		Jobs: o.Jobs, BlockJobs: o.BlockJobs, LatencyJobs: o.LatencyJobs, Consumers: o.Consumers, Seed: o.Seed,
		GOMAXPROCS: runtime.GOMAXPROCS(0), Target: SchedTarget,
	}
	consumers := benchKeys("consumer", o.Consumers)
	jobs := schedJobs(o.Seed, 1, o.Jobs)
	latJobs := schedJobs(o.Seed, 2, o.LatencyJobs)
	largest := 0
	for i, n := range o.Providers {
		if n > o.Providers[largest] {
			largest = i
		}
	}
	for i, n := range o.Providers {
		var prof io.Writer
		if i == largest {
			prof = o.CPUProfile
		}
		sz, err := runSchedSize(ctx, o, n, consumers, jobs, latJobs, prof)
		if err != nil {
			return nil, fmt.Errorf("%d providers: %w", n, err)
		}
		res.Sizes = append(res.Sizes, *sz)
		runtime.GC()
	}
	if len(res.Sizes) > 1 {
		small, big := res.Sizes[0], res.Sizes[0]
		for _, s := range res.Sizes {
			if s.Providers < small.Providers {
				small = s
			}
			if s.Providers > big.Providers {
				big = s
			}
		}
		if small.PlacementsPerS > 0 {
			res.RatioLargestToSmallest = big.PlacementsPerS / small.PlacementsPerS
		}
	}
	for _, s := range res.Sizes {
		if s.Providers == SchedTarget.Providers {
			rate := s.PlacementsPerS >= SchedTarget.PlacementsPerS
			p99 := s.LatencyP99Us <= SchedTarget.P99Us
			res.MeetsPlacementsPerS, res.MeetsP99 = &rate, &p99
			if len(res.Sizes) > 1 {
				ratio := res.RatioLargestToSmallest >= SchedTarget.Ratio
				res.MeetsRatio = &ratio
			}
		}
	}
	return res, nil
}

// schedChain is a chain applied block by block to a store.
type schedChain struct {
	l      ledger.Ledger
	kv     *countingKV
	height int64
}

// countingKV counts the provider records read through it.
type countingKV struct {
	schedKV
	providerReads int
}

func (c *countingKV) Get(key []byte) []byte {
	if bytes.HasPrefix(key, providerPrefix) {
		c.providerReads++
	}
	return c.schedKV.Get(key)
}

// providerPrefix is where the ledger keeps provider records ("prov/").
var providerPrefix = []byte("prov/")

// block is what applying one block gave.
type block struct {
	results []ledger.TxResult
	events  []ledger.Event // block-level events (the scheduler's among them)
	end     time.Duration  // time in End()
	hash    time.Duration  // re-hashing End()'s change set (when asked)
	changes int
	// providerReads is the provider records End() read.
	providerReads int
}

func (c *schedChain) apply(txs [][]byte, rehash bool) (*block, error) {
	c.height++
	seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("gpunet-bench/seed/"), uint64(c.height)))
	b := c.l.BeginBlock(c.kv, ledger.BlockInfo{Height: c.height, Time: time.Unix(1_700_000_000+c.height, 0).UTC(), Seed: seed})
	out := &block{results: make([]ledger.TxResult, len(txs))}
	for i, tx := range txs {
		out.results[i] = b.DeliverTx(tx)
		if err := out.results[i].Err; err != nil {
			return nil, fmt.Errorf("block %d tx %d: %w", c.height, i, err)
		}
	}
	t0 := time.Now()
	reads := c.kv.providerReads
	changes, _, err := b.End()
	out.end = time.Since(t0)
	out.providerReads = c.kv.providerReads - reads
	if err != nil {
		return nil, fmt.Errorf("block %d: %w", c.height, err)
	}
	out.events, out.changes = b.Events(), len(changes)
	if rehash {
		out.hash = rehashCost(c.kv, changes)
	}
	return out, c.kv.Apply(changes)
}

// rehashCost times folding changes into a lattice hash as End() does (one
// removal of the old entry and one addition of the new per changed key).
// The old values are read before the clock starts: End() mostly has them
// already (the block's overlay remembers what it read).
func rehashCost(base ledger.KV, changes []ledger.Change) time.Duration {
	olds := make([][]byte, len(changes))
	for i, c := range changes {
		if ledger.Hashed(c.Key) {
			olds[i] = base.Get(c.Key)
		}
	}
	var h ledger.LtHash
	t0 := time.Now()
	for i, c := range changes {
		if !ledger.Hashed(c.Key) {
			continue
		}
		if olds[i] != nil {
			h.Remove(c.Key, olds[i])
		}
		if c.Value != nil {
			h.Add(c.Key, c.Value)
		}
	}
	_ = h.Sum()
	return time.Since(t0)
}

func runSchedSize(ctx context.Context, o SchedOptions, n int, consumers []benchKey, jobs, latJobs []ledger.JobSpec, profile io.Writer) (*SchedSize, error) {
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	sz := &SchedSize{Providers: n}
	setupStart := time.Now()
	progress("%d providers: building the state…", n)

	kv, err := openSchedKV(o.Store)
	if err != nil {
		return nil, err
	}
	defer kv.Close()
	c := &schedChain{kv: &countingKV{schedKV: kv}, l: ledger.Ledger{Verify: func(ed25519.PublicKey, []byte, []byte) bool { return true }}}

	params := ledger.DefaultParams()
	params.LivenessRatePPM = 0
	params.HWRatePPM = 0 // End() should time the scheduler, not challenge draws
	params.MaxPlacementsPerBlock = uint64(o.BlockJobs)
	if o.MaxPlacementsPerBlock > 0 {
		params.MaxPlacementsPerBlock = o.MaxPlacementsPerBlock
	}
	provKeys := benchKeys("provider", n)
	g := ledger.Genesis{Params: params}
	for _, k := range provKeys {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.addr, Balance: 10_000_000_000})
	}
	for _, k := range consumers {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.addr, Balance: 1 << 50})
	}
	genesisKV := ledger.NewMemKV() // empty: InitGenesis only reads it to check it is
	changes, _, err := c.l.InitGenesis(genesisKV, schedChainID, g)
	if err != nil {
		return nil, err
	}
	if err := kv.Apply(changes); err != nil {
		return nil, err
	}
	market := schedProviders(o.Seed, n, params)
	for from := 0; from < n; from += setupBlockProvider {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		to := min(from+setupBlockProvider, n)
		var txs []signedTx
		for i := from; i < to; i++ {
			txs = append(txs,
				signedTx{key: &provKeys[i], seq: 0, msg: &ledger.MsgRegisterProvider{ProviderInfo: market[i].info}},
				signedTx{key: &provKeys[i], seq: 1, msg: &ledger.MsgStake{Amount: ledger.Amount(market[i].stake)}})
		}
		raw, err := signAll(schedChainID, txs)
		if err != nil {
			return nil, err
		}
		if _, err := c.apply(raw, false); err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
	}
	if got := ledger.OnlineCount(kv); got != uint64(n) {
		return nil, fmt.Errorf("setup: %d providers online, want %d", got, n)
	}
	sz.StateKeys = countKeys(kv)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	sz.HeapMiB = float64(ms.HeapAlloc) / (1 << 20)
	sz.SetupSeconds = time.Since(setupStart).Seconds()
	progress("  state: %d keys, heap %.0f MiB, built in %.1fs", sz.StateKeys, sz.HeapMiB, sz.SetupSeconds)

	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}

	seqs := make([]uint64, len(consumers))
	submit := func(specs []ledger.JobSpec, first int) ([][]byte, error) {
		txs := make([]signedTx, len(specs))
		for i := range specs {
			k := (first + i) % len(consumers)
			txs[i] = signedTx{key: &consumers[k], seq: seqs[k], msg: &ledger.MsgSubmitJob{Spec: specs[i], ConsumerKey: ageRecipient("consumer/" + strconv.Itoa(k))}}
			seqs[k]++
		}
		return signAll(schedChainID, txs)
	}
	// cancel returns txs cancelling the jobs that blocks' txs submitted,
	// job j of them from consumer (first+j) mod len(consumers).
	cancel := func(ids []uint64, owners []int) ([][]byte, error) {
		txs := make([]signedTx, len(ids))
		for i, id := range ids {
			k := owners[i]
			txs[i] = signedTx{key: &consumers[k], seq: seqs[k], msg: &ledger.MsgCancelJob{JobID: id}}
			seqs[k]++
		}
		return signAll(schedChainID, txs)
	}

	// Throughput.
	progress("  throughput: %d jobs in blocks of %d…", len(jobs), o.BlockJobs)
	var ends []time.Duration
	var endTotal, hashTotal time.Duration
	var changesTotal, readsTotal int
	for from := 0; from < len(jobs); from += o.BlockJobs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		to := min(from+o.BlockJobs, len(jobs))
		raw, err := submit(jobs[from:to], from)
		if err != nil {
			return nil, err
		}
		b, err := c.apply(raw, true)
		if err != nil {
			return nil, err
		}
		ids, err := submittedIDs(b.results)
		if err != nil {
			return nil, err
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
			owners[i] = (from + i) % len(consumers)
		}
		raw, err = cancel(ids, owners)
		if err != nil {
			return nil, err
		}
		if _, err := c.apply(raw, false); err != nil {
			return nil, fmt.Errorf("cancelling: %w", err)
		}
	}
	sz.Unplaced = sz.Submitted - sz.Placed
	sz.EndMs = ms64(endTotal)
	sz.HashMs = ms64(hashTotal)
	if endTotal > 0 {
		sz.PlacementsPerS = float64(sz.Placed) / endTotal.Seconds()
	}
	if d := endTotal - hashTotal; d > 0 {
		sz.SchedulerPerS = float64(sz.Placed) / d.Seconds()
	}
	sz.ChangesPerJob = float64(changesTotal) / float64(max(sz.Submitted, 1))
	sz.ProviderReadsPerJob = float64(readsTotal) / float64(max(sz.Submitted, 1))
	sz.EndP50Ms = ms64(percentile(ends, 50))
	sz.EndMaxMs = ms64(percentile(ends, 100))
	progress("  %.0f placements/s (%d of %d jobs placed), %.0f/s without the lattice hash; %.0f provider records read per job", sz.PlacementsPerS, sz.Placed, sz.Submitted, sz.SchedulerPerS, sz.ProviderReadsPerJob)

	// Fixed cost of a block's end.
	var empty []time.Duration
	for range emptyBlocks {
		b, err := c.apply(nil, false)
		if err != nil {
			return nil, err
		}
		empty = append(empty, b.end)
	}
	sz.EmptyEndP50Us = us(percentile(empty, 50))

	// Latency: one job per block.
	progress("  latency: %d one-job blocks…", len(latJobs))
	var all, placedLat, hashes []time.Duration
	for from := 0; from < len(latJobs); from += latencyBatch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		to := min(from+latencyBatch, len(latJobs))
		raw, err := submit(latJobs[from:to], from)
		if err != nil {
			return nil, err
		}
		var ids []uint64
		var owners []int
		for i, tx := range raw {
			b, err := c.apply([][]byte{tx}, true)
			if err != nil {
				return nil, err
			}
			id, err := submittedIDs(b.results)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id...)
			owners = append(owners, (from+i)%len(consumers))
			all = append(all, b.end)
			hashes = append(hashes, b.hash)
			placed, _, dups := countPlacements(b.events)
			sz.Duplicates += dups
			if placed > 0 {
				sz.LatencyPlaced++
				placedLat = append(placedLat, b.end)
			}
		}
		raw, err = cancel(ids, owners)
		if err != nil {
			return nil, err
		}
		if _, err := c.apply(raw, false); err != nil {
			return nil, fmt.Errorf("cancelling: %w", err)
		}
	}
	sz.LatencySamples = len(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	sz.LatencyMeanUs = us(sum / time.Duration(max(len(all), 1)))
	sz.LatencyP50Us = us(percentile(all, 50))
	sz.LatencyP90Us = us(percentile(all, 90))
	sz.LatencyP99Us = us(percentile(all, 99))
	sz.LatencyMaxUs = us(percentile(all, 100))
	sz.PlacedP50Us = us(percentile(placedLat, 50))
	sz.PlacedP99Us = us(percentile(placedLat, 99))
	sz.LatencyHashP50Us = us(percentile(hashes, 50))
	progress("  one job per block: End() p50 %.0fµs, p99 %.0fµs (empty block %.0fµs)", sz.LatencyP50Us, sz.LatencyP99Us, sz.EmptyEndP50Us)
	return sz, nil
}

// submittedIDs returns the ids of the jobs the txs submitted, in order.
func submittedIDs(results []ledger.TxResult) ([]uint64, error) {
	var ids []uint64
	for i, r := range results {
		found := false
		for _, e := range r.Events {
			if e.Type != "job_submitted" {
				continue
			}
			for _, a := range e.Attrs {
				if a.Key == "job" {
					id, err := strconv.ParseUint(a.Value, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("tx %d: job id %q: %w", i, a.Value, err)
					}
					ids = append(ids, id)
					found = true
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("tx %d submitted no job", i)
		}
	}
	return ids, nil
}

// countPlacements counts the job_assigned events, the providers they
// reserved, and the events for a job assigned earlier in the same events.
func countPlacements(events []ledger.Event) (placements, providers, dups int) {
	seen := map[string]bool{}
	for _, e := range events {
		if e.Type != "job_assigned" {
			continue
		}
		placements++
		for _, a := range e.Attrs {
			switch a.Key {
			case "providers":
				providers += strings.Count(a.Value, ",") + 1
			case "job":
				if seen[a.Value] {
					dups++
				}
				seen[a.Value] = true
			}
		}
	}
	return placements, providers, dups
}

func us(d time.Duration) float64   { return float64(d.Nanoseconds()) / 1e3 }
func ms64(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
