package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/wasmbench"
)

// wasmBenchmark is `gpunet bench wasm`.
var wasmBenchmark = benchmark{
	name:  "wasm",
	short: "Compare compute kernels run natively and as WebAssembly, in the same run",
	long: `Run compute kernels natively and as WebAssembly, with the same arguments,
--reps times each, interleaved, and print the medians and their ratios to
native.

First the mandelbrot example's Go kernel and its committed WASI module
(built by Go's compiler):

  native        kernel.Render (+ PGM encoding and checksum) in this process
  executor      gpunet's wasm executor on its default engine, wasmtime, as
                providers run jobs (a child process per job, its compile
                cache warm; Result.Metered is timed: instantiation and run)
  executor-wazero
                the same executor on its wazero engine
  wazero        a bare wazero runtime, same compiler, without
                WithCloseOnContextDone, as the executor's child runs it
  wazero+close  the same runtime with WithCloseOnContextDone: the cost of
                in-guest cancellation checks, which the executor avoids by
                killing its child instead

Then the LLVM-compiled guests the target is stated for: the C kernels under
examples/ (mandelbrot, SHA-256, float32 matmul), each built natively by
clang and timed as a process against its committed wasm32-wasi module in the
executor on each engine (the table shows wasmtime; --output json has each)
and on bare wazero.

Last the I/O workload, examples/fileio in C: it reads --io-inputs files of
--io-input-kib KiB and writes --io-mib MiB in --io-files files, --io-record
bytes a write, natively (a process) and in the executor on each engine
(metered, and the whole Run with output collection). Its disk use is at
most the inputs plus twice --io-mib, removed after each run; --io-mib 0
leaves it out.

Compilation happens once per runtime before the timed runs and is printed
apart. Every variant's output is checked against the native one. The
targets (issue 36): the geometric mean over the C kernels in the executor
on wasmtime <= 1.1× native with each kernel <= 1.3×, and the I/O workload
metered <= 1.5× native.`,
	bind: bindWasmBench,
}

func bindWasmBench(f *pflag.FlagSet) benchRun {
	var o wasmbench.Options
	f.IntVar(&o.Width, "width", wasmbench.DefaultWidth, "image width")
	f.IntVar(&o.Height, "height", wasmbench.DefaultHeight, "image height")
	f.IntVar(&o.MaxIter, "maxiter", wasmbench.DefaultMaxIter, "iterations per pixel at most")
	f.IntVar(&o.Reps, "reps", wasmbench.DefaultReps, "timed runs of each variant")
	f.IntVar(&o.IO.Inputs, "io-inputs", wasmbench.DefaultIOInputs, "I/O workload: input files read")
	f.IntVar(&o.IO.InputKiB, "io-input-kib", wasmbench.DefaultIOInputKiB, "I/O workload: size of each input file, KiB")
	f.IntVar(&o.IO.MiB, "io-mib", wasmbench.DefaultIOMiB, "I/O workload: MiB written in all (0: leave the workload out)")
	f.IntVar(&o.IO.Files, "io-files", wasmbench.DefaultIOFiles, "I/O workload: files the output is split over")
	f.IntVar(&o.IO.Record, "io-record", wasmbench.DefaultIORecord, "I/O workload: bytes a write")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		// Zero would mean "the default" to the library; here it is a
		// mistake.
		if o.Width < 1 || o.Height < 1 || o.MaxIter < 1 || o.Reps < 1 {
			return nil, usageError{fmt.Errorf("--width, --height, --maxiter and --reps must be positive")}
		}
		o.IO.Skip = o.IO.MiB == 0
		if !o.IO.Skip && (o.IO.Inputs < 1 || o.IO.InputKiB < 1 || o.IO.MiB < 0 || o.IO.Files < 1 || o.IO.Record < 1) {
			return nil, usageError{fmt.Errorf("--io-inputs, --io-input-kib, --io-files and --io-record must be positive, --io-mib 0 or more")}
		}
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		return wasmbench.Run(cmd.Context(), o)
	}
}
