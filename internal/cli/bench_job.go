package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/jobbench"
)

// jobBenchmark is `gpunet bench job`.
var jobBenchmark = benchmark{
	name:  "job",
	short: "Measure submit → verified result for no-op WASI jobs on an in-process devnet, and jobs/s sustained",
	long: `Measure no-op WASI jobs end to end on a devnet run in this process.

A devnet home (devnet.Setup: one validator, --block-time) gets its node and
API (daemon.Start), --providers provider agents (devnet.RunProviders, the real
wasm executor, polling every --poll) and consumer keys funded by alice. Each
job is a 127-byte WASI module that creates /out, submitted with jobclient as
` + "`gpunet job run`" + ` does (sealed, uploaded, submitted; key granted when
assigned; followed every --poll until it ends).

A job's time runs from the start of the submission to the commit of the
block holding its result; its blocks are that height minus the submission's.

  warm-up    --warmup-jobs jobs from every consumer at once, so that the
             providers have a verification record as on a live network
             (default 12 per provider for spot: a provider's first results
             in a class are all audited; 0 for none and full).
  latency    --latency-jobs jobs, one at a time.
  sustained  --sustained-jobs jobs from --concurrency consumers, each sending
             its next job when its last one ended: jobs/s is the jobs that
             succeeded over the phase's time (until the last job ended or
             was given up on after --job-timeout, then cancelled).
             --serial-submit makes the consumers take turns at submitting.

The target, at 200 ms blocks: <= 4 blocks and p50 <= 1 s (latency phase).`,
	bind: bindJobBench,
}

func bindJobBench(f *pflag.FlagSet) benchRun {
	var o jobbench.Options
	f.DurationVar(&o.BlockTime, "block-time", jobbench.DefaultBlockTime, "the devnet's block time (timeout_commit)")
	f.DurationVar(&o.Poll, "poll", jobbench.DefaultPoll, "how often provider agents and consumers look at the chain")
	f.IntVar(&o.Providers, "providers", jobbench.DefaultProviders, "provider agents")
	f.IntVar(&o.LatencyJobs, "latency-jobs", jobbench.DefaultLatency, "jobs run one at a time")
	f.IntVar(&o.WarmupJobs, "warmup-jobs", 0, "jobs run before the latency phase from every consumer at once (0 skips it; default 12 per provider for spot)")
	f.IntVar(&o.SustainedJobs, "sustained-jobs", jobbench.DefaultSustained, "jobs run in the sustained phase (0 skips it)")
	f.IntVar(&o.Concurrency, "concurrency", jobbench.DefaultConcurrency, "consumers submitting at once in the sustained phase")
	f.StringVar(&o.Verification, "verification", "spot", "the jobs' verification: none, spot or full")
	f.DurationVar(&o.JobTimeout, "job-timeout", jobbench.DefaultTimeout, "give up on (and cancel) a job after this long")
	f.BoolVar(&o.SerialSubmit, "serial-submit", false, "sustained phase: consumers take turns submitting, one submission per block (avoids the ledger placing twice jobs submitted in the same block)")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if o.SustainedJobs == 0 {
			o.SustainedJobs = -1 // skip the phase
		}
		if cmd.Flags().Changed("warmup-jobs") && o.WarmupJobs == 0 {
			o.WarmupJobs = -1
		}
		if o.SustainedJobs < -1 || o.LatencyJobs < 1 || o.Concurrency < 1 || o.Providers < 1 || o.BlockTime <= 0 || o.Poll <= 0 || o.JobTimeout <= 0 {
			return nil, usageError{fmt.Errorf("--latency-jobs, --concurrency, --providers, --block-time, --poll and --job-timeout must be positive, --sustained-jobs not negative")}
		}
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		if cmd.Flags().Changed("home") {
			o.Dir = e.home
		}
		o.Progress = progress
		return jobbench.Run(cmd.Context(), o)
	}
}
