package provider

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/seal"
)

// Checkpoints (ledger checkpoint.go, docs/jobspec.md). A job whose spec has
// a checkpoint keeps its state under the checkpoint path; this provider
// takes what is there at each interval, when the job exits with
// ledger.CheckpointExitCode, at its run budget's end less the grace, and
// when it is asked to stop (StopWithCheckpoint: preemption; the agent
// shutting down), within Options.CheckpointGrace. A checkpoint is the
// directory packed as outputs are (seal.PackDir, deterministic), encrypted
// to the job's owner and to the job key, so that the next provider can
// open it, uploaded, and committed with MsgCommitCheckpoint. Before a job
// starts, the checkpoint it resumes from is downloaded, checked against
// its committed hash and restored into the path; a corrupt or missing one
// falls back to the one before, and the start message says so.
//
// Replicas of a checked job compare their checkpoints at each sequence, so
// their checkpoints must be taken at the same points of the computation:
// for them only the job's own (its exit code 85) and the stop checkpoints
// are taken, not the interval's.
//
// The job sees GPUNET_CHECKPOINT_DIR (its checkpoint path) and, when it
// resumes, GPUNET_RESUME_SEQ (the sequence of the checkpoint restored).

// Environment variables a checkpointing job sees.
const (
	EnvCheckpointDir = "GPUNET_CHECKPOINT_DIR"
	EnvResumeSeq     = "GPUNET_RESUME_SEQ"
)

// DefaultCheckpointGrace is how long a stopping agent gives each running
// job's last checkpoint (Options.CheckpointGrace).
const DefaultCheckpointGrace = 30 * time.Second

// errCheckpointTooLarge: what is under the checkpoint path is more than
// the job's disk.
var errCheckpointTooLarge = errors.New("checkpoint larger than the job's disk")

// ckptRun is the checkpointing of one run of a job on this provider.
type ckptRun struct {
	a       *Agent
	job     *ledger.Job
	dir     string          // the checkpoint directory on this machine
	work    string          // where temporary bundles go
	recips  []age.Recipient // the owner and the job key
	limit   uint64          // the job's disk
	logs    io.Writer       // the job's log
	started time.Time       // when this provider's run began

	mu      sync.Mutex // one checkpoint at a time
	seq     uint64     // the last sequence taken
	lastErr error
}

// resumePoint is what a run restored before it started.
type resumePoint struct {
	seq  uint64 // 0: the beginning
	note string // why not the job's resume point, if it is not
}

// hostCheckpointDir is where a job's checkpoint path is under its root.
func hostCheckpointDir(root string, s *ledger.JobSpec) string {
	return filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(s.Checkpoint.Path, "/")))
}

// restoreCheckpoint creates the job's checkpoint directory under root and
// fills it from the latest checkpoint it can use: the job's resume point
// (or, for a run this provider had started already, its own latest), else
// an earlier one. It never fails the run for a checkpoint it cannot use: it
// says so and starts from an earlier one, or from the beginning.
func (a *Agent) restoreCheckpoint(ctx context.Context, j *ledger.Job, key *age.X25519Identity, root string, limit uint64, started bool) (*resumePoint, error) {
	if j.Spec.Checkpoint == nil {
		return nil, nil
	}
	dir := hostCheckpointDir(root, &j.Spec)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	top := j.ResumeSeq
	if started {
		for _, c := range j.Checkpoints {
			if c.Provider == a.o.Key.Address {
				top = max(top, c.Seq)
			}
		}
	}
	// A gang member resumes from its own rank's state only.
	rank, gang := uint64(0), j.Spec.Gang()
	if as := assignmentOf(j, a.o.Key.Address); as != nil {
		rank = as.Rank
	}
	var cands []ledger.Checkpoint
	for _, c := range j.Checkpoints {
		if gang && c.Rank != rank {
			continue
		}
		if c.Seq <= top {
			cands = append(cands, c)
		}
	}
	slices.SortStableFunc(cands, func(x, y ledger.Checkpoint) int { return -cmpU64(x.Seq, y.Seq) })
	var failed []string
	for _, c := range cands {
		if err := a.restoreOne(ctx, j.ID, c, key, dir, limit); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			a.log.Warn("checkpoint unusable; trying an earlier one", "job", j.ID, "seq", c.Seq, "err", err)
			failed = append(failed, fmt.Sprintf("checkpoint %d: %v", c.Seq, err))
			continue
		}
		rp := &resumePoint{seq: c.Seq}
		if c.Seq != top {
			rp.note = strings.Join(failed, "; ")
		}
		return rp, nil
	}
	rp := &resumePoint{}
	if top != 0 {
		rp.note = "no usable checkpoint: " + strings.Join(failed, "; ")
		if len(failed) == 0 {
			rp.note = "no checkpoint kept"
		}
	}
	return rp, nil
}

func cmpU64(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// restoreOne downloads checkpoint c, decrypts it, unpacks it into a fresh
// directory beside dir and, if its plaintext has the committed hash, puts
// it in dir's place.
func (a *Agent) restoreOne(ctx context.Context, id uint64, c ledger.Checkpoint, key *age.X25519Identity, dir string, limit uint64) error {
	tmp := dir + ".restore"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var size int64
	h := sha256.New()
	err := a.fetchDecrypted(ctx, id, c.Blob, key, func(r io.Reader) error {
		cr := &ckptReader{r: io.TeeReader(r, h)}
		lim := seal.Limits{MaxBytes: int64(min(limit, math.MaxInt64)), MaxEntries: sandbox.MaxOutputEntries}
		if err := seal.UnpackDir(cr, tmp, lim); err != nil {
			return err
		}
		// The hash covers the whole stream, tar padding included.
		_, err := io.Copy(io.Discard, cr)
		size = cr.n
		return err
	})
	if err != nil {
		return err
	}
	var got ledger.Hash
	h.Sum(got[:0])
	if got != c.PlainHash {
		return fmt.Errorf("its content does not match the committed hash (got %x…, want %x…)", got[:6], c.PlainHash[:6])
	}
	if uint64(size) != c.Size {
		return fmt.Errorf("its size %d is not the committed %d", size, c.Size)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

type ckptReader struct {
	r io.Reader
	n int64
}

func (c *ckptReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// runCheckpointed runs sj in ex as execute would, with the job's
// checkpoints: the environment that tells the job where its state is and
// where it resumes, a checkpoint at each interval and at the budget's end,
// and a restart in place from a fresh checkpoint whenever the job exits
// with ledger.CheckpointExitCode. Without a checkpoint in the spec it is
// ex.Run.
func (a *Agent) runCheckpointed(ctx context.Context, ex sandbox.Executor, j *ledger.Job, sj *sandbox.Job, rp *resumePoint, key *age.X25519Identity, dir string, logs io.Writer) (*sandbox.Result, error) {
	if j.Spec.Checkpoint == nil || rp == nil {
		return ex.Run(ctx, sj, logs)
	}
	owner, err := seal.ParseRecipient(j.ConsumerKey)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cr := &ckptRun{
		a: a, job: j, dir: hostCheckpointDir(sj.WorkDir, &j.Spec), work: dir, recips: []age.Recipient{owner, key.Recipient()},
		limit: sandbox.Limits{DiskBytes: j.Spec.Disk}.Disk(), logs: logs, started: a.clk.Now(), seq: rp.seq,
	}
	for _, c := range j.Checkpoints {
		if c.Provider == a.o.Key.Address && c.Seq > cr.seq {
			cr.seq = c.Seq
		}
	}
	switch {
	case rp.note != "" && rp.seq == 0:
		fmt.Fprintf(logs, "[gpunet] starting from the beginning: %s\n", rp.note)
	case rp.note != "":
		fmt.Fprintf(logs, "[gpunet] resuming from checkpoint %d, an earlier one than the job's latest: %s\n", rp.seq, rp.note)
	case rp.seq != 0:
		fmt.Fprintf(logs, "[gpunet] resuming from checkpoint %d\n", rp.seq)
	}
	a.ckpts.add(j.ID, cr)
	defer a.ckpts.remove(j.ID, cr)
	stop := cr.loop(rctx, sj.Limits.Timeout)
	defer stop()

	env := func(resume uint64) map[string]string {
		e := make(map[string]string, len(sj.Env)+2)
		for k, v := range sj.Env {
			e[k] = v
		}
		e[EnvCheckpointDir] = j.Spec.Checkpoint.Path
		if resume != 0 {
			e[EnvResumeSeq] = strconv.FormatUint(resume, 10)
		}
		return e
	}
	run := *sj
	run.Env = env(rp.seq)
	var metered, compile time.Duration
	for {
		res, err := ex.Run(rctx, &run, logs)
		if err != nil {
			return nil, err
		}
		metered += res.Metered
		compile += res.CompileTime
		res.Metered, res.CompileTime = metered, compile
		left := sj.Limits.Timeout - metered
		if res.ExitCode != ledger.CheckpointExitCode || left <= 0 || rctx.Err() != nil {
			return res, nil
		}
		// The job asked: its state is complete; take it and start it
		// again from it.
		seq, err := cr.take(rctx, "the job asked (exit code 85)")
		if err != nil {
			fmt.Fprintf(logs, "[gpunet] the job exited %d to be checkpointed, and the checkpoint failed: %v\n", ledger.CheckpointExitCode, err)
			return res, nil
		}
		if res.OutputDir != "" {
			os.RemoveAll(res.OutputDir)
		}
		fmt.Fprintf(logs, "[gpunet] checkpoint %d taken; restarting the job from it\n", seq)
		run.Env = env(seq)
		run.Limits.Timeout = left
	}
}

// loop takes a checkpoint at each interval (not for a checked job, whose
// replicas checkpoint where the job says) and one at the run budget's end
// less the grace, until the returned function is called.
func (cr *ckptRun) loop(ctx context.Context, budget time.Duration) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	interval := time.Duration(cr.job.Spec.Checkpoint.IntervalSeconds) * time.Second
	grace := cr.a.grace()
	go func() {
		defer close(stopped)
		var tick <-chan time.Time
		if !cr.job.Spec.Checked() {
			t := cr.a.clk.NewTicker(interval)
			defer t.Stop()
			tick = t.C()
		}
		var end <-chan time.Time
		if budget > 2*grace {
			end = cr.a.clk.After(budget - grace)
		}
		for {
			var why string
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick:
				why = "interval"
			case <-end:
				why, end = "the run's time is nearly up", nil
			}
			if _, err := cr.take(ctx, why); err != nil && ctx.Err() == nil {
				cr.a.log.Warn("checkpoint", "job", cr.job.ID, "why", why, "err", err)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// take bundles what is under the checkpoint directory, uploads it sealed
// and commits it; it returns the sequence committed. A directory larger
// than the job's disk is refused: the refusal is committed (the job
// records why) and logged to the job.
func (cr *ckptRun) take(ctx context.Context, why string) (uint64, error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	a, id := cr.a, cr.job.ID
	seq := cr.seq + 1
	size, err := dirSize(cr.dir)
	if err != nil {
		return 0, err
	}
	if size > cr.limit {
		reason := fmt.Sprintf("the state under %s is %s, more than the job's disk of %s", cr.job.Spec.Checkpoint.Path, sandbox.FormatBytes(size), sandbox.FormatBytes(cr.limit))
		fmt.Fprintf(cr.logs, "[gpunet] checkpoint %d refused: %s\n", seq, reason)
		if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgCommitCheckpoint{JobID: id, Seq: seq, Refused: reason}); err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
			return 0, fmt.Errorf("%w: %s; reporting it: %w", errCheckpointTooLarge, reason, err)
		}
		cr.seq = seq
		return 0, fmt.Errorf("%w: %s", errCheckpointTooLarge, reason)
	}
	t0 := a.clk.Now()
	var plain ledger.Hash
	var n int64
	var h blob.Hash
	for try := 0; ; try++ {
		// The job may be writing while it is packed: a file that changes
		// under the packer fails the pack, and it is packed again.
		plain, h, n, err = cr.upload(ctx)
		if err == nil || try == 2 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("pack and upload: %w", err)
	}
	covered := uint64(math.Ceil(a.clk.Now().Sub(cr.started).Seconds()))
	m := &ledger.MsgCommitCheckpoint{JobID: id, Seq: seq, Blob: h.String(), PlainHash: plain, Size: uint64(n), CoveredSeconds: covered}
	if at, err := a.o.Blobs.NodeAPIURL(ctx); err == nil {
		m.DataAt = at
	}
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, m); err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
		cr.lastErr = err
		return 0, fmt.Errorf("commit checkpoint %d: %w", seq, err)
	}
	cr.seq = seq
	took := a.clk.Now().Sub(t0)
	a.log.Info("checkpoint committed", "job", id, "seq", seq, "bytes", n, "covered_seconds", covered, "why", why, "took", took.Round(time.Millisecond))
	fmt.Fprintf(cr.logs, "[gpunet] checkpoint %d: %s (%s)\n", seq, sandbox.FormatBytes(uint64(n)), why)
	return seq, nil
}

// upload packs the checkpoint directory, sealed to the owner and the job
// key, into a temporary file and uploads it.
func (cr *ckptRun) upload(ctx context.Context) (ledger.Hash, blob.Hash, int64, error) {
	f, err := os.CreateTemp(cr.work, "ckpt-*")
	if err != nil {
		return ledger.Hash{}, blob.Hash{}, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	enc, err := seal.Encrypt(f, cr.recips...)
	if err != nil {
		return ledger.Hash{}, blob.Hash{}, 0, err
	}
	plain := sha256.New()
	cw := &ckptWriter{w: io.MultiWriter(enc, plain)}
	if err := seal.PackDir(cw, cr.dir); err != nil {
		return ledger.Hash{}, blob.Hash{}, 0, err
	}
	if err := enc.Close(); err != nil {
		return ledger.Hash{}, blob.Hash{}, 0, err
	}
	if err := f.Close(); err != nil {
		return ledger.Hash{}, blob.Hash{}, 0, err
	}
	h, _, err := cr.a.o.Blobs.PutFile(ctx, f.Name())
	if err != nil {
		return ledger.Hash{}, blob.Hash{}, 0, err
	}
	var m ledger.Hash
	plain.Sum(m[:0])
	return m, h, cw.n, nil
}

type ckptWriter struct {
	w io.Writer
	n int64
}

func (c *ckptWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) (uint64, error) {
	var total uint64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we looked
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += uint64(info.Size())
			}
		}
		return nil
	})
	return total, err
}

// ckptRegistry is the runs that checkpoint, by job.
type ckptRegistry struct {
	mu   sync.Mutex
	byID map[uint64]*ckptRun
}

func (r *ckptRegistry) add(id uint64, cr *ckptRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.byID = map[uint64]*ckptRun{}
	}
	r.byID[id] = cr
}

func (r *ckptRegistry) remove(id uint64, cr *ckptRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[id] == cr {
		delete(r.byID, id)
	}
}

func (r *ckptRegistry) get(id uint64) *ckptRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[id]
}

func (r *ckptRegistry) all() []*ckptRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*ckptRun, 0, len(r.byID))
	for _, cr := range r.byID {
		out = append(out, cr)
	}
	return out
}

func (a *Agent) grace() time.Duration {
	if a.o.CheckpointGrace > 0 {
		return a.o.CheckpointGrace
	}
	return DefaultCheckpointGrace
}

// ErrNoCheckpointingRun is returned by StopWithCheckpoint for a job that
// has no checkpointing run on this provider.
var ErrNoCheckpointingRun = errors.New("no checkpointing run of that job on this provider")

// StopWithCheckpoint takes and commits a checkpoint of job id's run now,
// waiting at most grace (Options.CheckpointGrace when 0), and then stops
// the run: the entry point for preemption (a spot job making room for a
// priority one) and for anything else that must take a job away from this
// provider without losing its work. The run is stopped even when the
// checkpoint fails; the error says why it failed.
func (a *Agent) StopWithCheckpoint(ctx context.Context, id uint64, grace time.Duration) error {
	cr := a.ckpts.get(id)
	if cr == nil {
		return fmt.Errorf("job %d: %w", id, ErrNoCheckpointingRun)
	}
	if grace <= 0 {
		grace = a.grace()
	}
	cctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	_, err := cr.take(cctx, "asked to stop")
	// Stop the whole run, as when the job goes elsewhere: it is not
	// finished, so it commits no result.
	a.runs.mu.Lock()
	if stop, ok := a.runs.byID[id]; ok {
		stop()
	}
	a.runs.mu.Unlock()
	return err
}

// checkpointAll takes a last checkpoint of every checkpointing run, at
// once, within the grace: the agent is stopping, and the jobs will resume
// elsewhere from these.
func (a *Agent) checkpointAll() {
	runs := a.ckpts.all()
	if len(runs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.grace())
	defer cancel()
	var wg sync.WaitGroup
	for _, cr := range runs {
		wg.Go(func() {
			if _, err := cr.take(ctx, "the provider is stopping"); err != nil {
				a.log.Warn("last checkpoint before stopping", "job", cr.job.ID, "err", err)
			}
		})
	}
	wg.Wait()
}
