// Package schedbench is the scheduler benchmark (`gpunet bench scheduler`):
// it measures the ledger's job placement at the end of a block, in the
// ledger itself: no CometBFT, no network, one goroutine, as every validator
// runs it.
//
// For each provider count it builds a state through the real ledger code:
// a genesis funding the providers and consumers, then blocks of
// MsgRegisterProvider and MsgStake txs (not timed). It then submits jobs of
// a mixed market (the market package's) in two phases:
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
package schedbench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/bench/statestore"
)

// Stores the benchmark can run the ledger on (Options.Store).
const (
	// StorePebble is Pebble, the store nodes run on, in memory.
	StorePebble = statestore.Pebble
	// StoreBTree is an in-memory B-tree: the ledger's own cost, with the
	// store's as small as it gets.
	StoreBTree = statestore.BTree
)

// Defaults of Options.
var DefaultProviders = []int{1_000, 10_000, 100_000}

const (
	DefaultJobs        = 20_000
	DefaultBlockJobs   = 1_000
	DefaultLatencyJobs = 5_000
	DefaultConsumers   = 500
	DefaultStore       = StorePebble
	DefaultSeed        = 1

	latencyBatch = 50  // one-job blocks between cancellations
	emptyBlocks  = 200 // empty blocks timed for the fixed End() cost
	chainID      = "gpunet-bench-sched"
)

// Target is the scheduler's acceptance target (DESIGN.md section 9).
var Target = TargetFigures{Providers: 100_000, PlacementsPerS: 20_000, P99Us: 250, Ratio: 0.5}

// TargetFigures are the figures a run must reach at Providers.
type TargetFigures struct {
	Providers      int     `json:"providers"`
	PlacementsPerS float64 `json:"placements_per_s"`
	P99Us          float64 `json:"p99_us"`
	Ratio          float64 `json:"ratio_to_smallest"` // placements/s at Providers over that at the smallest count
}

// Options tune a scheduler run. Zero fields take the defaults.
type Options struct {
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
	// placing jobs twice when it does (Size.Duplicates). Below
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
func (o *Options) Validate() error {
	if len(o.Providers) == 0 {
		o.Providers = DefaultProviders
	}
	if o.Jobs == 0 {
		o.Jobs = DefaultJobs
	}
	if o.BlockJobs == 0 {
		o.BlockJobs = DefaultBlockJobs
	}
	if o.LatencyJobs == 0 {
		o.LatencyJobs = DefaultLatencyJobs
	}
	if o.Consumers == 0 {
		o.Consumers = DefaultConsumers
	}
	if o.Store == "" {
		o.Store = DefaultStore
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
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

// Result is the outcome of a scheduler run.
type Result struct {
	Date        time.Time     `json:"date"`
	Store       string        `json:"store"`
	Jobs        int           `json:"jobs"`
	BlockJobs   int           `json:"block_jobs"`
	LatencyJobs int           `json:"latency_jobs"`
	Consumers   int           `json:"consumers"`
	Seed        uint64        `json:"seed"`
	GOMAXPROCS  int           `json:"gomaxprocs"`
	Sizes       []Size        `json:"sizes"`
	Target      TargetFigures `json:"target"`
	// RatioLargestToSmallest is placements/s at the largest provider count
	// over that at the smallest.
	RatioLargestToSmallest float64 `json:"ratio_largest_to_smallest"`
	// Verdicts, when the target's provider count was measured.
	MeetsPlacementsPerS *bool `json:"meets_placements_per_s,omitempty"`
	MeetsP99            *bool `json:"meets_p99,omitempty"`
	MeetsRatio          *bool `json:"meets_ratio,omitempty"`
}

// Size is what one provider count gave.
type Size struct {
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

// Run measures each provider count in turn.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	res := &Result{
		Date: time.Now().UTC().Truncate(time.Second), Store: o.Store,
		Jobs: o.Jobs, BlockJobs: o.BlockJobs, LatencyJobs: o.LatencyJobs, Consumers: o.Consumers, Seed: o.Seed,
		GOMAXPROCS: runtime.GOMAXPROCS(0), Target: Target,
	}
	consumers := market.Keys("consumer", o.Consumers)
	jobs := market.Jobs(o.Seed, 1, o.Jobs)
	latJobs := market.Jobs(o.Seed, 2, o.LatencyJobs)
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
		sz, err := runSize(ctx, o, n, consumers, jobs, latJobs, prof)
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
		if s.Providers == Target.Providers {
			rate := s.PlacementsPerS >= Target.PlacementsPerS
			p99 := s.LatencyP99Us <= Target.P99Us
			res.MeetsPlacementsPerS, res.MeetsP99 = &rate, &p99
			if len(res.Sizes) > 1 {
				ratio := res.RatioLargestToSmallest >= Target.Ratio
				res.MeetsRatio = &ratio
			}
		}
	}
	return res, nil
}
