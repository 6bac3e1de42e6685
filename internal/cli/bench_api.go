package cli

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/apibench"
)

// apiBenchmark is `gpunet bench api`.
var apiBenchmark = benchmark{
	name:  "api",
	short: "Measure the node's API reads with 100k providers and 1M jobs in state while its validator produces blocks",
	long: `Measure the HTTP API of a real node on a large state.

A state of --providers providers (a mixed market, registered and staked) and
--jobs jobs is built through the ledger into a fresh validator home (not
timed; signatures not verified while building): a fifth of the jobs run
their whole life in txs (a tenth of those fail), a twentieth stay running,
a twentieth stay queued, the rest are cancelled while queued. The node
(CometBFT, the API, its stats and dashboard) then starts on that state at
the next height and produces a block every --block-time, with --tx-rate
signed transfers a second sent to it.

An open-loop load sends --rate single-object reads a second (a job, a
provider, an account, a balance, a job's timeline) and --list-rate
paginated list reads a second (jobs: newest, by owner, by state; providers
by address; offers queries; blocks; txs; events) for --duration. A
request's latency runs from when it was due. Targets (at 100,000 providers,
1,000,000 jobs, 1,000 req/s): single reads p99 <= 20 ms, lists p99 <= 50 ms.`,
	bind: bindAPIBench,
}

func bindAPIBench(f *pflag.FlagSet) benchRun {
	var (
		o                             apibench.Options
		cpuprofile, trace, memprofile string
	)
	f.IntVar(&o.Providers, "providers", apibench.DefaultProviders, "providers in the state")
	f.IntVar(&o.Jobs, "jobs", apibench.DefaultJobs, "jobs in the state")
	f.IntVar(&o.Consumers, "consumers", apibench.DefaultConsumers, "accounts owning the jobs")
	f.IntVar(&o.Rate, "rate", apibench.DefaultRate, "single-object reads per second")
	f.IntVar(&o.ListRate, "list-rate", apibench.DefaultListRate, "paginated list reads per second, at the same time")
	f.DurationVar(&o.Duration, "duration", apibench.DefaultDuration, "how long the load runs")
	f.DurationVar(&o.BlockTime, "block-time", apibench.DefaultBlockTime, "the validator's pause after each block")
	f.IntVar(&o.TxRate, "tx-rate", apibench.DefaultTxRate, "signed transfers per second sent to the node during the load")
	f.Uint64Var(&o.Seed, "seed", apibench.DefaultSeed, "seed of the market and the load")
	f.StringVar(&o.Home, "home", "", "keep the node's home under this directory (default: a temp dir, removed)")
	f.StringVar(&o.StateDir, "state-dir", "", "keep each built state in this directory and start later runs of the same size from a copy")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile (pprof) of the process during the load to this file")
	f.StringVar(&trace, "trace", "", "write an execution trace (go tool trace) of the process during the load to this file")
	f.StringVar(&memprofile, "memprofile", "", "write the allocations (pprof) at the load's end to this file and at its start to FILE.base: go tool pprof -diff_base FILE.base FILE")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		outs := []output{{cpuprofile, &o.CPUProfile}, {trace, &o.Trace}}
		if memprofile != "" {
			outs = append(outs, output{memprofile + ".base", &o.AllocsBase}, output{memprofile, &o.Allocs})
		}
		closeOut, err := createOutputs(outs...)
		if err != nil {
			return nil, err
		}
		defer closeOut()
		return apibench.Run(cmd.Context(), o)
	}
}
