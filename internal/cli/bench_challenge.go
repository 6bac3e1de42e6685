package cli

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/challengebench"
)

// challengeBenchmark is `gpunet bench challenge`.
var challengeBenchmark = benchmark{
	name:  "challenge",
	short: "Hardware challenges under load: honest providers on busy machines are never slashed, overclaimers are caught",
	long: `Measure how hardware challenges (docs/challenge.md) treat honest providers
on busy machines and providers that claim more than they have.

Load: the CPU prover, with the agent's workers (every core but one),
proves a challenge sized for this machine's own measured figure
(--target-ms of compute at that claim), --reps times idle and beside a
background load of L busy processes per core for each L of --loads. Each
proof's time over the plan's compute time is that load's slowdown.

Rulings: --hours simulated hours through the real ledger with the default
parameters, time scaled down a thousandfold, real proofs and openings.
--per-group honest providers per load each prove as slowly as a slowdown
measured at their load; as many overclaimers per factor of --overclaims do
1/k of their claim on an idle machine. Prints each group's rulings, honest
slashes (target 0), how many overclaimers count at no more than their real
rate after their first ruling (target >= 99%), and the proving time an
hour at the real scale (target <= 60 s for an idle honest provider).`,
	bind: bindChallengeBench,
}

func bindChallengeBench(f *pflag.FlagSet) benchRun {
	o := challengebench.Options{Loads: challengebench.DefaultLoads, Overclaims: challengebench.DefaultOverclaims}
	f.IntSliceVar(&o.Loads, "loads", o.Loads, "background loads to measure, in busy processes per core")
	f.IntSliceVar(&o.Overclaims, "overclaims", o.Overclaims, "overclaim factors to simulate")
	f.Uint64Var(&o.Target, "target-ms", challengebench.DefaultTargetMillis, "compute time of the measured proofs at this machine's figure")
	f.IntVar(&o.Reps, "reps", challengebench.DefaultReps, "proofs per load")
	f.IntVar(&o.Hours, "hours", challengebench.DefaultHours, "simulated hours")
	f.IntVar(&o.PerGroup, "per-group", challengebench.DefaultPerGroup, "simulated providers per group")
	f.Uint64Var(&o.Seed, "seed", challengebench.DefaultSeed, "seed of the simulation")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		return challengebench.Run(cmd.Context(), o)
	}
}
