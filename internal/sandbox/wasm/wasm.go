// Package wasm is the WebAssembly executor: it runs WASI (preview 1)
// command modules confined to the job's work directory, with no network,
// under the job's memory, time and disk limits, and by default
// deterministically, so that replicas of a job on different providers
// produce byte-identical outputs.
//
// # Engines
//
// Modules are compiled and run by wasmtime (Cranelift, through
// wasmtime-go), the default wherever it is built in, or by wazero (pure
// Go), chosen with WithEngine. wasmtime is there for speed: `gpunet bench
// wasm` measured the C kernels at about 1.0–1.2× native on it against
// 1.7–3× on wazero (BENCHMARKS.md). What it costs: cgo and a static
// library (about 50 MiB per platform in the module cache, and a larger
// binary); wasmtime-go ships libraries for linux and darwin on amd64 and
// arm64 (and windows/amd64, not used here), so elsewhere, and in builds
// without cgo, only wazero is built in; and a wasmtime release each month,
// whose wasmtime-go major version follows it. wazero stays for those
// builds. Replicas of one job must run the same engine: Engine names it
// with everything that could change a result.
//
// Neither engine's own WASI is used: both bind package wasi, gpunet's
// preview 1 implementation, so that a job sees the same world on either,
// with a deterministic clock, randomness, file times, inode numbers and
// directory order, a disk budget, and no symbolic links (see its package
// comment). Before a job starts the executor creates the directories its
// outputs go in and a /tmp, inside the work directory.
//
// # Sandbox processes
//
// Each job runs in a sandbox process of its own (see ChildMain), which the
// executor kills to stop the job at its timeout or on cancellation; that
// lets the guest's compiled code run without fuel, epoch or context
// checks, each of which made tight loops 1.7–1.9× (wasmtime) or several
// times (wazero) slower. By default the sandbox process is the running
// executable itself, started again with ChildEnv set (see WithCommand).
//
// The exception is a compare job's judge program (RunJudge), whose verdict
// must not depend on the machine's speed: it runs with wasmtime's fuel, a
// deterministic instruction budget, compiled apart from the same module
// run as a job. wazero has no fuel and runs no judge.
//
// # Compiled modules
//
// wasmtime's compiled modules are cached on disk in the executor's cache
// directory, sealed (see cache.go: named and encrypted under keys derived
// from the module and a secret of the provider's, so that nothing readable
// of a consumer's module stays on disk, and nothing the cache did not seal
// itself is ever loaded), keyed by the engine's version and settings,
// bounded in size. The executor remembers which modules it has seen
// compiled, so that concurrent first runs of one module compile it once.
// For modules run more than once the executor keeps a few spare sandbox
// processes with the module loaded (see WithSpares).
package wasm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm/wasi"
)

// Name is the executor's name in job specs and offers.
const Name = "wasm"

// argv0 is the program name every job sees.
const argv0 = "job"

// cacheLayout is the subdirectory of the cache directory that holds the
// sealed compiled modules.
const cacheLayout = "sealed"

// oldCacheLayouts are what earlier versions kept in the cache directory:
// wazero's compiled modules, unencrypted. New removes them.
var oldCacheLayouts = []string{"noclose"}

// maxKnownModules bounds the executor's memory of compiled modules.
const maxKnownModules = 4096

// DefaultSpares is how many spare sandbox processes an executor keeps by
// default (see WithSpares).
const DefaultSpares = 2

// spareIdle is how long a spare sandbox process waits for a job before it
// is let go.
const spareIdle = 10 * time.Minute

// Executor runs WASI modules, each run in a sandbox process of its own. It
// is safe for concurrent use.
type Executor struct {
	path  string   // the sandbox process's program
	argv0 string   // its argv[0], if not path
	args  []string // and its arguments

	cacheDir  string // the sandbox processes' compiled-module cache
	tempCache string // removed by Close: New("") made it
	maxSpares int
	engine    string

	life  sandbox.Lifecycle
	pause sandbox.PauseSet // the sandbox processes running jobs (pause.go)

	mu       sync.Mutex
	modules  map[[sha256.Size]byte]*moduleState
	spares   map[[sha256.Size]byte]*child
	spareSeq uint64
}

// moduleState is what the executor knows of a module it has run.
type moduleState struct {
	done chan struct{} // closed once compiled into the disk cache, or failed
	ok   bool          // compiled; set before done is closed
}

var _ sandbox.Executor = (*Executor)(nil)

// Option configures an Executor.
type Option func(*Executor)

// WithCommand sets the program New's executor starts for each job, and its
// arguments. The program must run ChildMain when started with ChildEnv set
// in its environment, which every program linking this package does (its
// init function sees to it), and "gpunet sandbox-exec" does too.
//
// The default is the running executable (/proc/self/exe on Linux, else
// os.Executable with symbolic links resolved) with the argument
// "sandbox-exec". Set this when the executable cannot be started again: a
// program that was deleted, or runs somewhere exec is not allowed.
func WithCommand(path string, args ...string) Option {
	return func(e *Executor) { e.path, e.args = path, args }
}

// WithSpares sets how many spare sandbox processes the executor keeps
// (default DefaultSpares; 0 for none). Starting a sandbox process and
// loading a module from the disk cache takes tens of milliseconds for a
// large module (about 40 ms for a Go one), so from a module's second run
// on, the executor starts another process for it as the job ends, which
// loads the module and waits for the module's next job; each holds the
// module's compiled code and a Go runtime (about 35 MiB for a Go module)
// until it gets a job, a more recent module takes its place, or it has
// waited ten minutes.
func WithSpares(n int) Option {
	return func(e *Executor) { e.maxSpares = max(n, 0) }
}

// WithEngine sets the engine that compiles and runs modules:
// EngineWasmtime or EngineWazero (default DefaultEngine). New fails for an
// engine this program was built without (see Engines).
func WithEngine(name string) Option {
	return func(e *Executor) { e.engine = name }
}

// DefaultEngine is the engine New uses without WithEngine: wasmtime where
// it is built in, else wazero.
var DefaultEngine = func() string {
	if engines[EngineWasmtime] != nil {
		return EngineWasmtime
	}
	return EngineWazero
}()

// Engines are the engines built into this program, in the order of
// preference.
func Engines() []string {
	var out []string
	for _, n := range []string{EngineWasmtime, EngineWazero} {
		if engines[n] != nil {
			out = append(out, n)
		}
	}
	return out
}

// New returns an executor whose compiled modules persist in cacheDir
// (created if missing; "" keeps them in a temporary directory removed by
// Close). Close releases it.
func New(cacheDir string, opts ...Option) (*Executor, error) {
	e := &Executor{
		args:      []string{"sandbox-exec"},
		maxSpares: DefaultSpares,
		engine:    DefaultEngine,
		life:      sandbox.Lifecycle{Name: Name},
		modules:   make(map[[sha256.Size]byte]*moduleState),
		spares:    make(map[[sha256.Size]byte]*child),
	}
	for _, o := range opts {
		o(e)
	}
	if engines[e.engine] == nil {
		return nil, fmt.Errorf("wasm: engine %q is not built into this program (it has %s)", e.engine, strings.Join(Engines(), ", "))
	}
	if e.path == "" {
		p, err := selfExe()
		if err != nil {
			return nil, fmt.Errorf("wasm: sandbox process: %w", err)
		}
		e.path = p
		if len(os.Args) > 0 {
			e.argv0 = os.Args[0] // "gpunet sandbox-exec" in ps, not "/proc/self/exe …"
		}
	}
	if cacheDir == "" {
		dir, err := os.MkdirTemp("", "gpunet-wasm-cache-")
		if err != nil {
			return nil, fmt.Errorf("wasm: compilation cache: %w", err)
		}
		e.tempCache, cacheDir = dir, dir
	}
	for _, old := range oldCacheLayouts {
		os.RemoveAll(filepath.Join(cacheDir, old))
	}
	dir, err := filepath.Abs(filepath.Join(cacheDir, cacheLayout))
	if err == nil {
		err = initCache(dir)
	}
	if err != nil {
		if e.tempCache != "" {
			os.RemoveAll(e.tempCache)
		}
		return nil, fmt.Errorf("wasm: compilation cache: %w", err)
	}
	e.cacheDir = dir
	return e, nil
}

// Engine names the engine that runs this executor's jobs, with everything
// about it that could change what a job computes: its name and version,
// the platform (NaN bit patterns are the CPU's), its code-generation
// settings, and the version of the WASI the guest sees, e.g.
// "wasmtime-39.0.1/linux-amd64/cranelift-speed,relaxed-simd-deterministic,no-threads/wasi-gpunet-1".
// Replicas of a deterministic job must run under one Engine for their
// outputs to be comparable byte for byte.
func (e *Executor) Engine() string { return engineName(e.engine) + "/wasi-gpunet-" + wasi.Version }

func engineName(name string) string {
	switch name {
	case EngineWasmtime:
		return wasmtimeKey()
	case EngineWazero:
		return "wazero-" + wazeroVersion + "/" + runtime.GOOS + "-" + runtime.GOARCH
	}
	return name
}

// executable is os.Executable with symbolic links resolved.
func executable() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}

// Name returns "wasm".
func (e *Executor) Name() string { return Name }

// Close ends the jobs still running (their sandbox processes are killed and
// they report "cancelled"), waits for them, and ends the spare processes.
// The disk cache stays for the next executor on the same directory.
func (e *Executor) Close() error {
	if !e.life.Close() {
		return nil
	}
	e.mu.Lock()
	spares := e.spares
	e.spares = nil
	e.mu.Unlock()
	for _, c := range spares {
		c.idle.Stop()
		c.discard()
	}
	if e.tempCache != "" {
		return os.RemoveAll(e.tempCache)
	}
	return nil
}

// Run runs job.Module as a WASI command: argv is "job" followed by
// job.Args, the environment is exactly job.Env, the file system is
// job.WorkDir mounted at "/", stdin is empty, and stdout and stderr go to
// logs (at most sandbox.DefaultLogBytes). See sandbox.Executor for what is
// a Result and what an error.
func (e *Executor) Run(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
	if err := sandbox.ValidateJob(job); err != nil {
		return nil, err
	}
	if job.Module == "" {
		return nil, fmt.Errorf("%w: Module is empty", sandbox.ErrInvalidJob)
	}
	return e.life.Run(ctx, job, logs, func(ctx context.Context, logs *sandbox.LogWriter, res *sandbox.Result) error {
		return e.run(ctx, job, runOpts{}, logs, res)
	})
}

// RunReadOnly is Run for a guest that may read job.WorkDir and change
// nothing in it: opening a file to write fails with EROFS, and creating,
// truncating, linking, renaming or removing anything, or setting a time,
// with ENOTCAPABLE (wasi.Config.ReadOnly). No directory is made for it (no
// /tmp), so job.Outputs must be empty. It is how a provider runs a
// compare job's judge program over two replicas' outputs: the trees stay
// as they were for the next pair, whatever the judge does.
func (e *Executor) RunReadOnly(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
	if err := sandbox.ValidateJob(job); err != nil {
		return nil, err
	}
	if job.Module == "" {
		return nil, fmt.Errorf("%w: Module is empty", sandbox.ErrInvalidJob)
	}
	if len(job.Outputs) > 0 {
		return nil, fmt.Errorf("%w: a read-only run has no outputs, got %d", sandbox.ErrInvalidJob, len(job.Outputs))
	}
	return e.life.Run(ctx, job, logs, func(ctx context.Context, logs *sandbox.LogWriter, res *sandbox.Result) error {
		return e.run(ctx, job, runOpts{readOnly: true}, logs, res)
	})
}

// ErrNoFuel is RunJudge's error on an engine that cannot count fuel
// (wazero): such an executor runs no judge program (MetersFuel).
var ErrNoFuel = errors.New("wasm: the engine cannot meter fuel, which a judge program needs")

// MetersFuel reports whether the executor's engine counts fuel, so that
// RunJudge can run a judge program: wasmtime does (Config.SetConsumeFuel);
// wazero has no fuel.
func (e *Executor) MetersFuel() bool { return e.engine == EngineWasmtime }

// JudgeResult is how a run of RunJudge ended.
type JudgeResult struct {
	*sandbox.Result
	// FuelUsed is the fuel the guest consumed: about one unit per
	// WebAssembly operator it executed, counted by the engine as the
	// code runs, so the same on every run of one module with the same
	// arguments over the same tree, on any machine under any load.
	FuelUsed uint64
	// OutOfFuel: the guest used its whole budget and was stopped there
	// (Reason OutOfFuelReason). Deterministic, like an exit code.
	OutOfFuel bool
	// TimedOut: the wall-clock bound, job.Limits.Timeout, stopped the
	// guest before it ended or ran out of fuel. That depends on this
	// machine's speed and load, so it is no verdict of the program's.
	TimedOut bool
}

// RunJudge is RunReadOnly for a judge program, with a deterministic bound
// on its work: the module is compiled to count fuel (a separate engine
// configuration and cache entry; the executor's other jobs run without
// fuel, 1.7–1.9× faster) and runs with fuel units, fuel > 0. It ends by
// itself, by running out of fuel, or at job.Limits.Timeout, which the
// caller should set far above the time the fuel takes, as a safety bound.
// On an engine without fuel (MetersFuel false) it returns ErrNoFuel.
// Spare sandbox processes are not used for judges.
func (e *Executor) RunJudge(ctx context.Context, job *sandbox.Job, fuel uint64, logs io.Writer) (*JudgeResult, error) {
	if !e.MetersFuel() {
		return nil, fmt.Errorf("%w (engine %s)", ErrNoFuel, e.engine)
	}
	if fuel == 0 {
		return nil, fmt.Errorf("%w: a judge's fuel budget is 0", sandbox.ErrInvalidJob)
	}
	if err := sandbox.ValidateJob(job); err != nil {
		return nil, err
	}
	if job.Module == "" {
		return nil, fmt.Errorf("%w: Module is empty", sandbox.ErrInvalidJob)
	}
	if len(job.Outputs) > 0 {
		return nil, fmt.Errorf("%w: a read-only run has no outputs, got %d", sandbox.ErrInvalidJob, len(job.Outputs))
	}
	jr := &JudgeResult{}
	res, err := e.life.Run(ctx, job, logs, func(ctx context.Context, logs *sandbox.LogWriter, res *sandbox.Result) error {
		return e.run(ctx, job, runOpts{readOnly: true, fuel: fuel, judge: jr}, logs, res)
	})
	if err != nil {
		return nil, err
	}
	jr.Result = res
	return jr, nil
}

// runOpts are how run runs a job beyond the job itself.
type runOpts struct {
	readOnly bool
	// fuel is the guest's fuel budget: a judge's (RunJudge); 0 for a job,
	// which runs without fuel.
	fuel uint64
	// judge, with fuel, receives what the fuel run did.
	judge *JudgeResult
}

// fuelKey is the executor's key for a module compiled to count fuel,
// apart from the same module compiled without.
func fuelKey(sum [sha256.Size]byte) [sha256.Size]byte {
	return sha256.Sum256(append([]byte("gpunet/wasm fuel\x00"), sum[:]...))
}

// run fills res with what the job did.
func (e *Executor) run(ctx context.Context, job *sandbox.Job, o runOpts, logs *sandbox.LogWriter, res *sandbox.Result) error {
	readOnly := o.readOnly
	module, err := openModule(job.Module)
	if err != nil {
		return fmt.Errorf("wasm: read module: %w", err)
	}
	keep := false // module handed on to a spare
	defer func() {
		if !keep {
			module.f.Close()
		}
	}()
	workDir, err := filepath.EvalSymlinks(job.WorkDir)
	if err == nil {
		workDir, err = filepath.Abs(workDir)
	}
	if err != nil {
		return fmt.Errorf("wasm: work dir: %w", err)
	}
	if link, err := findSymlink(workDir); err != nil {
		return fmt.Errorf("wasm: work dir: %w", err)
	} else if link != "" {
		return fail(res, "invalid work dir: /"+link+" is a symbolic link")
	}
	if readOnly {
		// Nothing to make: the guest writes nothing.
	} else if why := makeDirs(workDir, job.Outputs); why != "" {
		return fail(res, why)
	}
	memLimit := job.Limits.MemoryBytes
	if memLimit == 0 {
		memLimit = sandbox.DefaultMemoryBytes
	}
	memLimit = memLimit &^ (1<<16 - 1) // whole 64 KiB pages
	req := &childJob{
		JobID:         job.ID,
		Args:          job.Args,
		Env:           job.Env,
		WorkDir:       workDir,
		MemoryBytes:   memLimit,
		DiskBytes:     job.Limits.Disk(),
		Deterministic: job.Deterministic,
		TimeoutNS:     int64(job.Limits.Timeout),
		ReadOnly:      readOnly,
		Fuel:          o.fuel,
	}
	key := module.sum
	if o.fuel > 0 {
		key = fuelKey(module.sum)
	}

	t0 := time.Now()
	for attempt := 0; ; attempt++ {
		// Wait while another run compiles the same module: it will be in
		// the disk cache then.
		compiled, known, err := e.awaitCompile(ctx, key)
		if err != nil || ctx.Err() != nil {
			res.CompileTime = time.Since(t0)
			return fail(res, sandbox.ReasonCancelled)
		}
		var c *child
		if known && attempt == 0 && o.fuel == 0 {
			c = e.takeSpare(module.sum)
		}
		spare := c != nil
		if c == nil {
			if c, err = e.startChild(module, o.fuel > 0); err != nil {
				compiled(false)
				return err
			}
		}
		err = e.runOn(ctx, c, spare, job, req, logs, res, t0, compiled, o.judge)
		if err == errSpareDied {
			continue // before it started the job: try a new process
		}
		// A module run before gets a spare process for its next run. It
		// starts now rather than with the job, so that its loading does
		// not slow the job down (and inflate Metered) on a small machine.
		if err == nil && known && e.maxSpares > 0 && o.fuel == 0 {
			keep = e.addSpare(module)
		}
		return err
	}
}

// module is a job's module file, open.
type module struct {
	f   *os.File
	sum [sha256.Size]byte
}

func openModule(path string) (*module, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	if err == nil {
		_, err = io.Copy(h, io.NewSectionReader(f, 0, st.Size()))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	m := &module{f: f}
	h.Sum(m.sum[:0])
	return m, nil
}

// child is one sandbox process.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File
	logs   *switchWriter // its fd 1
	events chan childMessage
	stderr *headBuffer
	exited chan struct{} // closed once reaped, its output all read
	// waitErr is cmd.Wait's error, set before exited is closed.
	waitErr error

	mu     sync.Mutex
	reaped bool

	// While a spare:
	idle *time.Timer
	seq  uint64
}

var errSpareDied = errors.New("spare sandbox process died")

// errTimeout ends a job's run at its Limits.Timeout.
var errTimeout = errors.New("wasm: job timed out")

// startChild starts a sandbox process and sends it the module, to be
// compiled to count fuel when fuel is set.
func (e *Executor) startChild(m *module, fuel bool) (*child, error) {
	prep, err := json.Marshal(&childPrepare{
		Protocol:     childProtocol,
		ModuleFD:     moduleFD,
		ModuleSHA256: hex.EncodeToString(m.sum[:]),
		CacheDir:     e.cacheDir,
		Engine:       e.engine,
		Fuel:         fuel,
	})
	if err != nil {
		return nil, fmt.Errorf("wasm: %w", err)
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("wasm: sandbox process: %w", err)
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("wasm: sandbox process: %w", err)
	}
	c := &child{
		stdin:  stdinW,
		logs:   &switchWriter{w: io.Discard},
		events: make(chan childMessage, 16),
		stderr: &headBuffer{max: 4 << 10},
		exited: make(chan struct{}),
	}
	cmd := exec.Command(e.path, e.args...)
	if e.argv0 != "" {
		cmd.Args[0] = e.argv0
	}
	cmd.Env = childEnviron()
	cmd.Stdin = stdinR
	cmd.Stdout = c.logs
	cmd.Stderr = c.stderr
	cmd.ExtraFiles = []*os.File{reportW, m.f} // fds 3 (reportFD) and 4 (moduleFD)
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = time.Second // for pipes left open: there should be none
	err = cmd.Start()
	stdinR.Close()
	reportW.Close()
	if err != nil {
		stdinW.Close()
		reportR.Close()
		return nil, fmt.Errorf("wasm: start sandbox process: %w", err)
	}
	c.cmd = cmd
	go readReports(reportR, c.events)
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		c.reaped = true
		c.mu.Unlock()
		c.waitErr = err
		close(c.exited)
	}()
	// The pipe is empty, so this small write does not block.
	stdinW.Write(append(prep, '\n'))
	return c, nil
}

// kill kills the process (group), unless it is already gone.
func (c *child) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Not once reaped: the process group's ID could be anyone's.
	if !c.reaped {
		killProcess(c.cmd.Process)
	}
}

// discard ends a child that has no job to finish.
func (c *child) discard() {
	c.kill()
	<-c.exited
	c.stdin.Close()
}

// runOn runs the job on c, applying its timeout and ctx, and fills res
// (and jr, for a judge's fuel run). compiled is told whether the module
// compiled. It returns errSpareDied when c, a spare, died before it
// started the job.
func (e *Executor) runOn(ctx context.Context, c *child, spare bool, job *sandbox.Job, req *childJob, logs *sandbox.LogWriter, res *sandbox.Result, t0 time.Time, compiled func(bool), jr *JudgeResult) error {
	defer c.stdin.Close()
	defer compiled(false) // unless already told otherwise
	msg, err := json.Marshal(req)
	if err != nil {
		c.discard()
		return fmt.Errorf("wasm: %w", err)
	}
	// A job due to start during a pause starts after it; a pause while it
	// runs stops its clock: its timeout and its bill leave the pause out.
	pm, err := e.pause.Join(ctx, c.freeze, c.thaw)
	if err != nil {
		c.discard()
		res.CompileTime = time.Since(t0)
		return fail(res, sandbox.ReasonCancelled)
	}
	defer pm.Leave()
	c.logs.set(logs)
	// The job stays in the pipe until the child has loaded the module;
	// stdin then stays open until we are done (see ChildMain).
	go c.stdin.Write(append(msg, '\n'))

	var (
		started, killed time.Time
		stopTimer       = func() {}
		timeout         <-chan struct{}
		paused0         time.Duration // paused before the guest started
		done            = ctx.Done()
		events          = c.events
		result          *childMessage
		outcome         string // a reason when we killed it
		badReport       error
	)
	handle := func(m childMessage) {
		switch m.Event {
		case "ready":
			compiled(true)
		case "start":
			if started.IsZero() {
				started = time.Now()
				res.CompileTime = started.Sub(t0)
				compiled(true)
				var tctx context.Context
				tctx, stopTimer = pm.WithTimeout(context.Background(), job.Limits.Timeout, errTimeout)
				timeout = tctx.Done()
				paused0 = pm.Paused()
			}
		case "peak":
			res.PeakMemoryBytes = max(res.PeakMemoryBytes, m.Peak)
		case "result":
			result = &m
		case "":
			badReport = errors.New(m.Error)
		}
	}
	for exited := false; !exited; {
		select {
		case m, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			handle(m)
		case <-c.exited:
			exited = true
		case <-done:
			done = nil
			killed = time.Now()
			c.kill()
			if result == nil {
				outcome = sandbox.ReasonCancelled
			}
		case <-timeout:
			timeout = nil
			killed = time.Now()
			c.kill()
			if result == nil {
				outcome = sandbox.TimeoutReason(job.Limits.Timeout)
				if jr != nil {
					jr.TimedOut = true
				}
			}
		}
	}
	stopTimer()
	// The time the job spent paused (Pause) is not billed.
	paused := pm.Paused() - paused0
	// The process is gone, so its report pipe is closed: read what is
	// left of it.
	if events != nil {
		drain := time.NewTimer(time.Second)
	loop:
		for {
			select {
			case m, ok := <-events:
				if !ok {
					break loop
				}
				handle(m)
			case <-drain.C:
				break loop
			}
		}
		drain.Stop()
	}
	if started.IsZero() {
		res.CompileTime = time.Since(t0)
	}

	switch {
	case outcome != "":
		res.Failed, res.Reason = true, outcome
		if !started.IsZero() {
			res.Metered = max(0, killed.Sub(started)-paused)
		}
		return nil
	case result == nil:
		if spare && started.IsZero() && ctx.Err() == nil {
			return errSpareDied
		}
		why := "exited without a report"
		if c.waitErr != nil {
			why = c.waitErr.Error()
		}
		if badReport != nil {
			why += " (" + badReport.Error() + ")"
		}
		if line := c.stderr.summary(); line != "" {
			why += ": " + line
		}
		if !started.IsZero() {
			res.Metered = max(0, time.Since(started)-paused)
		}
		return fail(res, "sandbox process died: "+why)
	case result.Error != "":
		return fmt.Errorf("wasm: sandbox process: %s", result.Error)
	}
	compiled(result.Compiled)
	if jr != nil {
		jr.FuelUsed, jr.OutOfFuel = result.FuelUsed, result.OutOfFuel
	}
	res.ExitCode = result.ExitCode
	res.Failed = result.Failed
	res.Reason = result.Reason
	res.Metered = max(0, time.Duration(result.MeteredNS)-paused)
	res.PeakMemoryBytes = max(res.PeakMemoryBytes, result.PeakMemoryBytes)
	if res.Reason == "" {
		res.Failed, res.Reason = true, "sandbox process died: empty report"
	}
	return nil
}

// takeSpare returns the spare process for the module whose hash is key, if
// there is one alive.
func (e *Executor) takeSpare(key [sha256.Size]byte) *child {
	e.mu.Lock()
	c := e.spares[key]
	if c != nil {
		delete(e.spares, key)
		c.idle.Stop()
	}
	e.mu.Unlock()
	if c == nil {
		return nil
	}
	select {
	case <-c.exited:
		c.stdin.Close()
		return nil
	default:
		return c
	}
}

// addSpare starts a spare process for m, in the background, unless there
// is one. It reports whether it took m (and will close it).
func (e *Executor) addSpare(m *module) bool {
	e.mu.Lock()
	busy := e.spares[m.sum] != nil
	e.mu.Unlock()
	if busy {
		return false
	}
	return e.life.Go(func() {
		defer m.f.Close()
		c, err := e.startChild(m, false)
		if err != nil {
			return
		}
		var victims []*child
		e.mu.Lock()
		if e.life.Closed() || e.spares == nil || e.spares[m.sum] != nil {
			victims = append(victims, c)
		} else {
			for len(e.spares) >= e.maxSpares {
				var oldest [sha256.Size]byte
				var v *child
				for k, s := range e.spares {
					if v == nil || s.seq < v.seq {
						oldest, v = k, s
					}
				}
				delete(e.spares, oldest)
				v.idle.Stop()
				victims = append(victims, v)
			}
			e.spareSeq++
			c.seq = e.spareSeq
			e.spares[m.sum] = c
			c.idle = time.AfterFunc(spareIdle, func() {
				e.mu.Lock()
				mine := e.spares[m.sum] == c
				if mine {
					delete(e.spares, m.sum)
				}
				e.mu.Unlock()
				if mine {
					c.discard()
				}
			})
		}
		e.mu.Unlock()
		for _, v := range victims {
			v.discard()
		}
	})
}

// fail records a failed job in res; it returns nil for run to return.
func fail(res *sandbox.Result, reason string) error {
	res.Failed, res.Reason = true, reason
	return nil
}

// switchWriter is a sandbox process's stdout: discarded until it has a
// job, then the job's logs.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	return w.Write(p)
}

// readReports sends the childMessages read from r on events, and closes
// both at EOF. A line that is not a message is sent with no Event and the
// problem in Error.
func readReports(r *os.File, events chan<- childMessage) {
	defer close(events)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m childMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.Event == "" {
			m = childMessage{Error: fmt.Sprintf("bad report line %.100q", sc.Bytes())}
		}
		events <- m
	}
	if err := sc.Err(); err != nil {
		events <- childMessage{Error: "report: " + err.Error()}
		io.Copy(io.Discard, r)
	}
}

// childEnviron is the sandbox process's environment: the marker that makes
// it one, and the Go runtime's settings from ours. Nothing else of the
// provider's environment reaches it (the guest's is job.Env anyway).
func childEnviron() []string {
	env := []string{ChildEnv + "=" + ChildEnvValue}
	for _, k := range []string{"GODEBUG", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GOTRACEBACK", "GORACE", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - h.buf.Len(); room > 0 {
		h.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// summary is the line that best explains a crash: a Go panic or fatal
// error if there is one, else the last line.
func (h *headBuffer) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var last string
	for _, l := range strings.Split(h.buf.String(), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") {
			return truncate(l, 200)
		}
		if l != "" {
			last = l
		}
	}
	return truncate(last, 200)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// awaitCompile waits while another run's sandbox process compiles the
// module whose hash is key. known is true when the module is known to be
// compiled already. Otherwise the caller compiles it, and must then call
// compiled once its sandbox process has compiled the module (true) or
// failed to (false); only the first call counts.
func (e *Executor) awaitCompile(ctx context.Context, key [sha256.Size]byte) (compiled func(ok bool), known bool, err error) {
	for {
		e.mu.Lock()
		m := e.modules[key]
		if m == nil {
			if len(e.modules) >= maxKnownModules {
				for k, m := range e.modules {
					if m.ok {
						delete(e.modules, k)
					}
				}
			}
			m = &moduleState{done: make(chan struct{})}
			e.modules[key] = m
			e.mu.Unlock()
			var once sync.Once
			return func(ok bool) {
				once.Do(func() {
					e.mu.Lock()
					if ok {
						m.ok = true
					} else if e.modules[key] == m {
						delete(e.modules, key) // the next run tries again
					}
					e.mu.Unlock()
					close(m.done)
				})
			}, false, nil
		}
		e.mu.Unlock()
		select {
		case <-m.done:
			if m.ok {
				return func(bool) {}, true, nil
			}
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// makeDirs creates, inside the work dir, the directories the job's outputs
// go in and /tmp, as a container job has them. It returns why it could
// not (an input in the way), the job's doing.
func makeDirs(workDir string, outputs []string) string {
	root, err := os.OpenRoot(workDir)
	if err != nil {
		return "work dir: " + err.Error()
	}
	defer root.Close()
	for _, d := range sandbox.OutputDirs(outputs) {
		if err := root.MkdirAll(strings.TrimPrefix(d, "/"), 0o755); err != nil {
			return "cannot create the directory for output " + d + ": " + err.Error()
		}
	}
	root.Mkdir("tmp", 0o755) // unless an input is there already
	return ""
}

// findSymlink returns the first symbolic link under dir, relative to it,
// or "" if there is none.
func findSymlink(dir string) (string, error) {
	var found string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			rel, _ := filepath.Rel(dir, p)
			found = filepath.ToSlash(rel)
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
}
