package wasmbench

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/examples/mandelbrot/kernel"
	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/sandbox"
)

// CFlags are the optimization flags of both builds of the C kernels:
// clang's, natively here and for wasm32-wasi by examples/c-build.sh (which
// adds -msimd128, the counterpart of x86-64's SSE2 baseline). No fused
// multiply-add, so float results are the same bytes on both.
var CFlags = []string{"-O2", "-ffp-contract=off"}

// cKernel is one of the C example programs the benchmark runs natively and
// in the executor.
type cKernel struct {
	name           string
	source, module []byte
	args           []string // defaults; nil: the mandelbrot image's
	output         string   // the file the program writes under /out
}

var cKernels = []cKernel{
	{"mandelbrot", examples.MandelbrotCSource, examples.MandelbrotCWASM, nil, "mandelbrot.pgm"},
	{"sha256", examples.SHA256CSource, examples.SHA256CWASM, []string{"8", "4"}, "sha256.txt"},
	{"matmul", examples.MatmulCSource, examples.MatmulCWASM, []string{"512", "8"}, "matmul.bin"},
}

// kernelArgs are k's arguments in a run with o: mandelbrot's image, or
// o.CArgs's, or k's defaults.
func (o *Options) kernelArgs(k cKernel) []string {
	if k.name == "mandelbrot" {
		return o.args()
	}
	if a, ok := o.CArgs[k.name]; ok {
		return a
	}
	return k.args
}

// runCKernels builds each C kernel natively with clang and times it
// against its committed wasm32-wasi build in the executor on each engine
// and on bare wazero, interleaved rep by rep, each run's output checked
// against the native one (and mandelbrot's against the Go kernel's image,
// mandelSum, too). Without clang, or when clang fails, it returns the
// reason in LLVM.Skipped.
func runCKernels(ctx context.Context, dir string, execs executors, o Options, mandelSum string, progress func(string, ...any)) (*LLVM, error) {
	out := &LLVM{Flags: strings.Join(CFlags, " ")}
	clang, err := exec.LookPath("clang")
	if err != nil {
		out.Skipped = "no clang to build the native side (apt-get install clang)"
		return out, nil
	}
	v, _ := exec.CommandContext(ctx, clang, "--version").Output()
	out.Clang = strings.TrimSpace(strings.SplitN(string(v), "\n", 2)[0])
	var runs []*cRun
	defer func() {
		for _, r := range runs {
			r.close()
		}
	}()
	for _, k := range cKernels {
		r, err := newCRun(ctx, filepath.Join(dir, "c-"+k.name), k, o.kernelArgs(k), mandelSum, len(execs))
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
		if skipped, err := r.build(ctx, clang); skipped != "" || err != nil {
			out.Skipped = skipped
			return out, err
		}
		// Once each, untimed: the executor compiles the module, and the
		// outputs are compared.
		if err := r.rep(ctx, execs, false); err != nil {
			return nil, err
		}
	}
	for rep := range o.Reps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		progress("C kernels, rep %d/%d", rep+1, o.Reps)
		for _, r := range runs {
			if err := r.rep(ctx, execs, true); err != nil {
				return nil, err
			}
		}
	}
	summarize(out, runs, execs)
	return out, nil
}

// cRun is one C kernel set up to run natively, in the executor and on a
// bare wazero runtime, with its samples.
type cRun struct {
	k         cKernel
	args      []string
	dir       string // its files: source, native binary, module, outputs
	bin       string // the native build
	job       *sandbox.Job
	bare      *bareWazero
	mandelSum string // the Go kernel's image's checksum
	res       *Kernel

	native, bareT []time.Duration
	wasmT         [][]time.Duration // per engine
}

// newCRun writes k's source and module under dir and compiles the module
// on a bare wazero runtime.
func newCRun(ctx context.Context, dir string, k cKernel, args []string, mandelSum string, engines int) (*cRun, error) {
	r := &cRun{
		k: k, args: args, dir: dir, bin: filepath.Join(dir, k.name), mandelSum: mandelSum,
		res:   &Kernel{Name: k.name, Args: args, ModuleBytes: len(k.module)},
		wasmT: make([][]time.Duration, engines),
	}
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		return nil, err
	}
	mod := filepath.Join(dir, k.name+".wasm")
	if err := os.WriteFile(r.bin+".c", k.source, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(mod, k.module, 0o644); err != nil {
		return nil, err
	}
	r.job = benchJob("bench-wasm-c-"+k.name, mod, args, filepath.Join(dir, "work"))
	bare, err := newBareWazero(ctx, k.module, false)
	if err != nil {
		return nil, err
	}
	r.bare = bare
	r.res.BareCompileMs = measure.ExactMs(bare.compile)
	return r, nil
}

func (r *cRun) close() { r.bare.close() }

// build compiles the native side with clang and CFlags; skipped says why
// clang failed, if it did.
func (r *cRun) build(ctx context.Context, clang string) (skipped string, err error) {
	cmd := exec.CommandContext(ctx, clang, append(append([]string{}, CFlags...), "-o", r.bin, r.bin+".c")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return fmt.Sprintf("clang failed on %s: %v: %s", r.k.name, err, b), nil
	}
	return "", nil
}

// rep runs the kernel natively, in the executor on each engine and on
// bare wazero, checking each output, and keeps the times if timed.
func (r *cRun) rep(ctx context.Context, execs executors, timed bool) error {
	d, err := r.runNative(ctx)
	if err != nil {
		return err
	}
	if timed {
		r.native = append(r.native, d)
	}
	for i, e := range execs {
		got, metered, _, _, err := runJob(ctx, e.x, r.job, r.k.output, r.k.name+" module failed")
		if err != nil {
			return err
		}
		if err := r.check("wasm module", got); err != nil {
			return err
		}
		if timed {
			r.wasmT[i] = append(r.wasmT[i], metered)
		}
	}
	d, got, err := r.bare.runOutput(ctx, filepath.Join(r.dir, "bare"), r.args, r.k.output)
	if err != nil {
		return fmt.Errorf("%s on bare wazero: %w", r.k.name, err)
	}
	if err := r.check("bare wazero", got); err != nil {
		return err
	}
	if timed {
		r.bareT = append(r.bareT, d)
	}
	return nil
}

// runNative runs the native build as a process, timed until it exits, and
// checks its output.
func (r *cRun) runNative(ctx context.Context) (time.Duration, error) {
	file := filepath.Join(r.dir, "native-"+r.k.output)
	t0 := time.Now()
	if b, err := exec.CommandContext(ctx, r.bin, append([]string{"-out", file}, r.args...)...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%s native: %v: %s", r.k.name, err, b)
	}
	d := time.Since(t0)
	got, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	return d, r.check("native build", got)
}

// check compares an output with the first one, the native build's (and
// mandelbrot's with the Go kernel's image).
func (r *cRun) check(who string, got []byte) error {
	sum := kernel.Checksum(got)
	if r.res.OutputSHA256 == "" {
		r.res.OutputSHA256 = sum
	}
	if sum != r.res.OutputSHA256 {
		return fmt.Errorf("%s: %s's %s has sha256 %s, native's %s", r.k.name, who, r.k.output, sum, r.res.OutputSHA256)
	}
	if r.k.name == "mandelbrot" && sum != r.mandelSum {
		return fmt.Errorf("mandelbrot: %s's image has sha256 %s, the Go kernel's %s", who, sum, r.mandelSum)
	}
	return nil
}

// summarize puts each kernel's medians and ratios into out, with the
// geometric mean of the ratios on each engine.
func summarize(out *LLVM, runs []*cRun, execs executors) {
	logSums := make([]float64, len(execs))
	for _, p := range runs {
		n := measure.Percentile(p.native, 50)
		r := p.res
		r.NativeP50Ms = measure.ExactMs(n)
		for i, e := range execs {
			w := measure.Percentile(p.wasmT[i], 50)
			ratio := float64(w) / float64(n)
			r.Engines = append(r.Engines, KernelEngine{Engine: e.name, P50Ms: measure.ExactMs(w), Ratio: ratio})
			logSums[i] += math.Log(ratio)
		}
		r.ExecutorP50Ms, r.Ratio = r.Engines[0].P50Ms, r.Engines[0].Ratio
		r.BareP50Ms = measure.ExactMs(measure.Percentile(p.bareT, 50))
		r.BareRatio = r.BareP50Ms / r.NativeP50Ms
		r.MeetsTarget = r.Ratio <= KernelTarget
		out.Kernels = append(out.Kernels, *r)
	}
	out.EngineGeoMeans = map[string]float64{}
	for i, e := range execs {
		out.EngineGeoMeans[e.name] = math.Exp(logSums[i] / float64(len(runs)))
	}
	out.GeoMeanRatio = out.EngineGeoMeans[execs[0].name]
}
