package wasm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm/wasi"
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
//     module, which engine) and a childJob (what to run it on), and keeps the pipe open
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
const childProtocol = 3

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
	// CacheDir is the compiled-module cache directory ("": none).
	CacheDir string `json:"cache_dir,omitempty"`
	// Engine is the engine to compile and run the module with.
	Engine string `json:"engine"`
	// Fuel compiles the module to count fuel: its job must then give a
	// budget (childJob.Fuel). Only judge programs do (Executor.RunJudge).
	Fuel bool `json:"fuel,omitempty"`
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
	// TimeoutNS is the job's timeout, which a deterministic guest's
	// virtual sleeps may not add up past (wasi.Config.SleepLimit); the
	// parent enforces it on the real clock. 0 (a parent that does not
	// send it): the sleeps are not bounded.
	TimeoutNS int64 `json:"timeout_ns,omitempty"`
	// ReadOnly runs the guest with wasi.Config.ReadOnly: it may read the
	// work directory and change nothing in it (Executor.RunReadOnly).
	ReadOnly bool `json:"read_only,omitempty"`
	// Fuel is the guest's instruction budget, for a module prepared with
	// childPrepare.Fuel (and only then: 0 otherwise).
	Fuel uint64 `json:"fuel,omitempty"`
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
	// Compiled is true when the module compiled (or came from the cache).
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
	// FuelUsed is the fuel the guest consumed, of a fuel run; OutOfFuel
	// says it ran out (and so was stopped).
	FuelUsed  uint64 `json:"fuel_used,omitempty"`
	OutOfFuel bool   `json:"out_of_fuel,omitempty"`
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

// An engine compiles modules and runs them, in the sandbox process. Each
// binds wasi.Funcs as the module's WASI imports, so that every engine
// shows a job the same world.
type engine interface {
	// prepare compiles bin, or loads it from the compiled-module cache in
	// cacheDir ("": none); with fuel, to count fuel (an engine that
	// cannot fails with an Error). A non-nil message is the result of a
	// failure.
	prepare(bin []byte, cacheDir string, fuel bool) (program, *childMessage)
}

// A program is a module compiled by an engine, ready to run once.
type program interface {
	// run instantiates the module and runs its _start with sys as its
	// WASI, within limit bytes of linear memory and, for a program
	// prepared to count fuel, fuel units of fuel. started is called just
	// before instantiation (the job's clock starts there), grew with each
	// new peak of linear memory while it runs.
	run(sys *wasi.System, limit, fuel uint64, started func(), grew func(peak uint64)) outcome
}

// outcome is how a run ended, as an engine tells it.
type outcome struct {
	// exited: the guest returned from _start (code 0) or called
	// proc_exit (code).
	exited bool
	code   int32
	// trap is the trap's message ("unreachable", "out of bounds memory
	// access"), trace its stack trace for the log.
	trap, trace string
	// invalid is why the module could not be instantiated.
	invalid string
	// oom: the memory limit refused the guest memory.
	oom  bool
	peak uint64
	// fuelUsed is the fuel consumed (a fuel run); outOfFuel: the guest
	// ran out of it.
	fuelUsed  uint64
	outOfFuel bool
}

// guest is a module compiled and ready to run.
type guest struct {
	prog      program
	compileNS int64
	fuel      bool // prepared to count fuel
}

// prepare reads the module and has the engine compile it. A non-nil
// message is the result of a failure.
func prepare(req *childPrepare) (*guest, *childMessage) {
	res := &childMessage{ExitCode: -1}
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
	eng := engines[req.Engine]
	if eng == nil {
		res.Error = fmt.Sprintf("engine %q is not built into this program", req.Engine)
		return nil, res
	}
	t0 := time.Now()
	prog, msg := eng.prepare(bin, req.CacheDir, req.Fuel)
	if msg != nil {
		msg.ExitCode = -1
		msg.CompileNS = time.Since(t0).Nanoseconds()
		return nil, msg
	}
	return &guest{prog: prog, compileNS: time.Since(t0).Nanoseconds(), fuel: req.Fuel}, nil
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
	memLimit := job.MemoryBytes
	if g.fuel != (job.Fuel > 0) {
		// The parent's mistake: a budget for a module that counts no
		// fuel would go unenforced, and none for one that does would
		// stop it at once.
		res.Error = fmt.Sprintf("fuel budget %d for a module prepared with fuel %v", job.Fuel, g.fuel)
		return res
	}

	// This process runs one job, and the guest's linear memory is most of
	// what it holds. Collect only near the job's memory limit: the
	// collector's default pacing ran cycles while memory-heavy guests ran
	// on wazero (whose linear memory is on the Go heap), which made them up
	// to 2.3× slower (`gpunet bench wasm`, the sha256 kernel).
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(int64(min(memLimit, 1<<40)) + 256<<20)

	cfg := wasi.Config{
		Args:          append([]string{argv0}, job.Args...),
		Env:           environ(job.Env),
		Root:          job.WorkDir,
		Stdout:        logs,
		Stderr:        logs,
		Deterministic: job.Deterministic,
		Seed:          seed(job.JobID),
		ReadOnly:      job.ReadOnly,
	}
	if job.DiskBytes > 0 {
		cfg.DiskBytes = int64(min(job.DiskBytes, 1<<62))
	}
	if job.Deterministic {
		cfg.SleepLimit = time.Duration(job.TimeoutNS)
	}
	sys, err := wasi.New(cfg)
	if err != nil {
		res.Error = "guest file system: " + err.Error()
		return res
	}
	defer sys.Close()

	var start time.Time
	out := g.prog.run(sys, memLimit, job.Fuel, func() {
		// The job's clock starts now: the parent starts its timeout when
		// it reads this, and Metered counts from here.
		rep.send(&childMessage{Event: "start"})
		start = time.Now()
	}, func(peak uint64) {
		rep.send(&childMessage{Event: "peak", Peak: peak})
	})
	if !start.IsZero() {
		res.MeteredNS = time.Since(start).Nanoseconds()
	}
	res.PeakMemoryBytes = out.peak
	res.FuelUsed = out.fuelUsed
	switch {
	case out.outOfFuel:
		// Checked first too: the engine saw it as a trap.
		res.OutOfFuel = true
		res.Failed, res.Reason = true, OutOfFuelReason(job.Fuel)
		logs.Notef("%s", res.Reason)
	case sys.SleptOut():
		// Checked first: the engine saw it as an exit (wazero) or a
		// trap (wasmtime).
		res.Failed, res.Reason = true, sleptOutReason(time.Duration(job.TimeoutNS))
		logs.Notef("%s", res.Reason)
	case out.exited:
		res.ExitCode = int(out.code)
		res.Reason = sandbox.ExitReason(res.ExitCode)
		res.Failed = res.ExitCode != 0
	case out.invalid != "":
		res.Failed, res.Reason = true, "invalid module: "+out.invalid
	default:
		msg := out.trap
		if out.trace != "" {
			msg += "\n" + out.trace
		}
		logs.Notef("trap: %s", msg)
		res.Trap = out.trap
		res.Failed, res.Reason = true, "trap: "+out.trap
	}
	if res.Failed && out.oom {
		res.OOM = true
		res.Reason = sandbox.OOMReason(memLimit)
	}
	if sys.DiskExceeded() {
		res.Disk = true
		res.Failed, res.Reason = true, sandbox.DiskReason(job.DiskBytes)
	}
	return res
}

// OutOfFuelReason is the Reason of a run stopped when it had used its
// whole fuel budget (Executor.RunJudge).
func OutOfFuelReason(fuel uint64) string {
	return fmt.Sprintf("out of fuel (budget %d)", fuel)
}

// sleptOutReason is the Reason of a deterministic job stopped at a sleep
// that would take its virtual clock past its timeout: a timeout, said so
// that the job's author sees why it came early.
func sleptOutReason(timeout time.Duration) string {
	return sandbox.TimeoutReason(timeout) + " of sleeps (a deterministic job's clock is virtual: a sleep returns at once, and the sleeps count against the timeout)"
}

// environ is env as NAME=value strings, in name order.
func environ(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + env[k]
	}
	return out
}

// seed is a deterministic job's random seed: from the job ID, which every
// replica of a job shares and nothing else does.
func seed(jobID string) [32]byte {
	return sha256.Sum256([]byte("gpunet/sandbox/wasm rand\x00" + jobID))
}

// noStart is the reason for a module that is not a WASI command.
const noStart = "no _start function (not a WASI command)"

// wasmStackTrace formats frames as the log shows them.
func wasmStackTrace(frames []string) string {
	if len(frames) == 0 {
		return ""
	}
	var b []byte
	b = append(b, "wasm stack trace:"...)
	for _, f := range frames {
		b = append(b, "\n\t"...)
		b = append(b, f...)
	}
	return string(b)
}
