package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/compare"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/ledger/verify"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/seal"
)

// Judging a compare job's outputs (docs/ledger.md, "Outputs judged within a
// tolerance"). A replica of a job with a compare rule seals its outputs to
// the owner and to the job key's recipient, so that the job's other
// replicas (which hold the job key) can open them; nobody else can. When
// the replicas' revealed results differ the ledger opens a judging round:
// each replica that revealed a result fetches every judge's outputs,
// unpacks them, compares every pair with compare.Trees within the job's
// tolerance (or runs the job's judge program on it, judgeprogram.go),
// commits the bits (MsgCommitJudgment) and, once the round's
// commit window closed, reveals them (MsgRevealJudgment).

// judgeTimeout bounds one judging step (fetching and comparing the
// outputs, or a reveal). The ledger's windows are reveal_timeout each.
const judgeTimeout = 5 * time.Minute

// A judge's output blob that cannot be downloaded is tried fetchTries
// times, fetchRetry apart, before it is judged different from every other.
const (
	fetchTries = 3
	fetchRetry = 2 * time.Second
)

// pendingJudgment is a judge's vector for one round, kept between its
// commit and its reveal (on disk, so that a restart can reveal).
type pendingJudgment struct {
	Round  uint64      `json:"round"`
	Vector uint64      `json:"vector"`
	Salt   ledger.Hash `json:"salt"`
}

// tolerance is a compare rule's tolerance as the comparator takes it: the
// parts per 10^18 divided by 10^18, each correctly rounded, so the same
// on every judge.
func tolerance(c *ledger.CompareSpec) compare.Tolerance {
	return compare.Tolerance{RTol: float64(c.RTolE18) / 1e18, ATol: float64(c.ATolE18) / 1e18}
}

// isJudge reports whether as judges j's open round: it revealed a result
// and no earlier round settled it.
func isJudge(as *ledger.Assignment) bool {
	return as.Result != nil && as.Outcome != ledger.OutcomeJudgeOutvoted && as.Outcome != ledger.OutcomeJudgeSilent
}

// judgeStep is what this provider has to do in j's judging round, if
// anything: "commit" or "reveal".
func judgeStep(j *ledger.Job, as *ledger.Assignment) string {
	switch {
	case as == nil || !j.Judging || j.Done() || !isJudge(as):
		return ""
	case !j.JudgeRevealing && as.JudgeCommitment == nil:
		return "commit"
	case j.JudgeRevealing && as.JudgeCommitment != nil && as.Judgment == nil:
		return "reveal"
	}
	return ""
}

// judgeAsync runs this provider's step in j's judging round once at a
// time per job.
func (a *Agent) judgeAsync(ctx context.Context, j *ledger.Job, as *ledger.Assignment, step string) {
	a.runs.mu.Lock()
	defer a.runs.mu.Unlock()
	if a.runs.judging == nil {
		a.runs.judging = map[uint64]bool{}
	}
	if a.runs.judging[j.ID] {
		return
	}
	a.runs.judging[j.ID] = true
	a.runs.wg.Add(1)
	go func() {
		defer a.runs.wg.Done()
		jctx, cancel := context.WithTimeout(ctx, judgeTimeout)
		defer cancel()
		log := a.log.With("job", j.ID, "round", j.JudgeRound)
		var err error
		if step == "commit" {
			err = a.commitJudgment(jctx, j, as)
		} else {
			err = a.revealJudgment(jctx, j)
		}
		if err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
			log.Error("judging the replicas' outputs", "step", step, "err", err)
		}
		a.runs.mu.Lock()
		delete(a.runs.judging, j.ID)
		a.runs.mu.Unlock()
	}()
}

// commitJudgment judges every pair of j's judges and commits the vector.
func (a *Agent) commitJudgment(ctx context.Context, j *ledger.Job, as *ledger.Assignment) error {
	r := a.loadJudgment(j.ID)
	if r == nil || r.Round != j.JudgeRound {
		v, err := a.judgeOutputs(ctx, j, as)
		if err != nil {
			return err
		}
		r = &pendingJudgment{Round: j.JudgeRound, Vector: v, Salt: a.jobSecret("gpunet/judgment-salt/v1", j.ID, int64(j.JudgeRound))}
		if err := a.saveJudgment(j.ID, r); err != nil {
			return err
		}
	}
	c := ledger.JudgmentCommitment(j.ID, r.Round, r.Vector, a.o.Key.Address, r.Salt)
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgCommitJudgment{JobID: j.ID, Commitment: c}); err != nil {
		return fmt.Errorf("commit judgment: %w", err)
	}
	a.log.Info("judgment committed", "job", j.ID, "round", r.Round, "vector", strconv.FormatUint(r.Vector, 2))
	return nil
}

// revealJudgment opens this provider's judgment of j's round.
func (a *Agent) revealJudgment(ctx context.Context, j *ledger.Job) error {
	r := a.loadJudgment(j.ID)
	if r == nil || r.Round != j.JudgeRound {
		return fmt.Errorf("the judgment committed in round %d is lost or corrupt (%s)", j.JudgeRound, a.judgmentPath(j.ID))
	}
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgRevealJudgment{JobID: j.ID, Salt: r.Salt, Vector: r.Vector}); err != nil {
		return fmt.Errorf("reveal judgment: %w", err)
	}
	os.Remove(a.judgmentPath(j.ID))
	a.log.Info("judgment revealed", "job", j.ID, "round", r.Round)
	return nil
}

// judgeOutputs fetches, opens and unpacks every judge's outputs of j and
// returns the vector: bit verify.PairBit(x, y) set when the outputs of
// judges x < y are the same within the job's tolerance. Outputs that cannot
// be had (no node serves the blob its replica revealed, after a few tries),
// opened (not sealed to the job key) or unpacked (a malformed archive, over
// the job's disk limit) are the same as nothing: different from every
// other. A replica that reveals a blob it does not serve so gains nothing,
// and cannot make the honest judges fall silent. Only this provider's own
// trouble (its disk) is an error: then it commits nothing.
func (a *Agent) judgeOutputs(ctx context.Context, j *ledger.Job, as *ledger.Assignment) (uint64, error) {
	if len(j.Assignments) > verify.MaxJudged || j.Spec.Compare == nil {
		return 0, fmt.Errorf("job %d cannot be judged here: %d replicas, compare %v", j.ID, len(j.Assignments), j.Spec.Compare)
	}
	key, err := a.jobKey(ctx, j, as)
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(a.o.WorkDir, fmt.Sprintf("judge-%d", j.ID))
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	disk := sandbox.Limits{DiskBytes: j.Spec.Disk}.Disk()
	lim := seal.Limits{MaxBytes: int64(min(disk, math.MaxInt64)), MaxEntries: sandbox.MaxOutputEntries}
	trees := make([]string, len(j.Assignments)) // "" for a replica that is not a judge or could not be opened
	for i := range j.Assignments {
		o := &j.Assignments[i]
		if !isJudge(o) {
			continue
		}
		root := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(root, 0o700); err != nil {
			return 0, err
		}
		err := a.fetchTrying(ctx, j.ID, o.Result.OutputBlob, key, func() error {
			if err := os.RemoveAll(root); err != nil {
				return err
			}
			return os.MkdirAll(root, 0o700)
		}, func(r io.Reader) error {
			if err := seal.UnpackDir(r, root, lim); err != nil {
				return &badOutputs{err}
			}
			return nil
		})
		var bad *badOutputs
		var de *dataError
		switch {
		case err == nil:
			trees[i] = root
		case errors.As(err, &bad) || errors.As(err, &de) || errors.Is(err, errDecrypt):
			a.log.Warn("a judge's outputs cannot be had or opened: judged different from every other", "job", j.ID, "provider", o.Provider.String(), "err", err)
		case ctx.Err() != nil:
			return 0, ctx.Err()
		default:
			return 0, fmt.Errorf("outputs of %s: %w", o.Provider, err)
		}
	}
	// same judges the outputs of judges x < y; why says how they differ.
	var same func(x, y int) (ok bool, why string, err error)
	if j.Spec.Compare.Program != "" {
		pj, err := a.programJudge(ctx, j, key, dir)
		if err != nil {
			return 0, err
		}
		if pj == nil {
			return 0, nil // no program to run: every pair differs
		}
		same = func(x, y int) (bool, string, error) { return pj.same(ctx, x, y, trees[x], trees[y]) }
	} else {
		tol := tolerance(j.Spec.Compare)
		lims := compare.Limits{MaxEntries: sandbox.MaxOutputEntries, MaxBytes: lim.MaxBytes}
		same = func(x, y int) (bool, string, error) {
			d, err := compare.Trees(trees[x], trees[y], tol, lims)
			if err != nil || d == nil {
				return err == nil, "", err
			}
			return false, d.Path + ": " + d.Why, nil
		}
	}
	var v uint64
	for y := range trees {
		for x := range y {
			if trees[x] == "" || trees[y] == "" {
				continue
			}
			ok, why, err := same(x, y)
			if errors.Is(err, errJudgeOutOfFuel) {
				// The owner's judge did not decide within the owner's
				// budget: no verdict on any replica (judgeprogram.go).
				// Every honest judge meets the same pair's end of fuel.
				a.log.Warn("the job's judge program ran out of fuel: every pair judged different, so no replica is slashed as a wrong result", "job", j.ID, "err", err)
				return 0, nil
			}
			if err != nil {
				return 0, fmt.Errorf("compare the outputs of replicas %d and %d: %w", x, y, err)
			}
			if ok {
				v |= verify.PairBit(x, y)
			} else {
				a.log.Info("replicas' outputs differ", "job", j.ID, "a", j.Assignments[x].Provider.String(), "b", j.Assignments[y].Provider.String(), "why", why)
			}
		}
	}
	return v, nil
}

// fetchTrying is fetchDecrypted tried up to fetchTries times, fetchRetry
// apart, while the blob cannot be downloaded; reset undoes what a failed
// try left before the next.
func (a *Agent) fetchTrying(ctx context.Context, job uint64, ref string, key *age.X25519Identity, reset func() error, use func(io.Reader) error) error {
	var err error
	for try := range fetchTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(fetchRetry):
			}
			if err := reset(); err != nil {
				return err
			}
		}
		err = a.fetchDecrypted(ctx, job, ref, key, use)
		var de *dataError
		if !errors.As(err, &de) {
			break // only a download is worth trying again
		}
	}
	return err
}

// programJudge fetches j's judge program and returns what runs it over
// pairs of outputs. It returns nil, nil when there is no program to run
// (its blob cannot be had or opened with the job key): the same for every
// judge, so each judges every pair different. An error is this provider's
// own trouble: it cannot judge.
func (a *Agent) programJudge(ctx context.Context, j *ledger.Job, key *age.X25519Identity, dir string) (*programJudge, error) {
	run := judgeRunnerOf(a.o.Sandboxes[ledger.ExecutorWASM])
	if run == nil {
		return nil, fmt.Errorf("job %d's judge program needs the wasm executor on an engine that counts fuel, and this agent has none", j.ID)
	}
	fuel := j.Spec.Compare.Fuel
	if fuel == 0 {
		// The ledger records every judge program's fuel at submission.
		return nil, fmt.Errorf("job %d's judge program has no fuel budget on chain", j.ID)
	}
	module := filepath.Join(dir, "judge.wasm")
	err := a.fetchTrying(ctx, j.ID, j.Spec.Compare.Program, key, func() error { return nil }, func(r io.Reader) error { return writeFile(module, r) })
	var de *dataError
	switch {
	case errors.As(err, &de) || errors.Is(err, errDecrypt):
		a.log.Warn("the job's judge program cannot be had or opened: every pair judged different", "job", j.ID, "err", err)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("judge program: %w", err)
	}
	return &programJudge{run: run, module: module, job: j.ID, dir: dir, fuel: fuel, limit: judgeWallTime(fuel)}, nil
}

// badOutputs: a judge's outputs decrypted but are not an archive the job
// could have written.
type badOutputs struct{ err error }

func (e *badOutputs) Error() string { return "outputs: " + e.err.Error() }

func (a *Agent) judgmentPath(id uint64) string {
	return filepath.Join(a.o.WorkDir, "judgments", fmt.Sprintf("%d.json", id))
}

// loadJudgment returns the kept judgment of job id, or nil.
func (a *Agent) loadJudgment(id uint64) *pendingJudgment {
	return loadJSON[pendingJudgment](a.judgmentPath(id))
}

func (a *Agent) saveJudgment(id uint64, r *pendingJudgment) error {
	return saveJSON(a.judgmentPath(id), r)
}
