// Package fake is a scriptable sandbox.Executor for tests of the code that
// drives executors (the provider agent, the devnet). A Behavior decides
// what each job does; the ready-made ones echo inputs to outputs, fail,
// sleep or block. Whatever the behaviour, results have the real executors'
// shape: outputs are real files collected with sandbox.CollectOutputs into
// a new OutputDir, limits and cancellation give the same Reasons, and every
// job is recorded.
package fake

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// Behavior is what a fake job does. It works in job.WorkDir like a real
// program would (reading inputs, writing outputs at their guest paths under
// it) and writes its output to logs. It returns the job's ExitCode and
// Reason (and Failed, if it fails for another reason than its exit code);
// the Executor then collects the outputs, fills in times, and turns a
// clean exit with missing outputs into a failure, as the real executors
// do. An error is a provider failure and is returned from Run as is.
type Behavior func(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error)

// Executor runs jobs by calling its Behavior. It is safe for concurrent
// use.
type Executor struct {
	behave Behavior
	name   string

	mu   sync.Mutex
	jobs []sandbox.Job

	service  ServiceBehavior // service.go
	services []*Service

	pause  sandbox.PauseSet
	pauses int // Pause calls
	frozen int // runs marked paused now
}

var _ sandbox.Executor = (*Executor)(nil)

// New returns an executor that runs every job with b.
func New(b Behavior) *Executor { return &Executor{behave: b, name: "fake"} }

// WithName makes the executor call itself name (e.g. "wasm", to stand in
// for a real one) and returns it.
func (e *Executor) WithName(name string) *Executor {
	e.name = name
	return e
}

// Name returns "fake" or the name given to WithName.
func (e *Executor) Name() string { return e.name }

// Engine returns "fake-1": standing in for the wasm executor, the fake
// declares an engine as the real one does (wasm.Executor.Engine), so
// that replicas of a compared job can be placed on fakes alike.
func (e *Executor) Engine() string { return "fake-1" }

// Jobs returns copies of the jobs Run was given, in order.
func (e *Executor) Jobs() []sandbox.Job {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]sandbox.Job, len(e.jobs))
	copy(out, e.jobs)
	return out
}

// Run validates job like a real executor, records it, runs the behaviour
// under the job's timeout, and collects the outputs. The behaviour's ctx
// ends at the timeout; a behaviour that returns after its ctx ended gets
// Reason "timed out after …" or "cancelled", whatever it returned.
func (e *Executor) Run(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
	if err := sandbox.ValidateJob(job); err != nil {
		return nil, err
	}
	e.mu.Lock()
	rec := *job
	rec.Args = append([]string(nil), job.Args...)
	rec.Outputs = append([]string(nil), job.Outputs...)
	if job.Env != nil {
		rec.Env = make(map[string]string, len(job.Env))
		for k, v := range job.Env {
			rec.Env[k] = v
		}
	}
	e.jobs = append(e.jobs, rec)
	e.mu.Unlock()

	pm, err := e.pause.Join(ctx, e.markFrozen(+1), e.markFrozen(-1))
	if err != nil {
		// Cancelled while a pause held its start back.
		res := &sandbox.Result{ExitCode: -1, Failed: true, Reason: sandbox.ReasonCancelled, Started: time.Now()}
		if err := sandbox.Finish(job, res); err != nil {
			return nil, err
		}
		return res, nil
	}
	defer pm.Leave()
	started := time.Now()
	runCtx, cancel := pm.WithTimeout(ctx, job.Limits.Timeout, errTimeout)
	defer cancel()
	out := sandbox.NewLogWriter(logs, sandbox.DefaultLogBytes)
	res, err := e.behave(runCtx, job, out)
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &sandbox.Result{Reason: sandbox.ExitReason(0)}
	}
	res.Started = started
	res.Metered = max(0, time.Since(started)-pm.Paused())
	if res.ExitCode != 0 {
		res.Failed = true
	}
	if runCtx.Err() != nil {
		res.ExitCode, res.Failed, res.Reason = -1, true, sandbox.ReasonCancelled
		if context.Cause(runCtx) == errTimeout {
			res.Reason = sandbox.TimeoutReason(job.Limits.Timeout)
		}
	}
	if err := sandbox.Finish(job, res); err != nil {
		return nil, err
	}
	return res, nil
}

var errTimeout = fmt.Errorf("fake: job timed out")

var _ sandbox.Pauser = (*Executor)(nil)

// Pause implements sandbox.Pauser as the real executors do, but for the
// processes: a fake job's behaviour is Go code that goes on running. The
// jobs running are marked paused (Pauses counts them) until resume, their
// timeout and Metered leave the pause out, and jobs that start meanwhile
// wait for it to end.
func (e *Executor) Pause(ctx context.Context) (resume func() error, paused int, err error) {
	e.mu.Lock()
	e.pauses++
	e.mu.Unlock()
	return e.pause.Pause(ctx)
}

// Pauses returns how many times Pause was called, and how many of the
// jobs running are paused now.
func (e *Executor) Pauses() (calls, frozen int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pauses, e.frozen
}

func (e *Executor) markFrozen(d int) func() error {
	return func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.frozen += d
		return nil
	}
}

// Exit is the result of a program that exited with code: the Result a
// Behavior returns in the common case.
func Exit(code int) *sandbox.Result {
	return &sandbox.Result{ExitCode: code, Reason: sandbox.ExitReason(code), Failed: code != 0}
}

// Echo behaves like a program that copies its inputs to its outputs: every
// regular file under the work dir that is not inside a declared output is
// copied into the first declared output, which is taken to be a directory,
// at the same relative path (the job's "/in/a.txt" becomes "/out/in/a.txt"
// for outputs ["/out"]). It logs one line per file and exits 0. The outputs
// depend only on the inputs, as a deterministic job's should.
func Echo() Behavior {
	return func(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
		if err := echo(job, logs); err != nil {
			return nil, err
		}
		return Exit(0), nil
	}
}

func echo(job *sandbox.Job, logs io.Writer) error {
	var outs []string
	for _, o := range job.Outputs {
		c, err := sandbox.CleanGuestPath(o)
		if err != nil {
			return err
		}
		outs = append(outs, c)
	}
	fmt.Fprintf(logs, "echo: args %q\n", job.Args)
	inOutput := func(p string) bool {
		for _, o := range outs {
			if o == "/" || p == o || strings.HasPrefix(p, o+"/") {
				return true
			}
		}
		return false
	}
	type file struct{ guest, host string }
	var inputs []file
	err := filepath.WalkDir(job.WorkDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(job.WorkDir, p)
		guest := path.Join("/", filepath.ToSlash(rel))
		if inOutput(guest) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			inputs = append(inputs, file{guest, p})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fake: read inputs: %w", err)
	}
	for _, in := range inputs {
		data, err := os.ReadFile(in.host)
		if err != nil {
			return fmt.Errorf("fake: read input: %w", err)
		}
		if len(outs) > 0 && outs[0] != "/" {
			if err := writeGuestFile(job, path.Join(outs[0], in.guest), data); err != nil {
				return err
			}
		}
		fmt.Fprintf(logs, "echo: %s (%d bytes)\n", in.guest, len(data))
	}
	return nil
}

// Write behaves like a program that writes files (guest path → contents)
// and exits 0.
func Write(files map[string]string) Behavior {
	return func(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
		for p, content := range files {
			if err := writeGuestFile(job, p, []byte(content)); err != nil {
				return nil, err
			}
			fmt.Fprintf(logs, "wrote %s\n", p)
		}
		return Exit(0), nil
	}
}

// Fail behaves like a job that fails with the given exit code and Reason
// (e.g. Fail(2, "out of memory (limit 256 MiB)"), or Fail(-1, "trap:
// unreachable") for one that did not exit by itself); an empty reason means
// "exited CODE". It writes the reason to its logs.
func Fail(code int, reason string) Behavior {
	return func(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
		if reason == "" {
			reason = sandbox.ExitReason(code)
		}
		fmt.Fprintln(logs, reason)
		return &sandbox.Result{ExitCode: code, Failed: true, Reason: reason}, nil
	}
}

// Block behaves like a program that never ends: it returns when ctx is done,
// that is when the job's timeout passes ("timed out after …") or its caller
// cancels ("cancelled").
func Block() Behavior {
	return func(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
		fmt.Fprintln(logs, "blocking")
		<-ctx.Done()
		return Exit(-1), nil
	}
}

// Sleep behaves like Echo after running for d; a timeout or cancellation
// before then ends it as Block does.
func Sleep(d time.Duration) Behavior {
	return func(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return Echo()(ctx, job, logs)
		case <-ctx.Done():
			return Exit(-1), nil
		}
	}
}

// writeGuestFile writes a file at guest path p under the job's work dir.
func writeGuestFile(job *sandbox.Job, p string, data []byte) error {
	c, err := sandbox.CleanGuestPath(p)
	if err != nil {
		return err
	}
	host := filepath.Join(job.WorkDir, filepath.FromSlash(c))
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return fmt.Errorf("fake: %w", err)
	}
	if err := os.WriteFile(host, data, 0o644); err != nil {
		return fmt.Errorf("fake: %w", err)
	}
	return nil
}
