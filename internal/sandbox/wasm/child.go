package wasm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
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

// The sandbox process.
//
// Every job runs in a process of its own, a "sandbox process" started by
// the Executor, so that the Executor can stop a guest at its timeout by
// killing the process: the guest's compiled code then needs no checks for a
// done context (wazero's WithCloseOnContextDone, which made tight loops
// several times slower), and a guest or a wazero bug that crashes the
// process takes only its own job down.
//
// The protocol, between the Executor (parent) and ChildMain (child):
//
//   - The parent starts the child with ChildEnv=ChildEnvValue in its
//     environment, in a process group of its own.
//   - fd 0: the parent writes two JSON values, a childPrepare (which
//     module) and a childJob (what to run it on), and keeps the pipe open
//     for the whole run. The child loads the module as soon as it has read
//     the first, so a spare child (see WithSpares) can wait for its job
//     with the module ready. At EOF (the parent is gone) the child exits.
//   - fd 1: the guest's stdout and stderr, interleaved as written, and the
//     executor's own notes (a trap's stack trace). The parent passes them
//     on to the job's logs.
//   - fd 2: the child's own diagnostics (a Go panic); the parent keeps the
//     start of it to explain a crash.
//   - fd 3: childMessages as JSON lines: "ready" once the module is
//     compiled (or loaded from the cache), "start" when the guest's first
//     instruction is about to run (the job's clock starts there), "peak"
//     when its memory grows, and "result" last, with the outcome.
//   - fd 4: the module file, which the parent opened and hashed (so that
//     the child reads the very bytes the parent checked, even if the file
//     was removed since).
//
// The parent applies the timeout and cancellation by killing the process
// group. A child that ends without a "result" has crashed, and its job
// fails with "sandbox process died: …".

// ChildEnv is the environment variable that makes a process a sandbox
// process: when it is ChildEnvValue, this package's init function runs
// ChildMain and exits before main (or TestMain) starts. Any program that
// links this package can therefore serve as the Executor's child, which is
// why the default command (the running executable itself) also works in
// test binaries and in programs other than gpunet.
const (
	ChildEnv      = "GPUNET_WASM_CHILD"
	ChildEnvValue = "1"
)

// childProtocol is the version of the messages below.
const childProtocol = 1

// The child's fds beyond stdio: the parent's cmd.ExtraFiles.
const (
	reportFD = 3
	moduleFD = 4
)

func init() {
	if os.Getenv(ChildEnv) != ChildEnvValue {
		return
	}
	// The main goroutine is locked to the main thread during init; the
	// guest runs better on a goroutine of its own.
	code := make(chan int)
	go func() { code <- ChildMain(os.Stdin, os.Stdout, os.Stderr) }()
	os.Exit(<-code)
}

// childPrepare is the first message to the child: the module to load.
type childPrepare struct {
	Protocol int `json:"protocol"`
	// ModuleFD is the child's fd holding the module; when 0, the module is
	// read from Module, a host path.
	ModuleFD int    `json:"module_fd,omitempty"`
	Module   string `json:"module,omitempty"`
	// ModuleSHA256 is the hex SHA-256 of the bytes the parent read, which
	// the child checks.
	ModuleSHA256 string `json:"module_sha256,omitempty"`
	// CacheDir is the wazero compilation cache directory ("": none).
	CacheDir string `json:"cache_dir,omitempty"`
}

// childJob is the second message to the child: the run.
type childJob struct {
	JobID string            `json:"job_id"`
	Args  []string          `json:"args,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	// WorkDir is absolute, free of symbolic links, and holds none.
	WorkDir string `json:"work_dir"`
	// MemoryBytes is the memory limit, whole 64 KiB pages.
	MemoryBytes   uint64 `json:"memory_bytes"`
	DiskBytes     uint64 `json:"disk_bytes,omitempty"`
	Deterministic bool   `json:"deterministic,omitempty"`
}

// childMessage is one line on the child's report fd.
type childMessage struct {
	Event string `json:"event"` // "ready", "start", "peak" or "result"
	// Peak is the largest linear memory so far ("peak").
	Peak uint64 `json:"peak,omitempty"`

	// The rest is for "result" (and CompileNS also for "ready").

	// Error is a failure on the provider's side (the module or the cache
	// unreadable): Run returns it as an error rather than a Result.
	Error string `json:"error,omitempty"`
	// Compiled is true when the module compiled (into the disk cache).
	Compiled bool `json:"compiled,omitempty"`
	// ExitCode, Failed and Reason are as in sandbox.Result.
	ExitCode int    `json:"exit_code,omitempty"`
	Failed   bool   `json:"failed,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Trap is the trap message when the guest trapped.
	Trap string `json:"trap,omitempty"`
	// OOM: the memory limit refused the guest memory; Disk: the disk
	// budget refused a write.
	OOM  bool `json:"oom,omitempty"`
	Disk bool `json:"disk,omitempty"`
	// MeteredNS is the guest's run time, CompileNS the time to compile or
	// load the module, both in nanoseconds.
	MeteredNS       int64  `json:"metered_ns,omitempty"`
	CompileNS       int64  `json:"compile_ns,omitempty"`
	PeakMemoryBytes uint64 `json:"peak_memory_bytes,omitempty"`
}

// reporter writes childMessages, one JSON line each.
type reporter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (r *reporter) send(m *childMessage) {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // cannot happen: plain fields
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		_, r.err = r.w.Write(append(b, '\n'))
	}
}

// ChildMain is the sandbox process: it reads a childPrepare and a childJob
// from stdin, runs the job with the guest's output on stdout, and returns
// the process's exit code (0 once it reported a result, whatever the job
// did). Programs need not call it: this package's init function does when
// ChildEnv is set (see ChildEnv). The hidden command "gpunet sandbox-exec"
// calls it too, for running a request by hand: without ChildEnv the
// report goes to stderr.
func ChildMain(stdin io.Reader, stdout, stderr io.Writer) int {
	rep := &reporter{w: stderr}
	protocol := os.Getenv(ChildEnv) == ChildEnvValue
	if protocol {
		f := os.NewFile(reportFD, "report")
		if f == nil {
			fmt.Fprintln(stderr, "sandbox-exec: no report fd")
			return 2
		}
		rep.w = f
	}
	dec := json.NewDecoder(stdin)
	var prep childPrepare
	if err := dec.Decode(&prep); err != nil {
		fmt.Fprintln(stderr, "sandbox-exec: read request:", err)
		return 2
	}
	if prep.Protocol != childProtocol {
		fmt.Fprintf(stderr, "sandbox-exec: request protocol %d, want %d\n", prep.Protocol, childProtocol)
		return 2
	}
	g, m := prepare(&prep)
	if m == nil {
		rep.send(&childMessage{Event: "ready", Compiled: true, CompileNS: g.compileNS})
		var job childJob
		if err := dec.Decode(&job); err != nil {
			// A spare the parent no longer needs, or a parent gone.
			return 3
		}
		if protocol {
			// The parent keeps stdin open while it waits for us: EOF
			// means it is gone, and so should we be. (Linux also kills
			// us then, through Pdeathsig.)
			go func() {
				io.Copy(io.Discard, io.MultiReader(dec.Buffered(), stdin))
				os.Exit(3)
			}()
		}
		logs := sandbox.NewLogWriter(stdout, sandbox.DefaultLogBytes)
		m = g.run(&job, logs, rep)
	}
	m.Event = "result"
	rep.send(m)
	if rep.err != nil {
		fmt.Fprintln(stderr, "sandbox-exec: write report:", rep.err)
		return 2
	}
	return 0
}

// guest is a module compiled and ready to run.
type guest struct {
	rt        wazero.Runtime
	mod       wazero.CompiledModule
	compileNS int64
}

// prepare loads the module and compiles it (or loads it from the cache). A
// non-nil message is the result of a failure.
func prepare(req *childPrepare) (*guest, *childMessage) {
	res := &childMessage{ExitCode: -1}
	ctx := context.Background()
	bin, err := readModule(req)
	if err != nil {
		res.Error = err.Error()
		return nil, res
	}
	if req.ModuleSHA256 != "" {
		if sum := sha256.Sum256(bin); hex.EncodeToString(sum[:]) != req.ModuleSHA256 {
			res.Error = "the module changed while the job started"
			return nil, res
		}
	}
	var cache wazero.CompilationCache
	if req.CacheDir == "" {
		cache = wazero.NewCompilationCache()
	} else if cache, err = wazero.NewCompilationCacheWithDir(req.CacheDir); err != nil {
		res.Error = "compilation cache: " + err.Error()
		return nil, res
	}
	// No WithCloseOnContextDone: the parent stops a guest by killing this
	// process, so the compiled code needs no termination checks. The
	// runtime's memory limit is wasm32's whole 4 GiB; the job's limit is
	// enforced by a memoryCap (see env.go), which tells us when the job
	// ran out of memory.
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(65536)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		res.Error = "instantiate WASI: " + err.Error()
		return nil, res
	}
	t0 := time.Now()
	mod, err := rt.CompileModule(ctx, bin)
	res.CompileNS = time.Since(t0).Nanoseconds()
	if err != nil {
		res.Failed, res.Reason = true, "invalid module: "+err.Error()
		return nil, res
	}
	return &guest{rt: rt, mod: mod, compileNS: res.CompileNS}, nil
}

func readModule(req *childPrepare) ([]byte, error) {
	if req.ModuleFD == 0 {
		b, err := os.ReadFile(req.Module)
		if err != nil {
			return nil, fmt.Errorf("read module: %w", err)
		}
		return b, nil
	}
	f := os.NewFile(uintptr(req.ModuleFD), "module")
	if f == nil {
		return nil, errors.New("read module: no module fd")
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read module: %w", err)
	}
	// ReadAt: the parent's file offset is shared with ours.
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read module: %w", err)
	}
	return b, nil
}

// run runs the guest on job and says what happened.
func (g *guest) run(job *childJob, logs *sandbox.LogWriter, rep *reporter) *childMessage {
	res := &childMessage{ExitCode: -1, Compiled: true, CompileNS: g.compileNS}
	fail := func(reason string) *childMessage {
		res.Failed, res.Reason = true, reason
		return res
	}
	ctx := context.Background()
	mod := g.mod
	if _, ok := mod.ExportedFunctions()["_start"]; !ok {
		return fail("invalid module: no _start function (not a WASI command)")
	}
	memLimit := job.MemoryBytes
	for _, m := range slices.Concat(mod.ImportedMemories(), exportedMemories(mod)) {
		if need := uint64(m.Min()) << 16; need > memLimit {
			res.PeakMemoryBytes = need
			res.OOM = true
			return fail(sandbox.OOMReason(memLimit))
		}
	}

	// This process runs one job, and the guest's linear memory is most of
	// its heap. The collector's default pacing (GOGC=100) ran cycles while
	// memory-heavy guests ran, which cannot be preempted, and made them up
	// to 2.3× slower than on a runtime in a big process (`gpunet bench
	// wasm`, the sha256 kernel; the same with GOGC=off). Collect only near
	// the job's memory limit instead: the guest's memory is capped at it
	// by memCap, and what else the process holds is small.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(int64(min(memLimit, 1<<40)) + 256<<20)

	memCap := &memoryCap{limit: memLimit, onGrow: func(peak uint64) {
		rep.send(&childMessage{Event: "peak", Peak: peak})
	}}
	var budget *diskBudget
	if job.DiskBytes > 0 {
		budget = &diskBudget{limit: int64(min(job.DiskBytes, 1<<62))}
	}
	cfg := moduleConfig(ctx, job, logs, budget)
	instCtx := experimental.WithMemoryAllocator(ctx, memCap)

	// The job's clock starts now: the parent starts its timeout when it
	// reads this, and Metered counts from here.
	rep.send(&childMessage{Event: "start"})
	start := time.Now()
	inst, err := instantiate(instCtx, g.rt, mod, cfg)
	if err == nil {
		_, err = inst.ExportedFunction("_start").Call(ctx)
	}
	res.MeteredNS = time.Since(start).Nanoseconds()
	res.PeakMemoryBytes = memCap.peakBytes()

	var exit *sys.ExitError
	switch {
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
		res.Trap = trapMessage(err)
		res.Failed, res.Reason = true, "trap: "+res.Trap
	}
	if res.Failed && memCap.wasRefused() {
		res.OOM = true
		res.Reason = sandbox.OOMReason(memLimit)
	}
	if budget.wasExceeded() {
		res.Disk = true
		res.Failed, res.Reason = true, sandbox.DiskReason(job.DiskBytes)
	}
	return res
}

// moduleConfig is the guest's whole view of the world.
func moduleConfig(ctx context.Context, req *childJob, logs io.Writer, budget *diskBudget) wazero.ModuleConfig {
	fsc := wazero.NewFSConfig().(sysfs.FSConfig).
		WithSysFSMount(newGuestFS(req.WorkDir, req.Deterministic, budget), "/")
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithArgs(append([]string{argv0}, req.Args...)...).
		WithStdin(strings.NewReader("")).
		WithStdout(logs).
		WithStderr(logs).
		WithFSConfig(fsc)
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		cfg = cfg.WithEnv(k, req.Env[k])
	}
	if req.Deterministic {
		clock := &virtualClock{}
		return cfg.
			WithWalltime(clock.walltime, 1).
			WithNanotime(clock.nanotime, 1).
			WithNanosleep(clock.nanosleep).
			WithRandSource(deterministicRand(req.JobID))
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
