package cli

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/verifybench"
)

// verifyBenchmark is `gpunet bench verify`.
var verifyBenchmark = benchmark{
	name:  "verify",
	short: "Simulate Proof of Sync over many jobs through the real ledger: verification overhead, how fast cheaters are caught",
	long: `Run a chain of --providers CPU providers through the real ledger code and
submit --jobs deterministic spot jobs, --block-jobs a block. Scripted parties
do what agents do: owners grant keys, providers start, commit and reveal.
--cheaters providers falsify a --cheat-rate share of their results, undercut
honest prices and run more jobs at once.

Reported: extra compute spent on verification (audit and escalation
replicas over the replicas owners asked for; target <= 10%), how soon each
cheater is first outvoted and slashed (target: caught within 1,313 of its
jobs with probability >= 99%, next to the analytic bound), wrong results
delivered, honest providers slashed (must be 0), and one hardware challenge
proved on this CPU and verified as a validator does (target: verification
<= 1/1000 of the proof).`,
	bind: bindVerifyBench,
}

func bindVerifyBench(f *pflag.FlagSet) benchRun {
	var o verifybench.Options
	f.IntVar(&o.Providers, "providers", verifybench.DefaultProviders, "providers")
	f.IntVar(&o.Jobs, "jobs", verifybench.DefaultJobs, "spot jobs submitted")
	f.IntVar(&o.BlockJobs, "block-jobs", verifybench.DefaultBlockJobs, "jobs submitted per block")
	f.IntVar(&o.Cheaters, "cheaters", verifybench.DefaultCheaters, "cheating providers")
	f.Float64Var(&o.CheatRate, "cheat-rate", verifybench.DefaultCheatRate, "share of its results a cheater falsifies")
	f.Uint64Var(&o.CheaterSlots, "cheater-slots", verifybench.DefaultCheaterSlots, "jobs a cheater runs at once (honest providers: 4)")
	f.Uint64Var(&o.Seed, "seed", verifybench.DefaultSeed, "seed of the market")
	f.Uint64Var(&o.ChallengeGOPS, "challenge-gops", 0, "claim the measured hardware challenge is sized for (default: what this machine measures)")
	f.Uint64Var(&o.ChallengeMillis, "challenge-ms", verifybench.DefaultChallengeMillis, "compute time of that challenge at the claim")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		return verifybench.Run(cmd.Context(), o)
	}
}
