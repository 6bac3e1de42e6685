package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// A compare job's judge program (compare: {program: judge.wasm, fuel: N};
// docs/ledger.md, "Outputs judged within a tolerance"): a WASI command the
// owner wrote, sealed to the job key like a wasm job's module. For each
// pair of judges' outputs the provider runs it in the wasm executor,
// deterministically, with no network, the two output trees as /a and /b
// of a work directory it can read and not change, and args "/a /b", with
// the job's fuel budget (wasm.Executor.RunJudge): an instruction count, the
// same on every judge whatever its speed or load.
//
// Exit 0 says the outputs are the same; any other exit, a trap, running
// out of memory or a module that does not compile says they differ. Every
// judge runs the same module bytes over the same trees in the same
// deterministic sandbox with the same fuel, so honest judges agree.
//
// Running out of fuel on any pair is no verdict on the replicas: the judge
// is the owner's, and it did not decide within the budget the owner gave
// it. The whole round is then judged "every pair different" (as when the
// program cannot be had): every honest judge reveals that same vector, no
// class forms, and the job ends without a majority, no replica slashed as
// a wrong result (errJudgeOutOfFuel). A pair that runs into the
// wall-clock bound first (judgeWallTime, far above what the fuel takes)
// says only that this machine was too slow or busy: the provider commits
// nothing rather than a verdict another judge would not reach.

// judgeRunner is the wasm executor's ability to run a judge program with
// a fuel budget over a work directory it may read and not change
// (wasm.Executor.RunJudge), on an engine that counts fuel (MetersFuel).
type judgeRunner interface {
	RunJudge(ctx context.Context, job *sandbox.Job, fuel uint64, logs io.Writer) (*wasm.JudgeResult, error)
	MetersFuel() bool
}

// judgeRunnerOf is ex's judge runner, looking through the wrappers that
// count its jobs (metrics.go); nil when it has none, or its engine counts
// no fuel (wazero): such an agent runs no judge program, and hands back
// the jobs that would need one (judgeRefusal).
func judgeRunnerOf(ex sandbox.Executor) judgeRunner {
	for ex != nil {
		if r, ok := ex.(judgeRunner); ok {
			if !r.MetersFuel() {
				return nil
			}
			return r
		}
		u, ok := ex.(interface{ Unwrap() sandbox.Executor })
		if !ok {
			return nil
		}
		ex = u.Unwrap()
	}
	return nil
}

// judgeRefusal says why this agent cannot take j, a job with a judge
// program, or "" when it can: the program runs only in a wasm executor
// whose engine counts fuel. Said before the job runs, it is handed back
// (MsgReleaseJob, not slashed), so that the job goes to a provider that
// can judge rather than to one that would later fall silent as a judge.
func (a *Agent) judgeRefusal(j *ledger.Job) string {
	if j.Spec.Compare == nil || j.Spec.Compare.Program == "" {
		return ""
	}
	if judgeRunnerOf(a.o.Sandboxes[ledger.ExecutorWASM]) != nil {
		return ""
	}
	return "cannot run the job's judge program: this provider's wasm executor is missing or its engine (" +
		sandbox.EngineOf(a.o.Sandboxes[ledger.ExecutorWASM]) + ") counts no fuel"
}

// Bounds of one run of a judge program.
const (
	// judgeMinFuelRate is the fuel per second below which a judge's
	// machine is too slow to judge: the wall-clock bound is the fuel
	// budget at this rate. fsumjudge ran 1.7 to 6.6 billion fuel a
	// second on a 2-core machine, busy or less so (BenchmarkFsumJudgeFuel,
	// 8 MiB trees), a tight loop about 1 billion under load
	// (TestProgramJudge), so this is 20–130× below.
	judgeMinFuelRate = 50_000_000
	// minJudgeWallTime is the least wall-clock bound of a pair's run.
	minJudgeWallTime = time.Minute
	// judgeMemory is each run's memory: the same on every judge, so that
	// a judge that wants more runs out of it at the same point on all.
	judgeMemory = 512 << 20
	// judgeLogBytes is how much of a run's output the provider keeps for
	// its log.
	judgeLogBytes = 2 << 10
)

// judgeWallTime is the wall-clock bound of each run of a judge program
// with fuel units of fuel: the time the fuel takes at judgeMinFuelRate,
// at least minJudgeWallTime and at most judgeTimeout. It is a safety
// bound, never a verdict; it is also the bound of the guest's virtual
// sleeps (a deterministic guest's clock), and depends only on the job's
// fuel, so it is the same on every judge.
func judgeWallTime(fuel uint64) time.Duration {
	d := judgeTimeout
	if s := fuel / judgeMinFuelRate; s < uint64(judgeTimeout/time.Second) {
		d = time.Duration(s) * time.Second
	}
	return max(d, minJudgeWallTime)
}

// errJudgeOutOfFuel: the judge program used its whole fuel budget on a
// pair. The round is judged "every pair different" (see above).
var errJudgeOutOfFuel = errors.New("the judge program ran out of fuel")

// programJudge runs one round's judge program over pairs of output trees.
type programJudge struct {
	run    judgeRunner
	module string        // host path of the judge's module
	job    uint64        // the job judged, for the runs' seeds
	dir    string        // scratch, for each pair's work directory
	fuel   uint64        // each run's fuel: the job's compare.fuel
	limit  time.Duration // each run's wall-clock bound: judgeWallTime
}

// same reports whether the judge program says the trees a and b (host
// directories, of judges x < y) are the same. why says how a run that was
// not exit 0 ended. It returns errJudgeOutOfFuel (wrapped) when the
// program ran out of fuel; any other error is this provider's own trouble
// (its disk, a cancelled ctx, a run stopped by the wall-clock bound): then
// it cannot judge.
func (p *programJudge) same(ctx context.Context, x, y int, a, b string) (same bool, why string, err error) {
	work := filepath.Join(p.dir, fmt.Sprintf("pair-%d-%d", x, y))
	if err := os.RemoveAll(work); err != nil {
		return false, "", err
	}
	defer os.RemoveAll(work)
	for _, t := range []struct{ from, to string }{{a, "a"}, {b, "b"}} {
		if err := linkTree(t.from, filepath.Join(work, t.to)); err != nil {
			return false, "", fmt.Errorf("judge work dir: %w", err)
		}
	}
	logs := &headWriter{max: judgeLogBytes}
	res, err := p.run.RunJudge(ctx, &sandbox.Job{
		// The seed of the run's randomness: the same on every judge.
		ID:            fmt.Sprintf("%d/judge/%d-%d", p.job, x, y),
		Module:        p.module,
		Args:          []string{"/a", "/b"},
		WorkDir:       work,
		Limits:        sandbox.Limits{Timeout: p.limit, MemoryBytes: judgeMemory, CPU: 1, DiskBytes: 1},
		Deterministic: true,
	}, p.fuel, logs)
	if err != nil {
		return false, "", fmt.Errorf("run the judge program: %w", err)
	}
	os.RemoveAll(res.OutputDir)
	switch {
	case ctx.Err() != nil:
		// Cancelled, not judged: a verdict now would be this
		// provider's, not the program's.
		return false, "", ctx.Err()
	case res.OutOfFuel:
		return false, res.Reason, fmt.Errorf("%w on replicas %d and %d (budget %d)", errJudgeOutOfFuel, x, y, p.fuel)
	case res.TimedOut:
		return false, res.Reason, fmt.Errorf("the judge program ran past its wall-clock bound %s on replicas %d and %d before its %d fuel was spent: this machine is too slow or busy to judge", p.limit, x, y, p.fuel)
	case res.ExitCode == 0 && !res.Failed:
		return true, "", nil
	}
	why = res.Reason
	if s := logs.String(); s != "" {
		why += ": " + s
	}
	return false, why, nil
}

// linkTree makes dst a copy of the tree src whose files are hard links to
// src's (a judge run can change nothing in them); a file that cannot be
// linked is copied. Anything but directories and regular files is left
// out (seal.UnpackDir makes nothing else).
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			if os.Link(p, to) == nil {
				return nil
			}
			return copyFile(p, to)
		}
		return nil
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// headWriter keeps the first max bytes written to it.
type headWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *headWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.max - len(w.b); n > 0 {
		w.b = append(w.b, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

func (w *headWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// handBack hands j back on chain (MsgReleaseJob) before running it, for
// why: a provider that cannot judge its job's outputs takes no part in it.
func (a *Agent) handBack(ctx context.Context, j *ledger.Job, why string) {
	reason := truncateReason(why)
	if len(reason) > ledger.MaxReleaseLen {
		reason = reason[:ledger.MaxReleaseLen]
	}
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgReleaseJob{JobID: j.ID, Reason: reason}); err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
		a.log.Error("handing the job back", "job", j.ID, "err", err)
		return
	}
	a.log.Warn("job handed back", "job", j.ID, "reason", reason)
}
