// Package apibench is the API benchmark (`gpunet bench api`): it measures
// a node's HTTP API reads with a large state while its validator produces
// blocks.
//
// Setup (not timed): a state of --providers providers (the market package's
// providers, registered and staked) and --jobs jobs is built through the
// ledger itself, block by block, into the Pebble store of a fresh validator
// home: jobs run their whole life in txs (submitted, placed by the
// scheduler, key granted, started, result committed: succeeded or failed),
// some stay running, some stay queued (priced below every ask), and the
// rest are cancelled while queued. Signatures are not verified while
// building (Ledger.Verify accepts all), as in the scheduler benchmark. The
// home's genesis then starts the chain at the next height with that app
// hash (CometBFT's initial_height), so the real node (daemon.Start:
// CometBFT, the API, netstats, the dashboard) resumes on the built state
// and produces blocks; a background load of signed transfers keeps them
// non-empty.
//
// Load: an open-loop generator sends --rate single-object reads a second (a
// job, a provider, an account, a balance, a job's timeline) and --list-rate
// paginated list reads a second (newest jobs, jobs by owner and by state,
// providers by address, an offers query, blocks, txs, events), for
// --duration. A request's latency runs from the moment it was due, so a
// backlog counts against the API. Every answer must be 200.
package apibench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Defaults of Options.
const (
	DefaultProviders = 100_000
	DefaultJobs      = 1_000_000
	DefaultRate      = 1000
	DefaultListRate  = 100
	DefaultDuration  = 30 * time.Second
	DefaultBlockTime = time.Second
	DefaultTxRate    = 50
	DefaultConsumers = 1000
	DefaultSeed      = 1

	chainID = "gpunet-bench-api"
)

// Target is the API's acceptance target (the figures).
var Target = TargetFigures{Providers: 100_000, Jobs: 1_000_000, Rate: 1000, SingleP99Ms: 20, ListP99Ms: 50}

// TargetFigures are the target's state size, rate and p99s.
type TargetFigures struct {
	Providers   int     `json:"providers"`
	Jobs        int     `json:"jobs"`
	Rate        int     `json:"rate"`
	SingleP99Ms float64 `json:"single_p99_ms"`
	ListP99Ms   float64 `json:"list_p99_ms"`
}

// Options tune an API run. Zero fields take the defaults.
type Options struct {
	Providers int
	Jobs      int
	Consumers int
	// Rate is single-object reads per second; ListRate paginated list
	// reads per second, sent at the same time.
	Rate     int
	ListRate int
	Duration time.Duration
	// BlockTime is the validator's pause after each block; TxRate the
	// signed transfers a second sent to it meanwhile.
	BlockTime time.Duration
	TxRate    int
	Seed      uint64
	// Home, if set, keeps the node's home under it; else a temp dir,
	// removed after.
	Home string
	// StateDir, if set, keeps each built state there (by size and seed)
	// and later runs of the same size start from a copy of it instead of
	// building it again.
	StateDir string
	Progress io.Writer
	// CPUProfile, if set, receives a CPU profile (pprof) of the process
	// during the load: the node, its block production and the load
	// generator together.
	CPUProfile io.Writer
	// Trace, if set, receives an execution trace (runtime/trace) of the
	// process during the load.
	Trace io.Writer
	// AllocsBase and Allocs, if set, receive the process's allocation
	// profile (pprof) at the start and the end of the load: their
	// difference is the load's.
	AllocsBase, Allocs io.Writer
}

// Validate fills in defaults and checks the rest.
func (o *Options) Validate() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Providers, DefaultProviders)
	def(&o.Jobs, DefaultJobs)
	def(&o.Consumers, DefaultConsumers)
	def(&o.Rate, DefaultRate)
	def(&o.ListRate, DefaultListRate)
	def(&o.TxRate, DefaultTxRate)
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.BlockTime == 0 {
		o.BlockTime = DefaultBlockTime
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	switch {
	case o.Providers < 10 || o.Providers > 1_000_000:
		return fmt.Errorf("providers %d out of range [10, 1000000]", o.Providers)
	case o.Jobs < 100 || o.Jobs > 10_000_000:
		return fmt.Errorf("jobs %d out of range [100, 10000000]", o.Jobs)
	case o.Consumers < 1 || o.Consumers > 100_000:
		return fmt.Errorf("consumers %d out of range [1, 100000]", o.Consumers)
	case o.Rate < 1 || o.Rate > 100_000 || o.ListRate < 0 || o.ListRate > 10_000:
		return fmt.Errorf("rate %d or list rate %d out of range", o.Rate, o.ListRate)
	case o.TxRate < 0 || o.TxRate > 10_000:
		return fmt.Errorf("tx rate %d out of range [0, 10000]", o.TxRate)
	case o.Duration < time.Second || o.Duration > time.Hour:
		return fmt.Errorf("duration %s out of range [1s, 1h]", o.Duration)
	case o.BlockTime < 10*time.Millisecond || o.BlockTime > time.Minute:
		return fmt.Errorf("block time %s out of range [10ms, 1m]", o.BlockTime)
	}
	return nil
}

// Result is the outcome of an API run.
type Result struct {
	Date       time.Time      `json:"date"`
	GOMAXPROCS int            `json:"gomaxprocs"`
	Providers  int            `json:"providers"`
	Jobs       int            `json:"jobs"`
	JobStates  map[string]int `json:"job_states"`
	// SetupSeconds is building the state; StateBlocks its blocks and
	// StateTxs their txs.
	SetupSeconds float64 `json:"setup_s"`
	StateBlocks  int     `json:"state_blocks"`
	StateTxs     int     `json:"state_txs"`
	// NodeStartSeconds is the node's start on the built state, and
	// StatsLoadSeconds netstats reading it (before the load starts).
	NodeStartSeconds float64 `json:"node_start_s"`
	StatsLoadSeconds float64 `json:"stats_load_s"`
	Rate             int     `json:"rate"`
	ListRate         int     `json:"list_rate"`
	DurationSeconds  float64 `json:"duration_s"`
	TxRate           int     `json:"tx_rate"`
	// Blocks the validator produced during the load, and the txs they
	// held.
	Blocks    int        `json:"blocks"`
	BlockTxs  int        `json:"block_txs"`
	Single    Class      `json:"single"`
	List      Class      `json:"list"`
	Endpoints []Endpoint `json:"endpoints"`
	// ErrorSamples are the first failed requests, if any.
	ErrorSamples []string `json:"error_samples,omitempty"`
	Target       TargetFigures
	MeetsSingle  *bool `json:"meets_single_p99,omitempty"`
	MeetsList    *bool `json:"meets_list_p99,omitempty"`
}

// Class is the latency of one class of requests.
type Class struct {
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	RatePerS float64 `json:"achieved_per_s"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
}

// Endpoint is the latency of one kind of request.
type Endpoint struct {
	Name  string  `json:"name"`
	List  bool    `json:"list"`
	N     int     `json:"requests"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// Run builds the state, starts the node on it and measures the API.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := measure.Progress(o.Progress)
	root := o.Home
	if root == "" {
		dir, err := os.MkdirTemp("", "gpunet-bench-api-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		root = dir
	}
	home := filepath.Join(root, fmt.Sprintf("bench-api-%d", time.Now().UnixNano()))
	res := &Result{Date: time.Now().UTC().Truncate(time.Second), GOMAXPROCS: runtime.GOMAXPROCS(0), Providers: o.Providers, Jobs: o.Jobs,
		Rate: o.Rate, ListRate: o.ListRate, DurationSeconds: o.Duration.Seconds(), TxRate: o.TxRate, Target: Target}

	senders := market.Keys("api-sender", 64)
	params := ledger.DefaultParams()
	params.LivenessRatePPM = 0 // no agents run to answer challenges
	params.HWRatePPM = 0
	st, err := prepareState(ctx, home, o, params, senders, res, progress)
	if err != nil {
		return nil, err
	}
	res.StateBlocks, res.StateTxs, res.JobStates = int(st.height), st.txs, st.states
	progress("state built in %.0fs: %d blocks, %d txs, jobs %v", res.SetupSeconds, st.height, st.txs, st.states)

	if err := resumeOn(home, st); err != nil {
		return nil, err
	}
	t0 := time.Now()
	d, err := daemon.Start(ctx, home, daemon.Options{APIAddr: "127.0.0.1:0"})
	if err != nil {
		return nil, fmt.Errorf("start the node on the built state: %w", err)
	}
	defer d.Stop()
	res.NodeStartSeconds = time.Since(t0).Seconds()
	for !d.Stats.Ready() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	res.StatsLoadSeconds = time.Since(t0).Seconds() - res.NodeStartSeconds
	progress("node started in %.1fs, its stats loaded in %.1fs; measuring for %s…", res.NodeStartSeconds, res.StatsLoadSeconds, o.Duration)

	if err := runLoad(ctx, d, o, st, senders, res); err != nil {
		return nil, err
	}
	single, list := res.Single.P99Ms <= Target.SingleP99Ms, res.List.P99Ms <= Target.ListP99Ms
	if o.Providers >= Target.Providers && o.Jobs >= Target.Jobs && o.Rate >= Target.Rate {
		res.MeetsSingle, res.MeetsList = &single, &list
	}
	return res, nil
}
