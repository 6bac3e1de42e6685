package provider

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/seal"
)

// Running jobs. Each poll the agent compares the jobs the ledger assigns to
// it with the runs it has: it starts a run for an assigned job whose key was
// granted, and cancels a run whose job went elsewhere or ended. A run
// fetches and decrypts the module and inputs, starts the job on the ledger,
// runs it in its executor, uploads the outputs and logs encrypted to the
// job's owner, and commits the result.

// maxLogBytes bounds the log a run keeps for the owner.
const maxLogBytes = 8 << 20

type runs struct {
	mu   sync.Mutex
	byID map[uint64]context.CancelFunc
	wg   sync.WaitGroup
	// revealing marks the jobs whose reveal is in flight.
	revealing map[uint64]bool
	// handover marks the jobs whose key handover (request or answer) is
	// in flight.
	handover map[uint64]bool
	// fails tracks the jobs whose data could not be fetched
	// (datafetch.go).
	fails fetchFailures
	// preempted marks the jobs a higher tier preempted here
	// (Assignment.PreemptAt) whose run was asked to checkpoint and stop.
	preempted map[uint64]bool
	// judging marks the jobs whose judging step (judge.go) is in flight.
	judging map[uint64]bool
	// gangPlacement is, for a gang's run, the placement it runs
	// (gangPlacement): a gang stopped and placed again on this provider
	// (as its surviving members often are) is a new member, whose run
	// must not be the old one's.
	gangPlacement map[uint64]uint64
}

// syncJobs starts and stops runs to match the ledger.
func (a *Agent) syncJobs(ctx context.Context) error {
	list, err := a.o.Chain.ProviderJobs(ctx, a.o.Key.Address)
	if err != nil {
		return err
	}
	me := a.o.Key.Address
	want := map[uint64]bool{}
	for _, j := range list.Jobs {
		as := assignmentOf(j, me)
		if step := judgeStep(j, as); step != "" {
			// The replicas' outputs differ: judge them (judge.go).
			a.judgeAsync(ctx, j, as, step)
			continue
		}
		if as != nil && as.Commitment != nil && as.Result == nil && j.Revealing && !j.Done() {
			a.runs.mu.Lock()
			busy := a.runs.revealing[j.ID]
			if !busy {
				a.runs.revealing[j.ID] = true
				a.runs.wg.Add(1)
				go func() {
					defer a.runs.wg.Done()
					rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
					a.reveal(rctx, j)
					a.runs.mu.Lock()
					delete(a.runs.revealing, j.ID)
					a.runs.mu.Unlock()
				}()
			}
			a.runs.mu.Unlock()
			continue
		}
		if as != nil && !j.Done() && needsHandover(j, as) {
			a.handOverAsync(ctx, j, as)
		}
		if as == nil || as.Result != nil || as.Commitment != nil || as.KeyGrant == nil || j.Done() {
			continue
		}
		want[j.ID] = true
		checkpointing := as.PreemptAt != 0 && a.ckpts.get(j.ID) != nil
		a.runs.mu.Lock()
		cancelRun, running := a.runs.byID[j.ID]
		if running && j.Spec.Gang() {
			if p, ok := a.runs.gangPlacement[j.ID]; ok && p != gangPlacement(j, as) {
				// Placed here again since the run began: the run is the
				// earlier placement's, with its keys and its network.
				// Stop it; the new member's run starts once it is gone.
				a.log.Info("gang placed here again: stopping the run of its earlier placement", "job", j.ID, "placement", gangPlacement(j, as))
				delete(a.runs.gangPlacement, j.ID)
				cancelRun()
				a.runs.mu.Unlock()
				continue
			}
		}
		if as.PreemptAt != 0 {
			// A higher tier takes this slot at PreemptAt: checkpoint and
			// stop the run (once), and start no new one; the ledger
			// requeues the job, which resumes elsewhere from the
			// checkpoint. A run without checkpoints goes on: it may still
			// finish within the grace.
			if running && checkpointing && !a.runs.preempted[j.ID] {
				if a.runs.preempted == nil {
					a.runs.preempted = map[uint64]bool{}
				}
				a.runs.preempted[j.ID] = true
				grace := time.Unix(as.PreemptAt, 0).Sub(a.clk.Now())
				a.runs.wg.Add(1)
				go func() {
					defer a.runs.wg.Done()
					err := a.StopWithCheckpoint(ctx, j.ID, max(grace, time.Second))
					a.log.Info("job preempted by a higher tier: checkpointed and stopped", "job", j.ID, "err", err)
				}()
			}
			if !running || a.runs.preempted[j.ID] {
				a.runs.mu.Unlock()
				continue
			}
		}
		if r := a.loadReveal(j.ID); !running && r != nil && r.AssignedAt == as.AssignedAt && j.Spec.Checked() {
			// Committed already (the chain does not show it yet, or the
			// commit was lost): send the same commit again, do not run
			// the job again.
			if !a.runs.revealing[j.ID] {
				a.runs.revealing[j.ID] = true
				a.runs.wg.Add(1)
				go func() {
					defer a.runs.wg.Done()
					cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
					if _, err := a.o.Chain.SendMsg(cctx, a.o.Key, 0, r.commit(j.ID, me)); err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
						a.log.Debug("commit sent again", "job", j.ID, "err", err)
					}
					a.runs.mu.Lock()
					delete(a.runs.revealing, j.ID)
					a.runs.mu.Unlock()
				}()
			}
			a.runs.mu.Unlock()
			continue
		}
		if !running && !a.runs.fails.ready(j.ID, as.AssignedAt, a.clk.Now()) {
			// Its data could not be fetched: wait for the backoff.
			a.runs.mu.Unlock()
			continue
		}
		if !running {
			rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			a.runs.byID[j.ID] = cancel
			if j.Spec.Gang() {
				if a.runs.gangPlacement == nil {
					a.runs.gangPlacement = map[uint64]uint64{}
				}
				a.runs.gangPlacement[j.ID] = gangPlacement(j, as)
			}
			a.runs.wg.Add(1)
			go func() {
				defer a.runs.wg.Done()
				a.runJob(rctx, j, as.StartedAt != 0)
				a.runs.mu.Lock()
				delete(a.runs.byID, j.ID)
				a.runs.mu.Unlock()
			}()
		}
		a.runs.mu.Unlock()
	}
	a.runs.fails.keepOnly(want)
	a.runs.mu.Lock()
	for id := range a.runs.preempted {
		if !want[id] {
			delete(a.runs.preempted, id)
		}
	}
	for id := range a.runs.gangPlacement {
		if !want[id] {
			delete(a.runs.gangPlacement, id)
		}
	}
	for id, cancel := range a.runs.byID {
		if !want[id] {
			a.log.Info("job no longer ours; stopping it", "job", id)
			cancel()
		}
	}
	a.runs.mu.Unlock()
	return nil
}

// stopRuns cancels every run and waits for them.
func (a *Agent) stopRuns() {
	a.runs.mu.Lock()
	for _, cancel := range a.runs.byID {
		cancel()
	}
	a.runs.mu.Unlock()
	a.runs.wg.Wait()
	a.hw.inflight.Wait()
}

func assignmentOf(j *ledger.Job, me address.Address) *ledger.Assignment {
	for i := range j.Assignments {
		if j.Assignments[i].Provider == me {
			return &j.Assignments[i]
		}
	}
	return nil
}

// runJob runs one job to its committed result. Failures of the provider's
// own side are logged and not committed: the ledger reassigns the job at its
// deadline.
func (a *Agent) runJob(ctx context.Context, j *ledger.Job, started bool) {
	log := a.log.With("job", j.ID)
	if why := a.judgeRefusal(j); why != "" {
		a.handBack(ctx, j, why)
		return
	}
	res, err := a.execute(ctx, j, started)
	if ctx.Err() != nil {
		log.Info("job run stopped", "reason", context.Cause(ctx))
		return
	}
	var de *dataError
	if errors.As(err, &de) {
		a.dataFailed(ctx, j, err)
		return
	}
	if err != nil {
		log.Error("job run failed on this provider; the ledger will reassign it", "err", err)
		return
	}
	a.runs.fails.forget(j.ID)
	if a.o.Faults.wrongOutput(j.ID) {
		// Fault injection (Options.Faults): claim another result.
		res.ManifestHash[0] ^= 0xFF
		log.Warn("FAULT INJECTION: committing a wrong result")
	}
	msg := &ledger.MsgCommitResult{JobID: j.ID, MeteredSeconds: res.MeteredSeconds}
	if j.Spec.Checked() {
		// Commit now, reveal when every replica has committed: the
		// commitment is salted and bound to this provider, so it tells
		// other replicas nothing.
		as := assignmentOf(j, a.o.Key.Address)
		r := &pendingReveal{Salt: a.resultSalt(j.ID, as.AssignedAt), Result: *res, AssignedAt: as.AssignedAt}
		if err := a.saveReveal(j.ID, r); err != nil {
			log.Error("keep the result to reveal", "err", err)
			return
		}
		msg = r.commit(j.ID, a.o.Key.Address)
	} else {
		msg.Result = res
	}
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, msg); err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
		if ctx.Err() != nil {
			// The run was stopped while the commit waited for its block:
			// usually because the block landed and the job, committed, is
			// no longer this run's. A commit that did not land is sent
			// again from what was kept (checked jobs), or the ledger
			// reassigns the job at its deadline.
			log.Info("stopped waiting for the result's block", "reason", context.Cause(ctx))
			return
		}
		log.Error("commit result", "err", err)
		return
	}
	log.Info("job done", "failed", res.Failed, "reason", res.Reason, "metered_seconds", res.MeteredSeconds, "checked", j.Spec.Checked())
}

// dataFailed handles a run that could not get its job's data: back off,
// say why once, and hand the job back when it has failed long enough.
func (a *Agent) dataFailed(ctx context.Context, j *ledger.Job, err error) {
	log := a.log.With("job", j.ID)
	as := assignmentOf(j, a.o.Key.Address)
	if as == nil {
		return
	}
	logIt, next, release := a.runs.fails.failed(j.ID, as.AssignedAt, a.clk.Now(), err)
	if logIt {
		log.Warn("cannot get the job's data; trying again later, and handing the job back if it keeps failing", "err", err, "next_try", next.Sub(a.clk.Now()).Round(time.Second))
	}
	if !release {
		return
	}
	reason := truncateReason("could not get the job's data: " + err.Error())
	if len(reason) > ledger.MaxReleaseLen {
		reason = reason[:ledger.MaxReleaseLen]
	}
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgReleaseJob{JobID: j.ID, Reason: reason}); err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
		log.Error("handing the job back", "err", err)
		return
	}
	log.Warn("job handed back: its data could not be fetched", "reason", reason)
}

// pendingReveal is what a provider keeps between committing a checked
// job's result and revealing it (on disk, so that a restart can reveal).
// It is also the commit itself: while the chain does not show the
// commitment yet, the agent sends it again from here instead of running the
// job again.
type pendingReveal struct {
	Salt       ledger.Hash      `json:"salt"`
	Result     ledger.JobResult `json:"result"`
	AssignedAt int64            `json:"assigned_at"` // the assignment it answers
}

func (r *pendingReveal) commit(id uint64, me address.Address) *ledger.MsgCommitResult {
	c := ledger.ResultCommitment(r.Result.ManifestHash, me, r.Salt)
	return &ledger.MsgCommitResult{JobID: id, Commitment: &c, MeteredSeconds: r.Result.MeteredSeconds}
}

// resultSalt is the salt of this provider's commitment to a job's result:
// secret (derived from its private key) and the same if the job runs again
// on the same assignment, so a re-run of a deterministic job commits to
// the same value.
func (a *Agent) resultSalt(id uint64, assignedAt int64) ledger.Hash {
	return a.jobSecret("gpunet/result-salt/v1", id, assignedAt)
}

// jobSecret derives a secret of this provider's for one assignment of a
// job: SHA-256 of tag, its private key's seed, the job and the assignment
// time, so the same after a restart.
func (a *Agent) jobSecret(tag string, id uint64, assignedAt int64) ledger.Hash {
	h := sha256.New()
	h.Write([]byte(tag + "\x00"))
	h.Write(a.o.Key.PrivateKey().Seed())
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], id)
	binary.BigEndian.PutUint64(b[8:], uint64(assignedAt))
	h.Write(b[:])
	var s ledger.Hash
	h.Sum(s[:0])
	return s
}

// loadReveal returns the kept result of job id, or nil.
func (a *Agent) loadReveal(id uint64) *pendingReveal {
	return loadJSON[pendingReveal](a.revealPath(id))
}

// loadJSON reads the JSON file at path into a new T: nil when the file is
// missing or does not decode (what the agent keeps across restarts).
func loadJSON[T any](path string) *T {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var v T
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	return &v
}

// saveJSON writes v to path as JSON, whole or not at all (a temporary
// file renamed over it), making its directory.
func saveJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (a *Agent) revealPath(id uint64) string {
	return filepath.Join(a.o.WorkDir, "reveals", fmt.Sprintf("%d.json", id))
}

func (a *Agent) saveReveal(id uint64, r *pendingReveal) error {
	return saveJSON(a.revealPath(id), r)
}

// reveal opens this provider's commitment for job j.
func (a *Agent) reveal(ctx context.Context, j *ledger.Job) {
	log := a.log.With("job", j.ID)
	r := a.loadReveal(j.ID)
	if r == nil {
		log.Error("cannot reveal: the committed result is lost or corrupt", "path", a.revealPath(j.ID))
		return
	}
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgRevealResult{JobID: j.ID, Salt: r.Salt, Result: r.Result}); err != nil {
		log.Error("reveal result", "err", err)
		return
	}
	os.Remove(a.revealPath(j.ID))
	log.Info("result revealed")
}

func (a *Agent) execute(ctx context.Context, j *ledger.Job, started bool) (*ledger.JobResult, error) {
	s := &j.Spec
	ex, ok := a.o.Sandboxes[s.Executor]
	if !ok {
		return nil, fmt.Errorf("no %s executor on this provider", s.Executor)
	}
	// WebAssembly has no GPU access; only containers are given devices.
	var gpus []string
	if s.Executor == "oci" {
		var err error
		if gpus, err = a.gpus.take(j.ID, s); err != nil {
			return nil, err
		}
		defer a.gpus.release(j.ID)
	}
	as := assignmentOf(j, a.o.Key.Address)
	// Each step before MsgStartJob says when it begins: a run that stalls
	// there (a job left "waiting for the provider to start", seen under
	// CI load) shows in the log where it stopped.
	prep := a.log.With("job", j.ID)
	prep.Info("job assigned: unwrapping its key")
	jobKey, err := a.jobKey(ctx, j, as)
	if err != nil {
		return nil, err
	}
	var member *gangMember
	if s.Gang() {
		// Post this member's key first: the others wait for it while
		// this one fetches its data.
		if member, err = a.joinGang(ctx, j, as); err != nil {
			return nil, err
		}
	}
	prep.Info("job assigned: fetching its program and inputs")
	dir := filepath.Join(a.o.WorkDir, fmt.Sprintf("job-%d", j.ID))
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	module := ""
	if s.Executor == "wasm" {
		module = filepath.Join(dir, "module.wasm")
		if err := a.fetchDecrypted(ctx, j.ID, s.Module, jobKey, func(r io.Reader) error { return writeFile(module, r) }); err != nil {
			return nil, fmt.Errorf("module: %w", err)
		}
	}
	// A job recorded before the ledger refused disk 0 gets the sandbox's
	// finite default, never the provider's whole disk.
	// The timeout is what checkpoints the job resumed from left of it.
	limits := sandbox.Limits{MemoryBytes: s.Memory, Timeout: time.Duration(j.RunBudget()) * time.Second, CPU: float64(s.CPUMilli) / 1000, DiskBytes: s.Disk}
	limits.DiskBytes = limits.Disk()
	limits.ShmBytes = s.Shm
	if j.InputBlob != "" {
		lim := seal.Limits{MaxBytes: int64(min(limits.DiskBytes, math.MaxInt64)), MaxEntries: sandbox.MaxOutputEntries}
		if err := a.fetchDecrypted(ctx, j.ID, j.InputBlob, jobKey, func(r io.Reader) error { return seal.UnpackDir(r, root, lim) }); err != nil {
			return nil, fmt.Errorf("inputs: %w", err)
		}
	}
	for _, in := range s.URLInputs {
		if err := fetchURLInput(ctx, a.urlClient(), in, root, int64(min(limits.DiskBytes, math.MaxInt64))); err != nil {
			return nil, err
		}
	}
	resume, err := a.restoreCheckpoint(ctx, j, jobKey, root, limits.DiskBytes, started)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var gang *gangNet
	if member != nil {
		if gang, err = a.prepareGang(ctx, ex, j, as, member, root); err != nil {
			return nil, err
		}
		defer gang.close()
	}
	if !started {
		prep.Info("job assigned: data fetched; starting it")
		start := &ledger.MsgStartJob{JobID: j.ID}
		if resume != nil && (resume.seq != j.ResumeSeq || resume.note != "") {
			start.ResumeSeq, start.ResumeNote = resume.seq, truncateReason(resume.note)
		}
		// No need to wait for the block: the result, sent later with the
		// next sequence, cannot land before it.
		if _, err := a.o.Chain.SubmitMsg(ctx, a.o.Key, 0, start); err != nil {
			return nil, fmt.Errorf("start: %w", err)
		}
	}
	owner, err := seal.ParseRecipient(j.ConsumerKey)
	if err != nil {
		return nil, err
	}
	logs := &cappedBuffer{max: maxLogBytes}
	stream := a.streamLogs(ctx, j.ID, owner, logs)
	sj := &sandbox.Job{
		ID: fmt.Sprint(j.ID), Module: module, Image: s.Image, Command: s.Command, Args: a.o.Faults.jobArgs(j.ID, s.Args), Env: s.Env, WorkDir: root, Outputs: s.Outputs,
		GPUs:          gpus,
		Network:       s.Network,
		Limits:        limits,
		Deterministic: s.Deterministic,
	}
	if gang != nil {
		// torchrun's variables and the members file's, over the job's
		// own of the same names.
		env := make(map[string]string, len(s.Env)+len(gang.env))
		for k, v := range s.Env {
			env[k] = v
		}
		for _, kv := range gang.env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		sj.Env, sj.NetNS = env, gang.ns
	}
	res, err := a.runCheckpointed(ctx, ex, j, sj, resume, jobKey, dir, logs)
	stream()
	if err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	if res.OutputDir != "" {
		defer os.RemoveAll(res.OutputDir)
	}
	// The time spent preparing the program (compiling a module, pulling an
	// image) is the provider's: it is logged, and not metered.
	if res.CompileTime > time.Second {
		a.log.Info("job program prepared", "job", j.ID, "executor", s.Executor, "prepare_seconds", res.CompileTime.Seconds())
	}
	out := &ledger.JobResult{
		MeteredSeconds: uint64(math.Ceil(res.Metered.Seconds())),
		ExitCode:       int64(res.ExitCode),
		Failed:         res.Failed,
		Reason:         truncateReason(res.Reason),
	}
	outDir := res.OutputDir
	if outDir == "" {
		outDir = filepath.Join(dir, "no-outputs")
		os.MkdirAll(outDir, 0o700)
	}
	// A compare job's outputs are sealed to the job key too, so that its
	// other replicas, which hold that key, can judge them (judge.go).
	outTo := []age.Recipient{owner}
	if s.Compare != nil {
		outTo = append(outTo, jobKey.Recipient())
	}
	manifest, outBlob, err := a.uploadSealed(ctx, dir, func(w io.Writer) error { return seal.PackDir(w, outDir) }, outTo...)
	if err != nil {
		return nil, fmt.Errorf("outputs: %w", err)
	}
	out.ManifestHash, out.OutputBlob = manifest, outBlob.String()
	if a.o.Faults.hideOutputs() {
		// Fault injection (tests): name a blob nobody has, so that the
		// other replicas cannot judge these outputs.
		out.OutputBlob = "sha256:" + strings.Repeat("0", 63) + "1"
		a.log.Warn("FAULT INJECTION: revealing an output blob that does not exist", "job", j.ID)
	}
	_, logBlob, err := a.uploadSealed(ctx, dir, func(w io.Writer) error { _, err := w.Write(logs.Bytes()); return err }, owner)
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	out.LogBlob = logBlob.String()
	// Where the outputs and log are, so that the owner's node fetches
	// them from this one's; empty from a node that does not say.
	if at, err := a.o.Blobs.NodeAPIURL(ctx); err == nil {
		out.DataAt = at
	}
	return out, nil
}

// fetchDecrypted downloads a blob of job (through the node's gateway,
// which fetches it from the node that holds it), checks its hash, decrypts
// it with key and hands the plaintext to use. A failed download is a
// *dataError.
func (a *Agent) fetchDecrypted(ctx context.Context, job uint64, ref string, key *age.X25519Identity, use func(io.Reader) error) error {
	h, err := blob.ParseHash(ref)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(a.o.WorkDir, "blob-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := a.o.Blobs.GetForJob(ctx, h, job, tmp); err != nil {
		// The gateway's words (the nodes it tried, their addresses and
		// answers) go to this provider's log only: on chain, the blob's
		// name (public in the spec) and fixed words, as for URL inputs.
		why := "could not be fetched"
		if errors.Is(err, blob.ErrHashMismatch) {
			why = "does not hash to its name"
		}
		return &dataError{err: fmt.Errorf("blob %s %s", ref, why), detail: err}
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	plain, err := seal.Decrypt(tmp, key)
	if err != nil {
		return fmt.Errorf("%w %s: %w", errDecrypt, ref, err)
	}
	return use(plain)
}

// errDecrypt: a blob fetched for a job does not open with its key.
var errDecrypt = errors.New("decrypt")

// uploadSealed writes what produce writes, encrypted to the recipients (the
// owner, and for a compare job's outputs the job key), to a temporary file
// and uploads it; it returns the SHA-256 of the plaintext and the blob's
// hash.
func (a *Agent) uploadSealed(ctx context.Context, dir string, produce func(io.Writer) error, to ...age.Recipient) (ledger.Hash, blob.Hash, error) {
	f, err := os.CreateTemp(dir, "sealed-*")
	if err != nil {
		return ledger.Hash{}, blob.Hash{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	enc, err := seal.Encrypt(f, to...)
	if err != nil {
		return ledger.Hash{}, blob.Hash{}, err
	}
	plain := sha256.New()
	if err := produce(io.MultiWriter(enc, plain)); err != nil {
		return ledger.Hash{}, blob.Hash{}, err
	}
	if err := enc.Close(); err != nil {
		return ledger.Hash{}, blob.Hash{}, err
	}
	if err := f.Close(); err != nil {
		return ledger.Hash{}, blob.Hash{}, err
	}
	h, _, err := a.o.Blobs.PutFile(ctx, f.Name())
	if err != nil {
		return ledger.Hash{}, blob.Hash{}, err
	}
	var m ledger.Hash
	plain.Sum(m[:0])
	return m, h, nil
}

// streamLogs relays what the job logs, encrypted to its owner, through the
// node while it runs (relayLogs). The returned function sends the rest and
// stops. A relay failure costs only the live view: the full log goes with
// the result.
func (a *Agent) streamLogs(ctx context.Context, job uint64, owner age.Recipient, logs *cappedBuffer) func() {
	return a.relayLogs(ctx, fmt.Sprintf("job %d", job), &cappedCursor{buf: logs}, owner, func(ctx context.Context, seq uint64, sealed []byte) error {
		return a.o.Chain.PostLog(ctx, a.o.Key, job, seq, sealed)
	})
}

func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func truncateReason(s string) string { return truncateText(s, 500) }

// truncateText cuts s to at most max bytes of valid UTF-8 (the ledger
// refuses a reason over its bound, or one cut inside a character).
func truncateText(s string, max int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// cappedBuffer keeps the first max bytes written to it, safe for
// concurrent writers, and notes what it dropped.
type cappedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
	} else {
		c.buf.Write(p[:max(room, 0)])
		c.dropped += len(p) - max(room, 0)
	}
	return len(p), nil
}

func (c *cappedBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped > 0 {
		return append(bytes.Clone(c.buf.Bytes()), fmt.Sprintf("\n[gpunet: %d more bytes of log dropped]\n", c.dropped)...)
	}
	return bytes.Clone(c.buf.Bytes())
}

// Key handover (ledger handover.go): a replica placed on a job that has
// committed results (an audit, escalation or replacement replica), whose
// owner committed to its key, asks the committed replicas for the key with
// a per-job X25519 key; a committed replica seals the key to it, whether
// the owner granted it that key or another replica handed it over; the new
// replica checks what it got against the owner's commitment and disputes a
// wrong one on chain. So audits, escalations and replacements run while
// the owner is offline, and the key reaches no one but the assigned
// providers.

// needsHandover reports whether this provider has a handover step to take
// for j: ask for the key (a replica without it on a job with committed
// results), or hand it over (a committed replica, while another waits for
// it).
func needsHandover(j *ledger.Job, as *ledger.Assignment) bool {
	if j.KeyCommitment == nil {
		return false
	}
	if as.KeyGrant == nil && as.HandoverKey == nil && as.Commitment == nil {
		for _, o := range j.Assignments {
			if o.Commitment != nil {
				return true
			}
		}
		return false
	}
	if as.Commitment == nil || as.KeyGrant == nil {
		return false
	}
	for _, o := range j.Assignments {
		if o.HandoverKey != nil && o.KeyGrant == nil {
			return true
		}
	}
	return false
}

func (a *Agent) handOverAsync(ctx context.Context, j *ledger.Job, as *ledger.Assignment) {
	a.runs.mu.Lock()
	defer a.runs.mu.Unlock()
	if a.runs.handover == nil {
		a.runs.handover = map[uint64]bool{}
	}
	if a.runs.handover[j.ID] {
		return
	}
	a.runs.handover[j.ID] = true
	a.runs.wg.Add(1)
	go func() {
		defer a.runs.wg.Done()
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := a.handOver(hctx, j, as); err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
			a.log.Warn("key handover", "job", j.ID, "err", err)
		}
		a.runs.mu.Lock()
		delete(a.runs.handover, j.ID)
		a.runs.mu.Unlock()
	}()
}

func (a *Agent) handOver(ctx context.Context, j *ledger.Job, as *ledger.Assignment) error {
	if as.KeyGrant == nil {
		pub, err := ledger.HandoverPublicKey(a.handoverSecret(j.ID, as.AssignedAt))
		if err != nil {
			return err
		}
		_, err = a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgRequestKeyHandover{JobID: j.ID, PublicKey: pub})
		return err
	}
	// Committed: the result can no longer change, so handing the key on
	// gains this provider nothing over the check. The key is the owner's
	// grant or, for a replica placed after a commit, a handover: jobKey
	// opens either.
	key, err := a.jobKey(ctx, j, as)
	if err != nil {
		return err
	}
	for _, o := range j.Assignments {
		if o.HandoverKey == nil || o.KeyGrant != nil {
			continue
		}
		var eph ledger.Hash
		rand.Read(eph[:])
		sealed, err := ledger.SealHandover([]byte(key.String()), *o.HandoverKey, eph, j.ID)
		if err != nil {
			return err
		}
		if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgHandOverKey{JobID: j.ID, Provider: o.Provider, Sealed: sealed}); err != nil {
			return err
		}
		a.log.Info("job key handed over to a new replica", "job", j.ID, "to", o.Provider)
	}
	return nil
}

// handoverSecret is this provider's per-job handover private key: secret
// (derived from its private key), and the same after a restart.
func (a *Agent) handoverSecret(id uint64, assignedAt int64) ledger.Hash {
	return a.jobSecret("gpunet/handover-secret/v1", id, assignedAt)
}

// errWrongJobKey: the key this provider was given is not the one the
// owner committed to; it does not run the job.
var errWrongJobKey = errors.New("the job key is not the one the owner committed to at submit")

// jobKey recovers the job key from this provider's grant: the owner's
// (age, to this provider's key) or a committed replica's handover. With a
// key commitment on chain it checks the key against it; a handover that
// fails the check is disputed on chain, which slashes its sender.
func (a *Agent) jobKey(ctx context.Context, j *ledger.Job, as *ledger.Assignment) (*age.X25519Identity, error) {
	var key *age.X25519Identity
	var err error
	if as.HandedBy != nil {
		secret := a.handoverSecret(j.ID, as.AssignedAt)
		var plain []byte
		if plain, err = ledger.OpenHandover(as.KeyGrant, secret, j.ID); err == nil {
			key, err = age.ParseX25519Identity(strings.TrimSpace(string(plain)))
		}
		if err != nil || j.KeyCommitment == nil || ledger.JobKeyCommitment([]byte(key.String())) != *j.KeyCommitment {
			if _, derr := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgDisputeKeyHandover{JobID: j.ID, Secret: secret}); derr != nil && !errors.Is(derr, chainclient.ErrNotInBlockYet) {
				return nil, fmt.Errorf("handover from %s: %w; dispute: %w", as.HandedBy, errWrongJobKey, derr)
			}
			return nil, fmt.Errorf("handover from %s: %w (disputed on chain)", as.HandedBy, errWrongJobKey)
		}
		return key, nil
	}
	if key, err = seal.UnwrapKey(as.KeyGrant, a.o.Key.Identity()); err != nil {
		return nil, fmt.Errorf("unwrap the job key: %w", err)
	}
	if j.KeyCommitment != nil && ledger.JobKeyCommitment([]byte(key.String())) != *j.KeyCommitment {
		// Running it would bind this provider to hand on a key the ledger
		// would call wrong.
		return nil, errWrongJobKey
	}
	return key, nil
}
