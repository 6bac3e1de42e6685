// Package sandbox defines how a provider runs a job: the Executor interface
// its executors implement (wasm/, oci/, and the scriptable fake/), the Job
// and Result they exchange, and the helpers every executor shares to check a
// job and collect its outputs safely.
//
// The split of responsibilities is the one Nomad uses for task drivers: the
// provider agent fetches and decrypts inputs into Job.WorkDir, calls
// Executor.Run, streams the logs it is given, and uploads what Run collected
// into Result.OutputDir. An executor confines the job to its work directory,
// enforces its Limits, and reports what the job did; it never talks to the
// network or the ledger.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Limits are the resources a job may use. An executor enforces them and
// reports a breach in Result.Reason.
type Limits struct {
	// MemoryBytes is a hard cap on the job's memory; 0 means the executor's
	// default (wasm: DefaultMemoryBytes).
	MemoryBytes uint64
	// Timeout is the wall time the job may run for, not counting the time
	// the executor spends preparing it (compiling, pulling). Required > 0.
	Timeout time.Duration
	// CPU is the number of cores the job was granted. Advisory for wasm,
	// whose guests run on one thread.
	CPU float64
	// DiskBytes is the most the job may write under its work directory;
	// 0 means DefaultDiskBytes, never unlimited (Disk). Executors enforce
	// it at output collection at least.
	DiskBytes uint64
	// ShmBytes sizes the job's /dev/shm (oci; within its memory); 0: the
	// executor's default.
	ShmBytes uint64
}

// Disk is the disk budget the limits give: DiskBytes, or DefaultDiskBytes
// when it is 0. A job that names no disk (a spec from before the ledger
// refused 0) gets a finite budget, not the provider's whole disk.
func (l Limits) Disk() uint64 {
	if l.DiskBytes == 0 {
		return DefaultDiskBytes
	}
	return l.DiskBytes
}

// DefaultDiskBytes is the disk budget of a job whose Limits.DiskBytes is 0:
// the job spec's default (jobspec.DefaultDisk).
const DefaultDiskBytes = 1 << 30

// DefaultMemoryBytes is the memory cap of a job whose Limits.MemoryBytes is
// 0, for executors that have no better default.
const DefaultMemoryBytes = 256 << 20

// Job is one run of a consumer's program on this provider.
type Job struct {
	// ID is the ledger's job ID. Replicas of a job on different providers
	// share it, so executors may derive deterministic seeds from it.
	ID string
	// Module is, for wasm, the host path of the WebAssembly module file.
	Module string
	// Image is, for oci, the image reference (always by digest).
	Image string
	// Command, for oci, replaces the image's entrypoint (argv[0] first);
	// empty means the image's own.
	Command []string
	// Args are argv[1:]. The wasm executor passes a fixed argv[0] ("job")
	// so that the program's view does not depend on the provider; the oci
	// executor appends them to Command or the image's entrypoint, and
	// they replace the image's default arguments (its CMD).
	Args []string
	// Env is the job's whole environment: nothing of the provider's leaks
	// in.
	Env map[string]string
	// WorkDir is the host directory the job sees as its root "/". The
	// caller has already placed the inputs inside it (WorkDir/in/input.txt
	// is the job's "/in/input.txt"), and removes it after Run.
	WorkDir string
	// Outputs are the guest paths (files or directories) to collect after
	// the run, e.g. "/out". See CleanGuestPath for what is accepted.
	Outputs []string
	Limits  Limits
	// GPUs are the host GPUs assigned to this job (NVML UUIDs or indices),
	// and the only ones it may see (oci: their CDI devices, names the CDI
	// spec of the host's driver gives them). WebAssembly has no GPU access
	// and ignores it.
	GPUs []string
	// Network asks for network access. Executors deny it unless the
	// provider allows it; without it a job has no network at all.
	Network bool
	// NetNS, for oci, is the path of a network namespace the job joins
	// instead of one of its own: a gang member's, which its agent made
	// (NetNSMaker) and put the gang's private network in. Only with
	// Network false.
	NetNS string
	// Deterministic fixes the clock and the randomness the job sees (the
	// default for wasm jobs): the same module, inputs, args, env and job ID
	// then give byte-identical outputs on any machine, which is what lets
	// replicas be compared by hash.
	Deterministic bool
}

// Result is what a job did. Every field but OutputDir describes the job;
// OutputDir is the one thing the caller must clean up.
type Result struct {
	// ExitCode is the program's exit status, or -1 when it did not exit by
	// itself (trap, timeout, cancellation, invalid module).
	ExitCode int
	// Reason says in words how the job ended: "exited 0", "exited 3",
	// "timed out after 10s", "out of memory (limit 256 MiB)", "trap: …",
	// "cancelled", "invalid module: …", "output /out missing".
	Reason string
	// Failed is true for anything but a clean exit 0 with every declared
	// output present and within the limits.
	Failed bool
	// OutputDir is a host directory holding the collected outputs at their
	// guest paths (OutputDir/out/result.txt for the job's
	// "/out/result.txt"). Executors always set it when Run returns a nil
	// error, even for failed jobs (whose outputs may be partial or absent);
	// the caller removes it.
	OutputDir string
	// Started is when the executor began the job (including compilation);
	// Finished is after its outputs were collected.
	Started, Finished time.Time
	// Metered is the run time to bill: from the job's first instruction to
	// its end, excluding compilation or image pull, and the time the
	// provider paused it (Pauser).
	Metered time.Duration
	// CompileTime is how long this run waited for the program to be ready:
	// compiled (wasm), or its image pulled, verified and unpacked (oci).
	// It is reported apart from Metered and never billed; near zero when
	// the program was cached.
	CompileTime time.Duration
	// PeakMemoryBytes is the most memory the job held, where the executor
	// can tell (wasm: the largest linear memory); 0 when unknown.
	PeakMemoryBytes uint64
}

// Executor runs jobs in a sandbox.
//
// Run returns a Result for everything the job itself did, including traps,
// timeouts, running out of memory, a bad module and missing outputs; it
// returns an error only when the provider's side failed (the job was
// malformed, the module file is unreadable, a directory cannot be created).
// logs receives the job's stdout and stderr, interleaved, as they are
// written, so the caller can stream them; it may be nil. The job waits for
// each write, so logs should buffer rather than block on a slow network.
// Run must return promptly once ctx is done, with Reason "cancelled".
//
// Implementations must be safe for concurrent use by multiple goroutines.
type Executor interface {
	// Name is the executor's name in job specs and offers: "wasm", "oci",
	// "fake".
	Name() string
	Run(ctx context.Context, job *Job, logs io.Writer) (*Result, error)
}

// Engined is the optional ability of an executor whose results depend on
// the engine that runs its jobs (the wasm executor: wasmtime or wazero,
// with version and platform). Providers declare it, and the ledger places
// the replicas of a compared job on one engine.
type Engined interface {
	Engine() string
}

// EngineOf returns ex's engine, or "" when ex does not name one.
func EngineOf(ex Executor) string {
	if e, ok := ex.(Engined); ok {
		return e.Engine()
	}
	return ""
}

// NetNSMaker is the optional ability of an executor to make a network
// namespace, holding only loopback, for a job to join (Job.NetNS); release
// lets it go once the job is over.
type NetNSMaker interface {
	NewNetNS(name string) (path string, release func(), err error)
}

// ErrInvalidJob is wrapped by the errors ValidateJob returns.
var ErrInvalidJob = errors.New("invalid job")

// ValidateJob checks what every executor needs of a job: an ID, an existing
// work directory, a positive timeout, sane limits, output paths that
// CleanGuestPath accepts, and args and env an OS can pass (no NUL bytes, no
// "=" in env names). Executor-specific fields (Module, Image) are checked by
// each executor. Errors wrap ErrInvalidJob.
func ValidateJob(job *Job) error {
	if job == nil {
		return fmt.Errorf("%w: nil job", ErrInvalidJob)
	}
	if job.ID == "" {
		return fmt.Errorf("%w: ID is empty", ErrInvalidJob)
	}
	if job.WorkDir == "" {
		return fmt.Errorf("%w: WorkDir is empty", ErrInvalidJob)
	}
	if st, err := os.Stat(job.WorkDir); err != nil {
		return fmt.Errorf("%w: WorkDir: %v", ErrInvalidJob, err)
	} else if !st.IsDir() {
		return fmt.Errorf("%w: WorkDir %s is not a directory", ErrInvalidJob, job.WorkDir)
	}
	if job.Limits.Timeout <= 0 {
		return fmt.Errorf("%w: Limits.Timeout must be positive, got %s", ErrInvalidJob, job.Limits.Timeout)
	}
	if c := job.Limits.CPU; c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		return fmt.Errorf("%w: Limits.CPU must be a non-negative number of cores, got %v", ErrInvalidJob, c)
	}
	for i, a := range job.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: Command[%d] contains a NUL byte", ErrInvalidJob, i)
		}
	}
	for i, a := range job.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: Args[%d] contains a NUL byte", ErrInvalidJob, i)
		}
	}
	for i, g := range job.GPUs {
		if g == "" || strings.ContainsAny(g, ",\x00") {
			return fmt.Errorf("%w: GPUs[%d] %q must be a non-empty device ID without ',' or NUL", ErrInvalidJob, i, g)
		}
	}
	for k, v := range job.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: Env name %q must be non-empty without '=' or NUL", ErrInvalidJob, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%w: Env %s contains a NUL byte", ErrInvalidJob, k)
		}
	}
	if job.NetNS != "" && !filepath.IsAbs(job.NetNS) {
		return fmt.Errorf("%w: NetNS %q is not an absolute path", ErrInvalidJob, job.NetNS)
	}
	for _, o := range job.Outputs {
		if _, err := CleanGuestPath(o); err != nil {
			return fmt.Errorf("%w: Outputs: %v", ErrInvalidJob, err)
		}
	}
	return nil
}

// FormatBytes writes n in binary units the way Reasons use them: "256 MiB",
// "1.5 GiB", "512 B".
func FormatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n)/unit, 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i]
}

// ExitReason is the Reason of a program that exited with code: "exited 3".
func ExitReason(code int) string { return fmt.Sprintf("exited %d", code) }

// TimeoutReason is the Reason of a job stopped by its Limits.Timeout.
func TimeoutReason(d time.Duration) string { return "timed out after " + d.String() }

// OOMReason is the Reason of a job that wanted more than its memory limit.
func OOMReason(limit uint64) string { return "out of memory (limit " + FormatBytes(limit) + ")" }

// DiskReason is the Reason of a job that wrote more than Limits.DiskBytes.
func DiskReason(limit uint64) string { return "disk limit exceeded (limit " + FormatBytes(limit) + ")" }

// ReasonCancelled is the Reason of a job whose context was cancelled.
const ReasonCancelled = "cancelled"

// Service is a long-running program with ports (a ledger service's
// replica): a Job with no outputs and no timeout, which runs until it is
// stopped or exits by itself.
type Service struct {
	// ID names this run; unique among the executor's services.
	ID string
	// Image, Command, Args, Env, GPUs and Network mean what they mean for
	// a Job.
	Image   string
	Command []string
	Args    []string
	Env     map[string]string
	GPUs    []string
	Network bool
	// WorkDir is a host directory the service sees as its writable
	// scratch space; it is empty at start and the caller removes it after
	// Stop.
	WorkDir string
	// Limits bound the service as a Job's do; Timeout is ignored, and
	// DiskBytes bounds what it writes to its scratch space.
	Limits Limits
}

// ServiceRunner is the optional ability of an executor to run services,
// checked at run time as net/http checks for a Flusher. StartService
// prepares and starts svc (pulling its image, which may take a while) and
// returns once its process exists; its stdout and stderr go to logs, as a
// Job's do, for as long as it runs. ctx bounds the start only: the service
// runs until its handle's Stop, or until it exits. An error means it did
// not start (for the job's reasons or the provider's; the message says
// which).
type ServiceRunner interface {
	StartService(ctx context.Context, svc *Service, logs io.Writer) (ServiceHandle, error)
}

// ServiceHandle is a running service. Its methods are safe for concurrent
// use.
type ServiceHandle interface {
	// Dial opens a TCP connection to port on the service's own loopback
	// (inside its network namespace), as a client in the container would.
	Dial(ctx context.Context, port uint16) (net.Conn, error)
	// Done is closed when the service has ended: it exited, or Stop
	// stopped it.
	Done() <-chan struct{}
	// Reason says how it ended ("exited 1", "out of memory (limit …)",
	// "stopped"), once Done is closed; "" before.
	Reason() string
	// Stop kills the service, waits until it is gone and releases what
	// the executor held for it. It may be called more than once.
	Stop() error
}

// ReasonStopped is the Reason of a service that Stop ended.
const ReasonStopped = "stopped"
