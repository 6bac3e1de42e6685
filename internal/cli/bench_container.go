package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/containerbench"
)

// containerBenchmark is `gpunet bench container`.
var containerBenchmark = benchmark{
	name:  "container",
	short: "Measure container start to first instruction (cached rootfs) and image pull+unpack throughput",
	long: `Measure the oci executor as a provider runs it (needs runc), against a
registry served in this process on 127.0.0.1:

  start  --reps runs of a job whose image is the probe program (a static
         executable of a few hundred bytes that writes one line), its rootfs
         cached: from Executor.Run to the program's first output (runtime
         spec, overlay, runc's namespaces, cgroups and seccomp, exec). The
         whole Run (teardown, output collection) is printed too.
  pull   --pull-reps pulls of an image of --pull-layers layers holding
         --pull-mib MiB of files (gzip about halves them) into an empty
         cache: download, digest checks, gunzip, untar. Throughput is per
         second of the whole pull, of the bytes downloaded and unpacked.

The target: start to first instruction <= 300 ms (median). State and caches
go to a temporary directory, or under --home when given.`,
	bind: bindContainerBench,
}

func bindContainerBench(f *pflag.FlagSet) benchRun {
	var o containerbench.Options
	f.IntVar(&o.Reps, "reps", containerbench.DefaultReps, "timed container starts")
	f.IntVar(&o.PullMiB, "pull-mib", containerbench.DefaultPullMiB, "size of the pulled image's files, MiB")
	f.IntVar(&o.PullLayers, "pull-layers", containerbench.DefaultPullLayers, "layers of the pulled image")
	f.IntVar(&o.PullReps, "pull-reps", containerbench.DefaultPullReps, "timed pulls, each into an empty cache")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if o.Reps < 1 || o.PullMiB < 1 || o.PullLayers < 1 || o.PullReps < 1 || o.PullLayers > o.PullMiB {
			return nil, usageError{fmt.Errorf("--reps, --pull-mib, --pull-layers and --pull-reps must be positive, --pull-layers at most --pull-mib")}
		}
		if cmd.Flags().Changed("home") {
			dir, err := os.MkdirTemp(e.home, "bench-container-")
			if err != nil {
				return nil, err
			}
			o.Dir = dir
		}
		o.Progress = progress
		return containerbench.Run(cmd.Context(), o)
	}
}
