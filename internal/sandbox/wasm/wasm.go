// Package wasm is the WebAssembly executor: it runs WASI (preview 1)
// command modules with wazero, confined to the job's work directory, with
// no network, under the job's memory, time and disk limits, and by default
// deterministically (fixed clock and seeded randomness) so that replicas of
// a job on different providers produce byte-identical outputs.
//
// Compiled modules are cached twice: on disk in the executor's cache
// directory (so a provider compiles a module once across restarts), and in
// memory by the SHA-256 of the module's bytes.
package wasm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// Name is the executor's name in job specs and offers.
const Name = "wasm"

// maxCachedModules bounds the in-memory cache of compiled modules; the
// disk cache is not bounded here.
const maxCachedModules = 32

// argv0 is the program name every job sees.
const argv0 = "job"

// Executor runs WASI modules. It is safe for concurrent use; each Run
// gets its own module instance, memory and file system view.
type Executor struct {
	rt    wazero.Runtime
	cache wazero.CompilationCache

	// closing is cancelled by Close, which ends every running job.
	closing context.Context
	close   context.CancelFunc
	running sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	modules map[[sha256.Size]byte]*module
	useTick uint64
}

// module is a compiled module in the in-memory cache.
type module struct {
	ready    chan struct{} // closed once compiled (or failed)
	compiled wazero.CompiledModule
	err      error
	users    int    // runs using compiled now; not evicted while > 0
	lastUsed uint64 // Executor.useTick at last use
}

var _ sandbox.Executor = (*Executor)(nil)

// New returns an executor whose compiled modules persist in cacheDir
// (created if missing; "" keeps them in memory only). Close releases it.
func New(cacheDir string) (*Executor, error) {
	var cache wazero.CompilationCache
	if cacheDir == "" {
		cache = wazero.NewCompilationCache()
	} else {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cacheDir); err != nil {
			return nil, fmt.Errorf("wasm: compilation cache: %w", err)
		}
	}
	// One runtime serves every job. Its memory limit is wasm32's whole
	// 4 GiB: each job's own limit is enforced per instance by a memoryCap
	// (see env.go), which unlike WithMemoryLimitPages applies per job and
	// tells us when a job ran out of memory.
	//
	// WithCloseOnContextDone is what lets a timeout or a cancellation stop
	// a guest stuck in a loop. wazero implements it with a call out of the
	// guest's code at every loop iteration, which makes tight loops several
	// times slower (about 6x for the mandelbrot example; see
	// BenchmarkMandelbrot), but nothing cheaper can stop a guest running in
	// this process.
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(65536)
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		cache.Close(ctx)
		return nil, fmt.Errorf("wasm: instantiate WASI: %w", err)
	}
	closing, cancel := context.WithCancel(context.Background())
	return &Executor{
		rt:      rt,
		cache:   cache,
		closing: closing,
		close:   cancel,
		modules: make(map[[sha256.Size]byte]*module),
	}, nil
}

// Name returns "wasm".
func (e *Executor) Name() string { return Name }

// Close ends the jobs still running (they report "cancelled"), waits for
// them, and releases the runtime. The disk cache stays for the next
// executor on the same directory.
func (e *Executor) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.close()
	e.running.Wait()
	ctx := context.Background()
	err := e.rt.Close(ctx)
	if cerr := e.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

var errTimeout = errors.New("job timed out")

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
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errors.New("wasm: executor closed")
	}
	e.running.Add(1)
	e.mu.Unlock()
	defer e.running.Done()

	// Close cancels every run as if its caller had.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.closing, cancel)()

	res := &sandbox.Result{ExitCode: -1, Started: time.Now()}
	out := sandbox.NewLogWriter(logs, sandbox.DefaultLogBytes)
	if err := e.run(ctx, job, out, res); err != nil {
		return nil, err
	}
	if err := sandbox.Finish(job, res); err != nil {
		return nil, err
	}
	return res, nil
}

// run fills res with what the job did.
func (e *Executor) run(ctx context.Context, job *sandbox.Job, logs *sandbox.LogWriter, res *sandbox.Result) error {
	fail := func(reason string) error {
		res.Failed, res.Reason = true, reason
		return nil
	}

	bin, err := os.ReadFile(job.Module)
	if err != nil {
		return fmt.Errorf("wasm: read module: %w", err)
	}
	workDir, err := filepath.EvalSymlinks(job.WorkDir)
	if err != nil {
		return fmt.Errorf("wasm: work dir: %w", err)
	}
	if link, err := findSymlink(workDir); err != nil {
		return fmt.Errorf("wasm: work dir: %w", err)
	} else if link != "" {
		return fail("invalid work dir: /" + link + " is a symbolic link")
	}

	t0 := time.Now()
	mod, release, err := e.compile(ctx, bin)
	res.CompileTime = time.Since(t0)
	if err != nil {
		if ctx.Err() != nil {
			return fail(sandbox.ReasonCancelled)
		}
		return fail("invalid module: " + err.Error())
	}
	defer release()
	if _, ok := mod.ExportedFunctions()["_start"]; !ok {
		return fail("invalid module: no _start function (not a WASI command)")
	}

	memLimit := job.Limits.MemoryBytes
	if memLimit == 0 {
		memLimit = sandbox.DefaultMemoryBytes
	}
	memLimit = memLimit &^ (1<<16 - 1) // whole 64 KiB pages
	for _, m := range slices.Concat(mod.ImportedMemories(), exportedMemories(mod)) {
		if need := uint64(m.Min()) << 16; need > memLimit {
			res.PeakMemoryBytes = need
			return fail(sandbox.OOMReason(memLimit))
		}
	}
	if ctx.Err() != nil {
		return fail(sandbox.ReasonCancelled)
	}

	// The job's clock starts now: Timeout counts from here, as does
	// Metered, and compilation counts toward neither.
	runCtx, stop := context.WithTimeoutCause(ctx, job.Limits.Timeout, errTimeout)
	defer stop()
	memCap := &memoryCap{limit: memLimit}
	var budget *diskBudget
	if job.Limits.DiskBytes > 0 {
		budget = &diskBudget{limit: int64(min(job.Limits.DiskBytes, 1<<62))}
	}
	cfg := moduleConfig(runCtx, job, workDir, logs, budget)
	instCtx := experimental.WithMemoryAllocator(runCtx, memCap)

	start := time.Now()
	inst, err := instantiate(instCtx, e.rt, mod, cfg)
	if err == nil {
		_, err = inst.ExportedFunction("_start").Call(runCtx)
		inst.Close(context.Background())
	}
	res.Metered = time.Since(start)
	res.PeakMemoryBytes = memCap.peakBytes()

	var exit *sys.ExitError
	switch {
	case err != nil && runCtx.Err() != nil && (!errors.As(err, &exit) || isContextExit(exit)):
		res.Failed, res.Reason = true, sandbox.ReasonCancelled
		if context.Cause(runCtx) == errTimeout {
			res.Reason = sandbox.TimeoutReason(job.Limits.Timeout)
		}
		return nil
	case err == nil:
		res.ExitCode, res.Reason = 0, sandbox.ExitReason(0)
	case errors.As(err, &exit):
		res.ExitCode = int(int32(exit.ExitCode()))
		res.Reason = sandbox.ExitReason(res.ExitCode)
		res.Failed = res.ExitCode != 0
	case errors.Is(err, errInstantiate):
		res.Failed = true
		res.Reason = "invalid module: " + strings.TrimPrefix(err.Error(), errInstantiate.Error()+": ")
	default:
		logs.Notef("trap: %s", strings.TrimSpace(err.Error()))
		res.Failed, res.Reason = true, "trap: "+trapMessage(err)
	}
	if res.Failed && memCap.wasRefused() {
		res.Reason = sandbox.OOMReason(memLimit)
	}
	if budget.wasExceeded() {
		res.Failed, res.Reason = true, sandbox.DiskReason(job.Limits.DiskBytes)
	}
	return nil
}

// moduleConfig is the guest's whole view of the world.
func moduleConfig(ctx context.Context, job *sandbox.Job, workDir string, logs io.Writer, budget *diskBudget) wazero.ModuleConfig {
	fsc := wazero.NewFSConfig().(sysfs.FSConfig).
		WithSysFSMount(newGuestFS(workDir, job.Deterministic, budget), "/")
	cfg := wazero.NewModuleConfig().
		WithName(""). // anonymous, so that one module can run many times at once
		WithStartFunctions().
		WithArgs(append([]string{argv0}, job.Args...)...).
		WithStdin(strings.NewReader("")).
		WithStdout(logs).
		WithStderr(logs).
		WithFSConfig(fsc)
	keys := make([]string, 0, len(job.Env))
	for k := range job.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		cfg = cfg.WithEnv(k, job.Env[k])
	}
	if job.Deterministic {
		clock := &virtualClock{}
		return cfg.
			WithWalltime(clock.walltime, 1).
			WithNanotime(clock.nanotime, 1).
			WithNanosleep(clock.nanosleep).
			WithRandSource(deterministicRand(job.ID))
	}
	return cfg.
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(realSleep(ctx)).
		WithRandSource(rand.Reader)
}

var errInstantiate = errors.New("instantiate")

// instantiate links and initialises the module without running _start. A
// failure here is the module's (a missing import, a bad segment) and is
// reported as an invalid module. It turns wazero's panic on an initial
// memory the allocator refused into an error.
func instantiate(ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule, cfg wazero.ModuleConfig) (inst api.Module, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: initial memory: %v", errInstantiate, p)
		}
	}()
	inst, err = rt.InstantiateModule(ctx, mod, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInstantiate, err)
	}
	return inst, nil
}

func isContextExit(e *sys.ExitError) bool {
	c := e.ExitCode()
	return c == sys.ExitCodeContextCanceled || c == sys.ExitCodeDeadlineExceeded
}

// trapMessage is the first line of a wazero runtime error, without its
// "wasm error: " prefix: "unreachable", "out of bounds memory access".
func trapMessage(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return strings.TrimPrefix(msg, "wasm error: ")
}

func exportedMemories(mod wazero.CompiledModule) []api.MemoryDefinition {
	var ms []api.MemoryDefinition
	for _, m := range mod.ExportedMemories() {
		ms = append(ms, m)
	}
	return ms
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

// compile returns the compiled module for bin, from the in-memory cache,
// the disk cache or by compiling it; concurrent runs of one module compile
// it once. release must be called when the run no longer needs it.
func (e *Executor) compile(ctx context.Context, bin []byte) (wazero.CompiledModule, func(), error) {
	key := sha256.Sum256(bin)
	e.mu.Lock()
	m, ok := e.modules[key]
	if !ok {
		m = &module{ready: make(chan struct{})}
		e.modules[key] = m
	}
	m.users++
	e.useTick++
	m.lastUsed = e.useTick
	e.mu.Unlock()

	release := func() {
		e.mu.Lock()
		m.users--
		e.evictLocked()
		e.mu.Unlock()
	}
	if !ok {
		// Not under ctx: others may be waiting for this compilation, and
		// wazero cannot interrupt one anyway.
		compiled, err := e.rt.CompileModule(context.Background(), bin)
		e.mu.Lock()
		m.compiled, m.err = compiled, err
		if err != nil {
			delete(e.modules, key) // a bad module is not worth keeping
		}
		e.mu.Unlock()
		close(m.ready)
	}
	select {
	case <-m.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if m.err != nil {
		release()
		return nil, nil, m.err
	}
	return m.compiled, release, nil
}

// evictLocked closes the least recently used idle modules beyond
// maxCachedModules.
func (e *Executor) evictLocked() {
	for len(e.modules) > maxCachedModules {
		var oldest [sha256.Size]byte
		var victim *module
		for k, m := range e.modules {
			if m.users == 0 && m.compiled != nil && (victim == nil || m.lastUsed < victim.lastUsed) {
				oldest, victim = k, m
			}
		}
		if victim == nil {
			return
		}
		delete(e.modules, oldest)
		victim.compiled.Close(context.Background())
	}
}
