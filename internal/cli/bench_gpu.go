package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/gpubench"
)

// gpuBenchmark is `gpunet bench gpu`.
var gpuBenchmark = benchmark{
	name:  "gpu",
	short: "Measure each NVIDIA GPU's int8 kernels and prove a hardware challenge on it",
	long: `Measure every NVIDIA GPU of this machine as a provider's agent does, then
prove hardware challenges on it.

For each GPU: each int8 GEMM kernel it runs (dp4a; mma.sync tensor-core
kernels from compute capability 8.0) is checked against the CPU on a small
product, then timed; the table shows TOPS against the datasheet's dense int8
peak. Then a challenge sized for the fastest kernel's figure is proved on
the GPU as the agent would (AES expansion, GEMM and Merkle hashing on the
device), opened and verified as validators do, with its time, the deadline,
and the device time challenges take an hour at the ledger's maximum rate.
With --overclaim F, a challenge sized for F times the figure shows that an
overclaiming GPU misses its deadline.

Needs the NVIDIA driver (libcuda.so.1), no CUDA toolkit.`,
	bind: bindGPUBench,
}

func bindGPUBench(f *pflag.FlagSet) benchRun {
	var o gpubench.Options
	f.DurationVar(&o.Budget, "budget", gpubench.DefaultBudget, "benchmark time per GPU")
	f.Float64Var(&o.Overclaim, "overclaim", gpubench.DefaultOverclaim, "also prove a challenge sized for this many times the measured figure (0: skip)")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if o.Budget <= 0 {
			return nil, usageError{fmt.Errorf("--budget %v: must be positive", o.Budget)}
		}
		o.Progress = progress
		return gpubench.Run(cmd.Context(), o)
	}
}
