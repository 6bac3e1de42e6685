package cli

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/schedbench"
)

// schedulerBenchmark is `gpunet bench scheduler`.
var schedulerBenchmark = benchmark{
	name:  "scheduler",
	short: "Measure the ledger's job placements/s and per-placement latency at 1k, 10k and 100k providers",
	long: `Measure the scheduler that places jobs at the end of every block.

For each --providers count, a state is built through the ledger itself
(genesis, then blocks of MsgRegisterProvider and MsgStake txs; not timed)
with a mixed market: CPU-only machines and eight GPU classes, 1 to 8 GPUs,
varied asks, regions, executors and job slots, 3% under-staked. Then:

  throughput  --jobs MsgSubmitJob txs of mixed requirements in blocks of
              --block-jobs. Each block's End(), which runs the scheduler and
              reserves the chosen providers, is timed; placements/s is the
              jobs placed over the time in End(). An untimed block after each
              cancels its jobs, so every timed block starts from idle
              providers.
  latency     --latency-jobs blocks holding one MsgSubmitJob each; each
              End() is one sample of the time to place one job (p50/p99).

End() also folds the block's changes into the state's lattice hash; that
share is re-measured and the rate without it printed too. The store is
Pebble in memory (--store pebble, what nodes run on) or a B-tree
(--store btree). The target is checked at 100,000 providers: >= 20,000
placements/s, p99 <= 250 µs, and >= 0.5 × the rate at the smallest count.`,
	bind: bindSchedulerBench,
}

func bindSchedulerBench(f *pflag.FlagSet) benchRun {
	var (
		o          schedbench.Options
		cpuprofile string
	)
	f.IntSliceVar(&o.Providers, "providers", schedbench.DefaultProviders, "provider counts to measure")
	f.IntVar(&o.Jobs, "jobs", schedbench.DefaultJobs, "jobs submitted in the throughput phase, per provider count")
	f.IntVar(&o.BlockJobs, "block-jobs", schedbench.DefaultBlockJobs, "submissions per block in the throughput phase (also the chain's max_placements_per_block)")
	f.IntVar(&o.LatencyJobs, "latency-jobs", schedbench.DefaultLatencyJobs, "one-job blocks in the latency phase")
	f.IntVar(&o.Consumers, "consumers", schedbench.DefaultConsumers, "accounts submitting the jobs")
	f.StringVar(&o.Store, "store", schedbench.DefaultStore, "the state's store: pebble (in memory) or btree")
	f.Uint64Var(&o.Seed, "seed", schedbench.DefaultSeed, "seed of the market (providers and jobs)")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile (pprof) of the largest count's measured phases to this file")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		closeOut, err := createOutputs(output{cpuprofile, &o.CPUProfile})
		if err != nil {
			return nil, err
		}
		defer closeOut()
		return schedbench.Run(cmd.Context(), o)
	}
}
