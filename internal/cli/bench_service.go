package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/servicebench"
	"github.com/gpunet/gpunet/internal/devnet"
)

// serviceBenchmark is `gpunet bench service`.
var serviceBenchmark = benchmark{
	name:  "service",
	short: "Measure a service's first answer through another node, its failover and route-around, step by step (needs runc)",
	long: `Measure a service's first answer on a network of this binary's processes
(or --bin's): two nodes (--block-time), two providers whose agents talk to
node1 only, and an owner who deploys through node0 and asks node0, so every
answer crosses both nodes. The example image (examples/tinylm, built from
the repository --repo) is in both providers' caches before anything is
timed (a warm-up service of two replicas).

Each of --reps runs:
  deploy       gpunet service deploy (one replica) → the first 200 of
               GET /svc/ID/8000/health at node0, asked every --poll.
  failover     the replica's provider killed (SIGKILL) → the first 200 from
               its replacement: the ledger ends it when both nodes'
               validators report it unreachable (report_replica_down), or
               after --heartbeat-timeout, and places it on the other
               provider.
  route-around a service of two replicas, one's provider killed → the
               first 200 after, and how many requests failed meanwhile.

Steps are timed from the providers' logs and node0's view of the record:
placement (the deploy committed), the agent noticing it, image and container
start, readiness, the heartbeat reaching a block node0 has, the first
proxied answer. Target (issue 36): deploy and failover <= 3 s.`,
	bind: bindServiceBench,
}

func bindServiceBench(f *pflag.FlagSet) benchRun {
	var o servicebench.Options
	f.StringVar(&o.Bin, "bin", "", "the gpunet binary the nodes and providers run (default: this one)")
	f.StringVar(&o.Repo, "repo", "", "the repository the example image is built from (default: the one holding the working directory)")
	f.DurationVar(&o.BlockTime, "block-time", servicebench.DefaultBlockTime, "the network's block time")
	f.IntVar(&o.Reps, "reps", servicebench.DefaultReps, "runs of each path")
	f.Uint64Var(&o.HeartbeatInterval, "heartbeat-interval", servicebench.DefaultHeartbeatInterval, "params.service_heartbeat_interval, seconds")
	f.Uint64Var(&o.HeartbeatTimeout, "heartbeat-timeout", servicebench.DefaultHeartbeatTimeout, "params.service_heartbeat_timeout, seconds (at least 2, more than the interval)")
	f.DurationVar(&o.ReadyInterval, "ready-interval", servicebench.DefaultReadyInterval, "the spec's readiness interval")
	f.DurationVar(&o.Poll, "poll", servicebench.DefaultPoll, "how often the client asks the service while it waits")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if o.Reps < 1 || o.BlockTime <= 0 || o.Poll <= 0 || o.ReadyInterval < 0 || o.HeartbeatTimeout <= o.HeartbeatInterval || o.HeartbeatTimeout < 2 {
			return nil, usageError{fmt.Errorf("--reps, --block-time and --poll must be positive, --heartbeat-timeout at least 2 and more than --heartbeat-interval")}
		}
		if o.Bin == "" {
			exe, err := os.Executable()
			if err != nil {
				return nil, err
			}
			o.Bin = exe
		}
		if o.Repo == "" {
			repo, err := devnet.FindRepo(".")
			if err != nil {
				return nil, usageError{fmt.Errorf("%w (or give --repo)", err)}
			}
			o.Repo = repo
		}
		if cmd.Flags().Changed("home") {
			dir, err := os.MkdirTemp(e.home, "bench-service-")
			if err != nil {
				return nil, err
			}
			o.Dir = dir
		}
		o.Progress = progress
		return servicebench.Run(cmd.Context(), o)
	}
}
