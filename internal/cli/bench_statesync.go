package cli

import (
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/syncbench"
)

// stateSyncBenchmark is `gpunet bench statesync`.
var stateSyncBenchmark = benchmark{
	name:  "statesync",
	short: "Measure a node joining by state sync on the 100k-provider, 1M-job state, against replaying the chain",
	long: `Measure state sync against replay on a large state.

Replay (the baseline, in the same run): the API benchmark's state
(--providers providers, --jobs jobs through their lives) is built block by
block through the ledger into a fresh app's store; that time, plus one
timed ed25519 verification times the chain's txs (the builder does not
verify signatures), is the replay estimate, a lower bound (CometBFT's block
store and fetching blocks from peers are not counted).

State sync: the app on that state commits one more block with a snapshot
interval that falls on it, so the node's own code writes the snapshot in
the background; a fresh app is offered it with the source's app hash as the
trusted one and restores it chunk by chunk through the ABCI calls CometBFT
makes (the last chunk checks the app hash and the ledger's invariants). It
prints each phase's time, the snapshot's size and the ratio of replay to
restore.`,
	bind: bindStateSyncBench,
}

func bindStateSyncBench(f *pflag.FlagSet) benchRun {
	var o syncbench.Options
	f.IntVar(&o.Providers, "providers", syncbench.DefaultProviders, "providers in the state")
	f.IntVar(&o.Jobs, "jobs", syncbench.DefaultJobs, "jobs in the state")
	f.IntVar(&o.Consumers, "consumers", syncbench.DefaultConsumers, "accounts owning the jobs")
	f.Uint64Var(&o.Seed, "seed", syncbench.DefaultSeed, "seed of the market")
	f.IntVar(&o.ChunkBytes, "chunk-bytes", 0, "snapshot chunk size in bytes (default: the node's, 8 MiB)")
	f.StringVar(&o.Home, "home", "", "keep the stores under this directory (default: a temp dir, removed)")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		return syncbench.Run(cmd.Context(), o)
	}
}
