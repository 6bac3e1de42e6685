package wasmbench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/sandbox"
)

// Defaults of the I/O workload (Options.IO): 3,000 input files of 4 KiB,
// 512 MiB written in 8 files, 4 KiB a write (the size of a C stdio or Go
// bufio buffer).
const (
	DefaultIOInputs   = 3000
	DefaultIOInputKiB = 4
	DefaultIOFiles    = 8
	DefaultIOMiB      = 512
	DefaultIORecord   = 4096
)

// IOTarget: the I/O workload's metered time in the executor on its default
// engine at most this many times the same program's native build (issue
// 36).
const IOTarget = 1.5

// IOOptions size the I/O workload: examples/fileio, which reads Inputs
// files of InputKiB KiB and writes MiB MiB in Files files, Record bytes a
// write. Zero fields take the defaults.
type IOOptions struct {
	Inputs, InputKiB, Files, MiB, Record int
	// Skip leaves the workload out.
	Skip bool
}

func (o *IOOptions) validate() error {
	for _, f := range []struct {
		v *int
		d int
	}{{&o.Inputs, DefaultIOInputs}, {&o.InputKiB, DefaultIOInputKiB}, {&o.Files, DefaultIOFiles}, {&o.MiB, DefaultIOMiB}, {&o.Record, DefaultIORecord}} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	switch {
	case o.Inputs < 1 || o.Inputs > 100000:
		return fmt.Errorf("io inputs %d out of range [1, 100000]", o.Inputs)
	case o.InputKiB < 1 || o.InputKiB > 1<<20:
		return fmt.Errorf("io input size %d KiB out of range [1, 1048576]", o.InputKiB)
	case o.Files < 1 || o.Files > 10000:
		return fmt.Errorf("io files %d out of range [1, 10000]", o.Files)
	case o.MiB < 1 || o.MiB > 1<<16:
		return fmt.Errorf("io size %d MiB out of range [1, 65536]", o.MiB)
	case o.Record < 1 || o.Record > 1<<20:
		return fmt.Errorf("io record %d out of range [1, 1048576]", o.Record)
	}
	return nil
}

// args are fileio's arguments after its directories.
func (o *IOOptions) args() []string {
	return []string{strconv.Itoa(o.Files), strconv.Itoa(o.MiB), strconv.Itoa(o.Record)}
}

// IO is the I/O workload measured: examples/fileio built natively (a
// process) against its committed wasm32-wasi module in the executor on
// each engine, the same inputs and arguments.
type IO struct {
	Inputs     int      `json:"inputs"`
	InputBytes int64    `json:"input_bytes"`
	Files      int      `json:"files"`
	MiB        int      `json:"mib"`
	Record     int      `json:"record_bytes"`
	Args       []string `json:"args"`
	// NativeP50Ms is the native build's time as a process, start to exit.
	NativeP50Ms float64 `json:"native_p50_ms"`
	NativeMinMs float64 `json:"native_min_ms"`
	NativeMaxMs float64 `json:"native_max_ms"`
	// Engines is the executor on each engine, the default first.
	Engines []IOEngine `json:"engines"`
	// Ratio is the default engine's metered p50 over NativeP50Ms, the
	// figure IOTarget is about.
	Ratio       float64 `json:"ratio"`
	Target      float64 `json:"target_ratio"`
	MeetsTarget bool    `json:"meets_target"`
	// Digest is the program's digest.txt, the same in every variant (and
	// so are the first and last output files, compared by hash).
	Digest  string `json:"digest"`
	Skipped string `json:"skipped,omitempty"`
}

// IOEngine is the I/O workload in the executor on one engine: Metered
// (instantiation and run, what a job is billed for) and the whole Run,
// which adds the sandbox process, its compile cache lookup and the
// collection of the outputs.
type IOEngine struct {
	Engine       string  `json:"engine"`
	MeteredP50Ms float64 `json:"metered_p50_ms"`
	MeteredMinMs float64 `json:"metered_min_ms"`
	MeteredMaxMs float64 `json:"metered_max_ms"`
	Ratio        float64 `json:"ratio"`
	WallP50Ms    float64 `json:"wall_p50_ms"`
	WallRatio    float64 `json:"wall_ratio"`
}

// ioRun is the I/O workload set up: its inputs, native build and job.
type ioRun struct {
	o        IOOptions
	dir      string // its files; work/in holds the inputs
	bin      string
	job      *sandbox.Job
	res      *IO
	checksum map[string]string // digest.txt and the first and last outputs, by name

	native  []time.Duration
	metered [][]time.Duration // per engine
	wall    [][]time.Duration
}

// runIO measures the I/O workload, interleaved rep by rep: native, then
// each engine. Disk use is at most the inputs plus twice MiB (a wasm run's
// outputs and their collected copy); each run's outputs are removed once
// checked.
func runIO(ctx context.Context, dir string, execs executors, o Options, progress func(string, ...any)) (*IO, error) {
	opt := o.IO
	out := &IO{Inputs: opt.Inputs, Files: opt.Files, MiB: opt.MiB, Record: opt.Record, Args: opt.args(), Target: IOTarget}
	clang, err := exec.LookPath("clang")
	if err != nil {
		out.Skipped = "no clang to build the native side (apt-get install clang)"
		return out, nil
	}
	r := &ioRun{o: opt, dir: dir, bin: filepath.Join(dir, "fileio"), res: out,
		metered: make([][]time.Duration, len(execs)), wall: make([][]time.Duration, len(execs))}
	defer os.RemoveAll(dir)
	if err := r.setUp(ctx, clang); err != nil || out.Skipped != "" {
		return out, err
	}
	// Once each, untimed: the executor compiles the module, the page
	// cache holds the inputs, and the outputs are compared.
	if err := r.rep(ctx, execs, false); err != nil {
		return nil, err
	}
	for rep := range o.Reps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		progress("I/O workload, rep %d/%d", rep+1, o.Reps)
		if err := r.rep(ctx, execs, true); err != nil {
			return nil, err
		}
	}
	n := measure.Percentile(r.native, 50)
	out.NativeP50Ms = measure.ExactMs(n)
	out.NativeMinMs = measure.ExactMs(measure.Percentile(r.native, 0))
	out.NativeMaxMs = measure.ExactMs(measure.Percentile(r.native, 100))
	for i, e := range execs {
		m, w := measure.Percentile(r.metered[i], 50), measure.Percentile(r.wall[i], 50)
		out.Engines = append(out.Engines, IOEngine{
			Engine:       e.name,
			MeteredP50Ms: measure.ExactMs(m),
			MeteredMinMs: measure.ExactMs(measure.Percentile(r.metered[i], 0)),
			MeteredMaxMs: measure.ExactMs(measure.Percentile(r.metered[i], 100)),
			Ratio:        float64(m) / float64(n),
			WallP50Ms:    measure.ExactMs(w),
			WallRatio:    float64(w) / float64(n),
		})
	}
	out.Ratio = out.Engines[0].Ratio
	out.MeetsTarget = out.Ratio <= IOTarget
	return out, nil
}

// setUp writes the inputs (a fixed pseudo-random stream) under work/in,
// the module beside them, and builds the native side.
func (r *ioRun) setUp(ctx context.Context, clang string) error {
	in := filepath.Join(r.dir, "work", "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		return err
	}
	src := rand.NewChaCha8([32]byte{'g', 'p', 'u', 'n', 'e', 't', ' ', 'i', 'o'})
	buf := make([]byte, r.o.InputKiB<<10)
	for i := range r.o.Inputs {
		src.Read(buf)
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("in-%05d.dat", i)), buf, 0o644); err != nil {
			return err
		}
		r.res.InputBytes += int64(len(buf))
	}
	if err := os.WriteFile(r.bin+".c", examples.FileIOCSource, 0o644); err != nil {
		return err
	}
	mod := filepath.Join(r.dir, "fileio.wasm")
	if err := os.WriteFile(mod, examples.FileIOCWASM, 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, clang, append(append([]string{}, CFlags...), "-o", r.bin, r.bin+".c")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.res.Skipped = fmt.Sprintf("clang failed on fileio: %v: %s", err, b)
		return nil
	}
	r.job = benchJob("bench-wasm-io", mod, r.o.args(), filepath.Join(r.dir, "work"))
	// Room for the outputs, the inputs and their per-file charges.
	r.job.Limits.DiskBytes = uint64(r.o.MiB)<<20 + uint64(r.res.InputBytes) + uint64(r.o.Inputs+r.o.Files+16)*sandbox.OutputEntryBytes + 1<<20
	return nil
}

// rep runs the program natively and in the executor on each engine,
// checking each run's outputs and removing them, and keeps the times if
// timed.
func (r *ioRun) rep(ctx context.Context, execs executors, timed bool) error {
	outDir := filepath.Join(r.dir, "native-out")
	args := append([]string{"-in", filepath.Join(r.dir, "work", "in"), "-out", outDir}, r.o.args()...)
	t0 := time.Now()
	if b, err := exec.CommandContext(ctx, r.bin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("fileio native: %v: %s", err, b)
	}
	d := time.Since(t0)
	err := r.check("native build", outDir)
	os.RemoveAll(outDir)
	if err != nil {
		return err
	}
	if timed {
		r.native = append(r.native, d)
	}
	for i, e := range execs {
		t0 := time.Now()
		res, err := e.x.Run(ctx, r.job, io.Discard)
		wall := time.Since(t0)
		os.RemoveAll(filepath.Join(r.dir, "work", "out"))
		os.RemoveAll(filepath.Join(r.dir, "work", "tmp"))
		if err != nil {
			return err
		}
		if res.Failed {
			os.RemoveAll(res.OutputDir)
			return fmt.Errorf("fileio module on %s failed: %s", e.name, res.Reason)
		}
		err = r.check("wasm module on "+e.name, filepath.Join(res.OutputDir, "out"))
		os.RemoveAll(res.OutputDir)
		if err != nil {
			return err
		}
		if timed {
			r.metered[i] = append(r.metered[i], res.Metered)
			r.wall[i] = append(r.wall[i], wall)
		}
	}
	return nil
}

// check compares a run's digest.txt and its first and last output files
// with the first run's (the native build's), and its digest's byte count
// with the options.
func (r *ioRun) check(who, dir string) error {
	names := []string{"digest.txt", "out-000.bin", fmt.Sprintf("out-%03d.bin", r.o.Files-1)}
	sums := map[string]string{}
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return fmt.Errorf("fileio: %s: %w", who, err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		sums[n] = hex.EncodeToString(h.Sum(nil))
	}
	if r.checksum == nil {
		b, err := os.ReadFile(filepath.Join(dir, "digest.txt"))
		if err != nil {
			return err
		}
		f := strings.Fields(string(b))
		want := []string{strconv.Itoa(r.o.Inputs), strconv.FormatInt(r.res.InputBytes, 10), strconv.FormatInt(int64(r.o.MiB)<<20, 10)}
		if len(f) != 4 || strings.Join(f[1:], " ") != strings.Join(want, " ") {
			return fmt.Errorf("fileio: %s wrote digest %q, want files, input bytes and output bytes %v", who, b, want)
		}
		r.res.Digest = strings.TrimSpace(string(b))
		r.checksum = sums
		return nil
	}
	for _, n := range names {
		if sums[n] != r.checksum[n] {
			return fmt.Errorf("fileio: %s's %s has sha256 %s, the native build's %s", who, n, sums[n], r.checksum[n])
		}
	}
	return nil
}
