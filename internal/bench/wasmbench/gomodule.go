package wasmbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpunet/gpunet/examples/mandelbrot/kernel"
	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// engineExec is the wasm executor on one engine.
type engineExec struct {
	name string // wasm.EngineWasmtime or wasm.EngineWazero
	x    *wasm.Executor
}

// executors are the executor on each engine built in, the default first.
type executors []engineExec

// newExecutors opens the executor on each engine built in, the default
// first, each with a fresh compilation cache under dir.
func newExecutors(dir string) (executors, error) {
	names := []string{wasm.DefaultEngine}
	for _, n := range wasm.Engines() {
		if n != wasm.DefaultEngine {
			names = append(names, n)
		}
	}
	var execs executors
	for _, n := range names {
		x, err := wasm.New(filepath.Join(dir, "cache-"+n), wasm.WithEngine(n))
		if err != nil {
			execs.close()
			return nil, err
		}
		execs = append(execs, engineExec{n, x})
	}
	return execs, nil
}

func (es executors) close() {
	for _, e := range es {
		e.x.Close()
	}
}

// benchJob is a job of the benchmark as a provider's agent would run it:
// its /out collected, deterministic, ten minutes and 1 GiB at most.
func benchJob(id, module string, args []string, workDir string) *sandbox.Job {
	return &sandbox.Job{
		ID: id, Module: module, Args: args, WorkDir: workDir, Outputs: []string{"/out"},
		Limits: sandbox.Limits{Timeout: 10 * time.Minute, MemoryBytes: 1 << 30}, Deterministic: true,
	}
}

// runJob runs job on x and returns the file it wrote as /out/output, with
// the run's metered time, whole time and compilation time. A failed run's
// error is failed followed by the reason.
func runJob(ctx context.Context, x *wasm.Executor, job *sandbox.Job, output, failed string) (out []byte, metered, wall, compile time.Duration, err error) {
	t0 := time.Now()
	r, err := x.Run(ctx, job, io.Discard)
	wall = time.Since(t0)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	defer os.RemoveAll(r.OutputDir)
	if r.Failed {
		return nil, 0, 0, 0, fmt.Errorf("%s: %s", failed, r.Reason)
	}
	out, err = os.ReadFile(filepath.Join(r.OutputDir, "out", output))
	if err != nil {
		return nil, 0, 0, 0, err
	}
	return out, r.Metered, wall, r.CompileTime, nil
}

// goModule is the Go-compiled mandelbrot module measured against the Go
// kernel in this process: in the executor on each engine and on two bare
// wazero runtimes, with each variant's samples.
type goModule struct {
	o             Options
	checksum      string // of the native image
	job           *sandbox.Job
	execs         executors
	bare, closing *bareWazero
	bareRoot      string

	native, execWall, bareT, closeT []time.Duration
	exec                            [][]time.Duration // metered, per engine
	compile                         []time.Duration   // per engine
}

// runGoModule measures the Go-compiled module's variants: native,
// executor (the default engine), executor-<engine> for the others, wazero
// and wazero+close, in that order.
func runGoModule(ctx context.Context, dir string, execs executors, o Options, checksum string, progress func(string, ...any)) ([]Variant, error) {
	g, err := newGoModule(ctx, dir, execs, o, checksum)
	if err != nil {
		return nil, err
	}
	defer g.bare.close()
	defer g.closing.close()
	progress("compiling and checking each variant…")
	if err := g.warmUp(ctx); err != nil {
		return nil, err
	}
	for rep := range o.Reps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		progress("rep %d/%d", rep+1, o.Reps)
		if err := g.rep(ctx); err != nil {
			return nil, err
		}
	}
	return g.variants(), nil
}

// newGoModule writes the module and a work directory under dir and
// compiles it on the two bare runtimes.
func newGoModule(ctx context.Context, dir string, execs executors, o Options, checksum string) (*goModule, error) {
	modPath := filepath.Join(dir, "mandelbrot.wasm")
	if err := os.WriteFile(modPath, o.Module, 0o644); err != nil {
		return nil, err
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return nil, err
	}
	g := &goModule{
		o: o, checksum: checksum, execs: execs, bareRoot: filepath.Join(dir, "bare"),
		job:     benchJob("bench-wasm", modPath, o.args(), work),
		exec:    make([][]time.Duration, len(execs)),
		compile: make([]time.Duration, len(execs)),
	}
	var err error
	if g.bare, err = newBareWazero(ctx, o.Module, false); err != nil {
		return nil, err
	}
	if g.closing, err = newBareWazero(ctx, o.Module, true); err != nil {
		g.bare.close()
		return nil, err
	}
	return g, nil
}

// runExecutor runs the module on e and checks its image.
func (g *goModule) runExecutor(ctx context.Context, e engineExec) (metered, wall, compile time.Duration, err error) {
	img, metered, wall, compile, err := runJob(ctx, e.x, g.job, "mandelbrot.pgm", "executor run failed")
	if err != nil {
		return 0, 0, 0, err
	}
	if sum := kernel.Checksum(img); sum != g.checksum {
		return 0, 0, 0, fmt.Errorf("executor's image has checksum %s, native's %s", sum, g.checksum)
	}
	return metered, wall, compile, nil
}

// warmUp runs each variant once, untimed: each executor compiles the
// module (its compilation time kept apart) and every image is checked.
func (g *goModule) warmUp(ctx context.Context) error {
	for i, e := range g.execs {
		_, _, compile, err := g.runExecutor(ctx, e)
		if err != nil {
			return err
		}
		g.compile[i] = compile
	}
	for _, b := range []*bareWazero{g.bare, g.closing} {
		if _, err := b.run(ctx, g.bareRoot, g.o.args(), g.checksum); err != nil {
			return err
		}
	}
	return nil
}

// rep times each variant once, in turn.
func (g *goModule) rep(ctx context.Context) error {
	o := g.o
	t0 := time.Now()
	img := kernel.PGM(o.Width, o.Height, kernel.Render(kernel.Whole, o.Width, o.Height, o.MaxIter))
	sum := kernel.Checksum(img)
	g.native = append(g.native, time.Since(t0))
	if sum != g.checksum {
		return errors.New("native render is not reproducible")
	}
	for i, e := range g.execs {
		m, w, _, err := g.runExecutor(ctx, e)
		if err != nil {
			return err
		}
		g.exec[i] = append(g.exec[i], m)
		if i == 0 {
			g.execWall = append(g.execWall, w)
		}
	}
	d, err := g.bare.run(ctx, g.bareRoot, o.args(), g.checksum)
	if err != nil {
		return err
	}
	g.bareT = append(g.bareT, d)
	if d, err = g.closing.run(ctx, g.bareRoot, o.args(), g.checksum); err != nil {
		return err
	}
	g.closeT = append(g.closeT, d)
	return nil
}

// variants summarizes the samples: medians, extremes and ratios to native.
func (g *goModule) variants() []Variant {
	nativeP50 := measure.Percentile(g.native, 50)
	variant := func(name string, ds []time.Duration) Variant {
		p50 := measure.Percentile(ds, 50) // sorts ds
		return Variant{Name: name, P50Ms: measure.ExactMs(p50), MinMs: measure.ExactMs(ds[0]), MaxMs: measure.ExactMs(ds[len(ds)-1]), Ratio: float64(p50) / float64(nativeP50)}
	}
	vs := []Variant{variant("native", g.native)}
	for i, e := range g.execs {
		name := "executor"
		if i > 0 {
			name += "-" + e.name
		}
		v := variant(name, g.exec[i])
		v.CompileMs = measure.ExactMs(g.compile[i])
		if i == 0 {
			v.WallP50Ms = measure.ExactMs(measure.Percentile(g.execWall, 50))
		}
		vs = append(vs, v)
	}
	bv := variant("wazero", g.bareT)
	bv.CompileMs = measure.ExactMs(g.bare.compile)
	cv := variant("wazero+close", g.closeT)
	cv.CompileMs = measure.ExactMs(g.closing.compile)
	return append(vs, bv, cv)
}
