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

	"github.com/gpunet/gpunet/internal/sandbox"
)

// A compare job's judge program (compare: {program: judge.wasm};
// docs/ledger.md, "Outputs judged within a tolerance"): a WASI command the
// owner wrote, sealed to the job key like a wasm job's module. For each
// pair of judges' outputs the provider runs it in the wasm executor,
// deterministically, with no network, the two output trees as /a and /b
// of a work directory it can read and not change (RunReadOnly), and args
// "/a /b". Exit 0 says the outputs are the same; any other exit, a trap,
// running out of memory or time, or a module that does not compile says
// they differ. Every judge runs the same module bytes over the same trees
// in the same deterministic sandbox, so honest judges agree.

// readOnlyRunner is the wasm executor's ability to run a guest over a work
// directory it may read and not change (wasm.Executor.RunReadOnly).
type readOnlyRunner interface {
	RunReadOnly(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error)
}

// readOnlyOf is ex's read-only runner, looking through the wrappers that
// count its jobs (metrics.go); nil when it has none.
func readOnlyOf(ex sandbox.Executor) readOnlyRunner {
	for ex != nil {
		if r, ok := ex.(readOnlyRunner); ok {
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

// Bounds of one run of a judge program.
const (
	// maxJudgePairTime is the most one pair's run may take; judgePairTime
	// gives less when there are many pairs.
	maxJudgePairTime = time.Minute
	// minJudgePairTime is the least it is given.
	minJudgePairTime = time.Second
	// judgeMemory is each run's memory: the same on every judge, so that
	// a judge that wants more runs out of it at the same point on all.
	judgeMemory = 512 << 20
	// judgeLogBytes is how much of a run's output the provider keeps for
	// its log.
	judgeLogBytes = 2 << 10
)

// judgePairTime is the time each run of a judge program gets when a round
// has pairs pairs to judge and the chain's reveal_timeout is reveal: all
// of them within half the commit window and half of this provider's own
// judgeTimeout, the rest left for fetching the outputs and committing.
// It depends only on the chain's state, so every judge uses the same.
func judgePairTime(reveal time.Duration, pairs int) time.Duration {
	if pairs < 1 {
		pairs = 1
	}
	d := min(reveal, judgeTimeout) / time.Duration(2*pairs)
	return max(min(d, maxJudgePairTime), minJudgePairTime)
}

// programJudge runs one round's judge program over pairs of output trees.
type programJudge struct {
	run    readOnlyRunner
	module string        // host path of the judge's module
	job    uint64        // the job judged, for the runs' seeds
	dir    string        // scratch, for each pair's work directory
	limit  time.Duration // each run's time
}

// same reports whether the judge program says the trees a and b (host
// directories, of judges x < y) are the same. It returns an error only for
// this provider's own trouble (its disk, a cancelled ctx): then it cannot
// judge at all. why says how a run that was not exit 0 ended.
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
	res, err := p.run.RunReadOnly(ctx, &sandbox.Job{
		// The seed of the run's randomness: the same on every judge.
		ID:            fmt.Sprintf("%d/judge/%d-%d", p.job, x, y),
		Module:        p.module,
		Args:          []string{"/a", "/b"},
		WorkDir:       work,
		Limits:        sandbox.Limits{Timeout: p.limit, MemoryBytes: judgeMemory, CPU: 1, DiskBytes: 1},
		Deterministic: true,
	}, logs)
	if err != nil {
		return false, "", fmt.Errorf("run the judge program: %w", err)
	}
	os.RemoveAll(res.OutputDir)
	if ctx.Err() != nil {
		// Cancelled, not judged: a verdict now would be this
		// provider's, not the program's.
		return false, "", ctx.Err()
	}
	if res.ExitCode == 0 && !res.Failed {
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
