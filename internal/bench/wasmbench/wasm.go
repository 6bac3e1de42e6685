// Package wasmbench is the wasm benchmark (`gpunet bench wasm`): it runs
// compute kernels natively and as WebAssembly in the same run, with the
// same arguments, and reports the ratios. First the mandelbrot example's Go
// kernel and its committed WASI module (examples.MandelbrotWASM, built by
// Go's own compiler for wasip1):
//
//   - native: kernel.Render, kernel.PGM and kernel.Checksum in this
//     process, what the module's main does apart from writing the file.
//   - executor: gpunet's wasm executor (internal/sandbox/wasm) on its
//     default engine (wasmtime where built in), as a provider runs jobs: a
//     child process per job, guest file system, deterministic clock,
//     memory cap, output collection. Timed is Result.Metered
//     (instantiation and _start); compilation happens once, before, and is
//     not timed.
//   - executor-wazero: the same executor on its wazero engine.
//   - wazero: the same module on a bare wazero runtime built here (same
//     compiler, a plain directory mount), without WithCloseOnContextDone,
//     as the executor's child process runs it.
//   - wazero+close: that runtime with WithCloseOnContextDone on, the cost
//     of in-guest cancellation checks, which the executor avoids by killing
//     its child instead.
//
// Then the LLVM-compiled guests the target is stated for: the C kernels
// under examples/ (mandelbrot's, SHA-256, a float32 matrix multiply), each
// built natively by clang here and timed as a process against its
// committed wasm32-wasi module in the executor on each engine, and on a
// bare wazero runtime.
//
// Last the I/O workload (iobench.go): examples/fileio, which reads many
// small input files and writes large outputs, natively and in the
// executor on each engine.
//
// Every variant's output is checked against the native one.
package wasmbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/examples/mandelbrot/kernel"
	"github.com/gpunet/gpunet/internal/bench/measure"
)

// Defaults of Options: the example program's default image.
const (
	DefaultWidth   = 640
	DefaultHeight  = 480
	DefaultMaxIter = 1000
	DefaultReps    = 5
)

// Target: the executor on its default engine at most this many times
// native, as the geometric mean over the C kernels, and each kernel at
// most KernelTarget times (issue 36; issue 18 asked 1.2 for the mean,
// DESIGN.md section 9 1.5, which wazero missed at about 2×). Stated for
// LLVM-compiled guests; the Go example is built by Go's compiler.
const (
	Target       = 1.1
	KernelTarget = 1.3
)

// Options tune a run. Zero fields take the defaults.
type Options struct {
	Width, Height, MaxIter int
	// Reps is the number of timed runs of each variant; the figures are
	// medians.
	Reps int
	// Module replaces the example's module (tests).
	Module []byte
	// CArgs replace the C kernels' default arguments, by kernel name
	// ("sha256", "matmul"); mandelbrot's are Width, Height and MaxIter.
	CArgs map[string][]string
	// IO sizes the I/O workload (examples/fileio); IO.Skip leaves it out.
	IO       IOOptions
	Progress io.Writer
}

// Validate gives zero fields their defaults and says which field is out of
// range, if one is.
func (o *Options) Validate() error {
	for _, f := range []struct {
		v *int
		d int
	}{{&o.Width, DefaultWidth}, {&o.Height, DefaultHeight}, {&o.MaxIter, DefaultMaxIter}, {&o.Reps, DefaultReps}} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	if o.Module == nil {
		o.Module = examples.MandelbrotWASM
	}
	if _, _, _, err := kernel.ParseArgs(o.args()); err != nil {
		return err
	}
	if o.Reps < 1 || o.Reps > 1000 {
		return fmt.Errorf("reps %d out of range [1, 1000]", o.Reps)
	}
	if !o.IO.Skip {
		return o.IO.validate()
	}
	return nil
}

// args are the mandelbrot programs' arguments: width, height, maxiter.
func (o *Options) args() []string {
	return []string{strconv.Itoa(o.Width), strconv.Itoa(o.Height), strconv.Itoa(o.MaxIter)}
}

// Variant is one way of running the Go-compiled kernel.
type Variant struct {
	Name  string  `json:"name"`
	P50Ms float64 `json:"p50_ms"`
	MinMs float64 `json:"min_ms"`
	MaxMs float64 `json:"max_ms"`
	// Ratio is P50Ms over native's P50Ms.
	Ratio float64 `json:"ratio"`
	// CompileMs is the one-off compilation before the timed runs.
	CompileMs float64 `json:"compile_ms,omitempty"`
	// WallP50Ms (executor only) is the whole Run: module read, compile
	// cache lookup, instantiation, run and output collection.
	WallP50Ms float64 `json:"wall_p50_ms,omitempty"`
}

// Result is the outcome of a run.
type Result struct {
	Date        time.Time `json:"date"`
	Kernel      string    `json:"kernel"`
	Args        []string  `json:"args"`
	Reps        int       `json:"reps"`
	GOMAXPROCS  int       `json:"gomaxprocs"`
	ModuleBytes int       `json:"module_bytes"`
	Checksum    string    `json:"checksum"` // of the image, the same for every variant
	Variants    []Variant `json:"variants"`
	Target      float64   `json:"target_ratio"`
	// KernelTarget bounds each C kernel's ratio (Kernel.MeetsTarget).
	KernelTarget float64 `json:"kernel_target_ratio"`
	// LLVM is the C kernels (mandelbrot's, SHA-256, a float32 matrix
	// multiply), when clang was there to build their native side: each
	// committed wasm32-wasi module in the executor against the same source
	// built natively by clang with the same flags. DESIGN.md's target is
	// stated for such guests.
	LLVM *LLVM `json:"llvm,omitempty"`
	// IO is the I/O workload (examples/fileio: many small inputs read,
	// large outputs written), natively and in the executor; absent when
	// Options.IO.Skip. Its target is IOTarget, apart from MeetsTarget.
	IO *IO `json:"io,omitempty"`
	// MeetsTarget is whether the executor's ratio is within Target: the
	// geometric mean of the C kernels' on the default engine, with each
	// kernel's within KernelTarget, when they were measured, else the Go
	// module's.
	MeetsTarget bool `json:"meets_target"`
	// Engine names the executor's default engine (wasm.Executor.Engine).
	Engine string `json:"engine"`
}

// LLVM is the C kernels, each measured natively and in the executor.
type LLVM struct {
	Clang   string   `json:"clang"`
	Flags   string   `json:"flags"` // of both builds (CFlags)
	Kernels []Kernel `json:"kernels,omitempty"`
	// GeoMeanRatio is the geometric mean of the kernels' ratios on the
	// executor's default engine; EngineGeoMeans the same for each engine.
	GeoMeanRatio   float64            `json:"geomean_ratio,omitempty"`
	EngineGeoMeans map[string]float64 `json:"engine_geomean_ratios,omitempty"`
	Skipped        string             `json:"skipped,omitempty"` // why they were not measured
}

// Kernel is one C kernel: its native build (a process) against its
// committed wasm32-wasi module in the executor (Result.Metered), the figure
// the target is about, and on a bare wazero runtime.
type Kernel struct {
	Name          string   `json:"name"`
	Args          []string `json:"args"`
	NativeP50Ms   float64  `json:"native_p50_ms"`
	ExecutorP50Ms float64  `json:"executor_p50_ms"`
	Ratio         float64  `json:"ratio"`
	// MeetsTarget is whether this kernel's Ratio is within KernelTarget.
	MeetsTarget bool `json:"meets_target"`
	// BareP50Ms is the module on a bare wazero runtime in this process
	// (no WithCloseOnContextDone, like the executor's child), timed from
	// instantiation to _start's end; BareRatio is it over NativeP50Ms. It
	// tells the guest's generated code from the executor's costs.
	BareP50Ms     float64 `json:"bare_wazero_p50_ms"`
	BareRatio     float64 `json:"bare_wazero_ratio"`
	BareCompileMs float64 `json:"bare_wazero_compile_ms"`
	ModuleBytes   int     `json:"module_bytes"`
	// Engines is the executor on each engine built in, the default first
	// (whose figures are also ExecutorP50Ms and Ratio).
	Engines []KernelEngine `json:"engines"`
	// OutputSHA256 is of the program's output file, the same natively and
	// in wasm (checked on every run).
	OutputSHA256 string `json:"output_sha256"`
}

// KernelEngine is a C kernel in the executor on one engine.
type KernelEngine struct {
	Engine string  `json:"engine"`
	P50Ms  float64 `json:"p50_ms"`
	Ratio  float64 `json:"ratio"`
}

// Run measures the variants, interleaved rep by rep so that a change in
// the machine's load hits them alike: the Go module first, then the C
// kernels (skipped, saying why in Result.LLVM.Skipped, without clang).
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := measure.Progress(o.Progress)
	dir, err := os.MkdirTemp("", "gpunet-bench-wasm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	execs, err := newExecutors(dir)
	if err != nil {
		return nil, err
	}
	defer execs.close()
	res := &Result{
		Date: time.Now().UTC().Truncate(time.Second), Kernel: "mandelbrot", Args: o.args(), Reps: o.Reps,
		GOMAXPROCS: runtime.GOMAXPROCS(0), ModuleBytes: len(o.Module), Target: Target, KernelTarget: KernelTarget,
		Checksum: kernel.Checksum(kernel.PGM(o.Width, o.Height, kernel.Render(kernel.Whole, o.Width, o.Height, o.MaxIter))),
		Engine:   execs[0].x.Engine(),
	}
	if res.Variants, err = runGoModule(ctx, dir, execs, o, res.Checksum, progress); err != nil {
		return nil, err
	}
	res.MeetsTarget = res.Variants[1].Ratio <= Target // the default engine's
	progress("the C kernels (clang), native and wasm…")
	if res.LLVM, err = runCKernels(ctx, dir, execs, o, res.Checksum, progress); err != nil {
		return nil, err
	}
	if res.LLVM.Skipped == "" {
		res.MeetsTarget = res.LLVM.GeoMeanRatio <= Target
		for _, k := range res.LLVM.Kernels {
			res.MeetsTarget = res.MeetsTarget && k.MeetsTarget
		}
	}
	if !o.IO.Skip {
		progress("the I/O workload (%d inputs, %d MiB written in %d files), native and wasm…", o.IO.Inputs, o.IO.MiB, o.IO.Files)
		if res.IO, err = runIO(ctx, filepath.Join(dir, "io"), execs, o, progress); err != nil {
			return nil, err
		}
	}
	return res, nil
}
