// Package jobbench is the job benchmark (`gpunet bench job`): it runs
// no-op WASI jobs end to end on a devnet in this process: a home set up by
// devnet.Setup (one validator, the devnet's parameters and invariant
// checks), the node and its API started by daemon.Start, provider agents
// started by devnet.RunProviders (sharing the real wasm executor), and
// consumers using jobclient as `gpunet job run` does: seal and upload the
// module, submit, grant the job key when assigned, follow until the job
// ends.
//
// A job's time runs from the start of jobclient.Submit (sealing and
// uploading included) to the moment the node reports committed the block
// holding the job's last result (its NewBlock event); its blocks are that
// block's height minus the submission's. Two phases:
//
//   - latency: LatencyJobs jobs one after the other, on an idle network.
//   - sustained: SustainedJobs jobs from Concurrency consumers, each
//     submitting its next job as soon as its last one ended; jobs/s is the
//     jobs that succeeded over the time from the first submission to the
//     last job's end.
package jobbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// Defaults of Options.
const (
	DefaultBlockTime   = 200 * time.Millisecond
	DefaultPoll        = 50 * time.Millisecond
	DefaultProviders   = 4
	DefaultLatency     = 20
	DefaultSustained   = 120
	DefaultConcurrency = 8
	DefaultTimeout     = 15 * time.Second
)

// Target: submit → verified result within these (DESIGN.md section 9, at
// 200 ms blocks).
var Target = TargetFigures{Blocks: 4, P50Ms: 1000, BlockTime: "200ms"}

// TargetFigures are the latency phase's targets.
type TargetFigures struct {
	Blocks    int     `json:"blocks"`
	P50Ms     float64 `json:"p50_ms"`
	BlockTime string  `json:"block_time"`
}

// Options tune a run. Zero fields take the defaults.
type Options struct {
	BlockTime time.Duration
	// Poll is how often provider agents look at the chain and how often
	// consumers look at their job.
	Poll        time.Duration
	Providers   int
	LatencyJobs int
	// WarmupJobs run from every consumer at once before the latency
	// phase, so that the providers have the verification record a live
	// network's have: under spot verification a provider's first
	// spot_warmup results in a class are all audited. Negative skips the
	// phase; 0 means the default (12 per provider for spot, none else).
	WarmupJobs int
	// SustainedJobs is the sustained phase's job count; negative skips
	// the phase.
	SustainedJobs int
	Concurrency   int
	// Verification is the jobs' level: none, spot (default) or full (two
	// providers each, results compared).
	Verification string
	// JobTimeout is how long a consumer follows a job before it gives up
	// and cancels it.
	JobTimeout time.Duration
	// SerialSubmit makes the sustained phase's consumers take turns at
	// submitting, so that each submission has a block of its own. The
	// ledger places twice a job submitted in the same block as another
	// once its queue cursor has moved (see BENCHMARKS.md); this avoids
	// that, at the price of one submission per block at most.
	SerialSubmit bool
	// Dir receives the devnet home, kept; empty means a temporary one.
	Dir      string
	Progress io.Writer
}

// Validate fills in defaults and checks the rest.
func (o *Options) Validate() error {
	if o.BlockTime == 0 {
		o.BlockTime = DefaultBlockTime
	}
	if o.Poll == 0 {
		o.Poll = DefaultPoll
	}
	if o.Providers == 0 {
		o.Providers = DefaultProviders
	}
	if o.LatencyJobs == 0 {
		o.LatencyJobs = DefaultLatency
	}
	if o.SustainedJobs == 0 {
		o.SustainedJobs = DefaultSustained
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Verification == "" {
		o.Verification = "spot"
	}
	if o.JobTimeout == 0 {
		o.JobTimeout = DefaultTimeout
	}
	if o.WarmupJobs == 0 && o.Verification == "spot" {
		o.WarmupJobs = 12 * o.Providers
	}
	switch {
	case o.BlockTime < 10*time.Millisecond || o.BlockTime > 10*time.Second:
		return fmt.Errorf("block time %s out of range [10ms, 10s]", o.BlockTime)
	case o.Poll < time.Millisecond || o.Poll > 10*time.Second:
		return fmt.Errorf("poll %s out of range [1ms, 10s]", o.Poll)
	case o.Providers < 1 || o.Providers > 64:
		return fmt.Errorf("providers %d out of range [1, 64]", o.Providers)
	case o.LatencyJobs < 1 || o.LatencyJobs > 10_000:
		return fmt.Errorf("latency jobs %d out of range [1, 10000]", o.LatencyJobs)
	case o.WarmupJobs > 10_000:
		return fmt.Errorf("warm-up jobs %d: at most 10000", o.WarmupJobs)
	case o.SustainedJobs > 100_000:
		return fmt.Errorf("sustained jobs %d: at most 100000", o.SustainedJobs)
	case o.Concurrency < 1 || o.Concurrency > 256:
		return fmt.Errorf("concurrency %d out of range [1, 256]", o.Concurrency)
	case o.Verification != "none" && o.Verification != "spot" && o.Verification != "full":
		return fmt.Errorf("verification %q: want none, spot or full", o.Verification)
	case o.Verification == "full" && o.Providers < 2:
		return fmt.Errorf("verification full needs at least 2 providers")
	}
	return nil
}

// Result is the outcome of a run.
type Result struct {
	Date         time.Time     `json:"date"`
	BlockTime    string        `json:"block_time"`
	Poll         string        `json:"poll"`
	Providers    int           `json:"providers"`
	Verification string        `json:"verification"`
	SerialSubmit bool          `json:"serial_submit"`
	ModuleBytes  int           `json:"module_bytes"`
	GOMAXPROCS   int           `json:"gomaxprocs"`
	SetupSeconds float64       `json:"setup_s"`
	Warmup       Phase         `json:"warmup"`
	Latency      Phase         `json:"latency"`
	Sustained    Phase         `json:"sustained"`
	Target       TargetFigures `json:"target"`
	// Verdicts on the latency phase (blocks: its worst job).
	MeetsBlocks bool   `json:"meets_blocks"`
	MeetsP50    bool   `json:"meets_p50"`
	Dir         string `json:"dir,omitempty"`
}

// Phase is what one phase gave.
type Phase struct {
	Concurrency int `json:"concurrency"`
	Jobs        int `json:"jobs"`
	Succeeded   int `json:"succeeded"`
	Failed      int `json:"failed"` // ended in another state, or given up on
	// MultiAssigned counts jobs that got more providers than they wanted
	// (the ledger placing a job twice); audit and escalation replicas are
	// wanted.
	MultiAssigned int    `json:"multi_assigned"`
	FirstError    string `json:"first_error,omitempty"`
	// Submit → commit of the block with the last result, succeeded jobs.
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// Result height − submission height.
	BlocksP50  int         `json:"blocks_p50"`
	BlocksMax  int         `json:"blocks_max"`
	BlocksHist map[int]int `json:"blocks_histogram"`
	// The Submit call alone (seal, upload, tx committed), p50.
	SubmitP50Ms float64 `json:"submit_p50_ms"`
	// When the consumer saw the job end (its poll), p50.
	ObservedP50Ms float64 `json:"observed_p50_ms"`
	// Sustained phase: succeeded jobs over the phase's time, from the
	// first submission until the last job ended (or was given up on).
	ElapsedS float64 `json:"elapsed_s,omitempty"`
	JobsPerS float64 `json:"jobs_per_s,omitempty"`
	// CPUCores is the process's CPU time over the phase's time.
	CPUCores float64 `json:"cpu_cores"`
}

// Run sets up the devnet and runs the phases.
func Run(ctx context.Context, o Options) (res *Result, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := measure.Progress(o.Progress)
	home := o.Dir
	if home == "" {
		tmp, err := os.MkdirTemp("", "gpunet-bench-jobs-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		home = tmp
	} else {
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, err
		}
		if home, err = os.MkdirTemp(home, "bench-jobs-"); err != nil {
			return nil, err
		}
	}
	res = &Result{
		Date: time.Now().UTC().Truncate(time.Second), BlockTime: o.BlockTime.String(), Poll: o.Poll.String(),
		Providers: o.Providers, Verification: o.Verification, SerialSubmit: o.SerialSubmit, ModuleBytes: len(noopWASM()),
		GOMAXPROCS: runtime.GOMAXPROCS(0), Target: Target,
	}
	if o.Dir != "" {
		res.Dir = home
	}
	setupStart := time.Now()
	progress("setting up a devnet (block time %s) with %d providers…", o.BlockTime, o.Providers)
	n, err := startNetwork(ctx, home, o, progress)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, n.stop()) }()
	res.SetupSeconds = time.Since(setupStart).Seconds()
	progress("  ready in %.1fs", res.SetupSeconds)

	// One job to warm up: the executor compiles the module once. It is
	// not measured, so it gets four times a job's time: on a loaded
	// machine compiling the module and the first start of a sandbox
	// process took longer than JobTimeout.
	warm := o
	warm.JobTimeout = 4 * o.JobTimeout
	if r := n.runOne(ctx, n.clients[0], warm, nil); !r.ok {
		return nil, fmt.Errorf("warm-up job: %s", r.err)
	}

	if o.WarmupJobs > 0 {
		progress("warm-up: %d jobs from %d consumers at once (the providers build their verification record)…", o.WarmupJobs, len(n.clients))
		res.Warmup = n.runPhase(ctx, n.clients, o.WarmupJobs, o, o.SerialSubmit)
		progress("  p50 %.0fms, blocks p50 %d max %d, %d of %d succeeded", res.Warmup.P50Ms, res.Warmup.BlocksP50, res.Warmup.BlocksMax, res.Warmup.Succeeded, res.Warmup.Jobs)
	}

	progress("latency: %d jobs, one at a time…", o.LatencyJobs)
	res.Latency = n.runPhase(ctx, n.clients[:1], o.LatencyJobs, o, false)
	res.Latency.ElapsedS, res.Latency.JobsPerS = 0, 0
	progress("  p50 %.0fms, blocks p50 %d max %d, %d of %d succeeded", res.Latency.P50Ms, res.Latency.BlocksP50, res.Latency.BlocksMax, res.Latency.Succeeded, res.Latency.Jobs)

	if o.SustainedJobs > 0 {
		progress("sustained: %d jobs from %d consumers at once…", o.SustainedJobs, o.Concurrency)
		res.Sustained = n.runPhase(ctx, n.clients, o.SustainedJobs, o, o.SerialSubmit)
		progress("  %.2f jobs/s, p50 %.0fms, %d of %d succeeded", res.Sustained.JobsPerS, res.Sustained.P50Ms, res.Sustained.Succeeded, res.Sustained.Jobs)
	}
	res.MeetsBlocks = res.Latency.Succeeded == res.Latency.Jobs && res.Latency.BlocksMax <= Target.Blocks
	res.MeetsP50 = res.Latency.Succeeded == res.Latency.Jobs && res.Latency.P50Ms <= Target.P50Ms
	return res, nil
}
