package provider_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
)

// counter is a fake job that counts, keeping its count in
// $GPUNET_CHECKPOINT_DIR/state (written atomically every tick), until it
// reaches until (0: never), and records where each of its runs started.
type counter struct {
	until int
	tick  time.Duration
	extra int // bytes of padding it keeps beside its state

	mu     sync.Mutex
	starts []string // "seq=N count=C" at each start
}

func (c *counter) behave(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
	dir := filepath.Join(job.WorkDir, job.Env[provider.EnvCheckpointDir])
	state := filepath.Join(dir, "state")
	n := 0
	if b, err := os.ReadFile(state); err == nil {
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	c.mu.Lock()
	c.starts = append(c.starts, fmt.Sprintf("seq=%s count=%d", job.Env[provider.EnvResumeSeq], n))
	c.mu.Unlock()
	if c.extra > 0 {
		os.WriteFile(filepath.Join(dir, "padding"), make([]byte, c.extra), 0o644)
	}
	for c.until == 0 || n < c.until {
		select {
		case <-ctx.Done():
			return fake.Exit(-1), nil
		case <-time.After(c.tick):
		}
		n++
		os.WriteFile(state+".tmp", []byte(strconv.Itoa(n)), 0o644)
		os.Rename(state+".tmp", state)
	}
	os.MkdirAll(filepath.Join(job.WorkDir, "out"), 0o755)
	os.WriteFile(filepath.Join(job.WorkDir, "out", "count"), []byte(strconv.Itoa(n)), 0o644)
	fmt.Fprintf(logs, "counted to %d\n", n)
	return fake.Exit(0), nil
}

func (c *counter) runs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.starts...)
}

// ckptSpec is the wordcount example run by a fake that counts, with a
// checkpoint every second.
func ckptSpec(t *testing.T) *jobspec.Spec {
	s := wordcountSpec(t)
	s.Checkpoint = &jobspec.Checkpoint{Path: "/ckpt", Interval: jobspec.Duration(time.Second)}
	return s
}

func ckptNetwork(t *testing.T, names ...string) *network {
	return startNetworkWith(t, func(p *ledger.Params) { p.CheckpointMinInterval = 1 }, names...)
}

// TestCheckpointIntervalAndStop: a checkpointing job's state is committed
// at its interval; StopWithCheckpoint commits one more at once and stops
// the run, which starts again from that checkpoint (GPUNET_RESUME_SEQ, the
// state restored).
func TestCheckpointIntervalAndStop(t *testing.T) {
	n := ckptNetwork(t, "consumer", "p")
	job := &counter{tick: 20 * time.Millisecond}
	n.sb = map[string]sandbox.Executor{"wasm": fake.New(job.behave).WithName("wasm")}
	a, _ := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	waitFor(t, "provider ready", func() bool { return ready(a) })
	key, _ := n.kr.Get("consumer")
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, ckptSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	go jc.Follow(ctx, id, 20*time.Millisecond, nil) // grants the key
	var j *ledger.Job
	waitFor(t, "two checkpoints at the interval", func() bool {
		j, _ = n.cl.Job(ctx, id)
		return j != nil && len(j.Checkpoints) >= 2
	})
	if got := j.Checkpoints[1].Time - j.Checkpoints[0].Time; got < 0 || got > 3 {
		t.Errorf("checkpoints %d s apart, want about the interval (1 s)", got)
	}
	last := j.Checkpoints[len(j.Checkpoints)-1].Seq
	if err := a.StopWithCheckpoint(ctx, id, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	j, _ = n.cl.Job(ctx, id)
	stopSeq := j.Checkpoints[len(j.Checkpoints)-1].Seq
	if stopSeq <= last {
		t.Fatalf("no checkpoint at the stop: last %d before, %d after", last, stopSeq)
	}
	waitFor(t, "the run started again from the stop's checkpoint", func() bool {
		r := job.runs()
		return len(r) >= 2 && strings.HasPrefix(r[len(r)-1], fmt.Sprintf("seq=%d ", stopSeq)) && !strings.HasSuffix(r[len(r)-1], " count=0")
	})
	if err := a.StopWithCheckpoint(ctx, id+100, 0); err == nil {
		t.Error("StopWithCheckpoint of a job that is not running here did not fail")
	}
}

// TestCheckpointTooLarge: state larger than the job's disk is not
// uploaded; the refusal and its reason are recorded on the job.
func TestCheckpointTooLarge(t *testing.T) {
	n := ckptNetwork(t, "consumer", "p")
	job := &counter{tick: 20 * time.Millisecond, extra: 2 << 20}
	n.sb = map[string]sandbox.Executor{"wasm": fake.New(job.behave).WithName("wasm")}
	a, _ := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	waitFor(t, "provider ready", func() bool { return ready(a) })
	key, _ := n.kr.Get("consumer")
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := ckptSpec(t)
	s.Resources.Disk = jobspec.MiB
	id, err := jc.Submit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	go jc.Follow(ctx, id, 20*time.Millisecond, nil)
	var j *ledger.Job
	waitFor(t, "the refusal on the ledger", func() bool {
		j, _ = n.cl.Job(ctx, id)
		return j != nil && j.CheckpointNote != ""
	})
	if !strings.Contains(j.CheckpointNote, "more than the job's disk of 1 MiB") || len(j.Checkpoints) != 0 {
		t.Fatalf("note %q, checkpoints %+v", j.CheckpointNote, j.Checkpoints)
	}
}

// TestCheckpointRestoreFallback: the provider running a job stops (its
// last checkpoint taken on the way out); the job is reassigned to resume
// from that checkpoint, whose blob is then corrupted: the next provider
// finds it does not match its hash, restores the one before, says so in
// the job's log and on the ledger, and the job finishes from there.
func TestCheckpointRestoreFallback(t *testing.T) {
	n := ckptNetwork(t, "consumer", "p", "q")
	first := &counter{tick: 20 * time.Millisecond}
	second := &counter{tick: 5 * time.Millisecond, until: 400}
	n.sb = map[string]sandbox.Executor{"wasm": fake.New(first.behave).WithName("wasm")}
	a, stopA := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	waitFor(t, "p ready", func() bool { return ready(a) })
	key, _ := n.kr.Get("consumer")
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, ckptSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	fctx, unfollow := context.WithCancel(ctx)
	go jc.Follow(fctx, id, 20*time.Millisecond, nil)
	waitFor(t, "two checkpoints", func() bool {
		j, _ := n.cl.Job(ctx, id)
		return j != nil && len(j.Checkpoints) >= 2
	})
	unfollow() // the owner grants q nothing until the blob is corrupt
	n.sb = map[string]sandbox.Executor{"wasm": fake.New(second.behave).WithName("wasm")}
	b, _ := runAgent(t, n, "q", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 72_000)
	waitFor(t, "q ready", func() bool { return ready(b) })
	stopA()
	var j *ledger.Job
	waitFor(t, "the job reassigned to resume", func() bool {
		j, _ = n.cl.Job(ctx, id)
		return j.ResumeSeq != 0 && len(j.Assignments) == 1 && j.State == ledger.JobAssigned
	})
	latest := j.ResumeCheckpoint()
	var earlier uint64
	for _, c := range j.Checkpoints {
		if c.Seq < latest.Seq {
			earlier = max(earlier, c.Seq)
		}
	}
	obj := filepath.Join(n.home, "data", "blobs", "objects", latest.Blob[7:9], latest.Blob[7:])
	if err := os.WriteFile(obj, []byte("not the checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	done, err := jc.Follow(ctx, id, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done.State != ledger.JobSucceeded || done.ResumeSeq != earlier || !strings.Contains(done.CheckpointNote, fmt.Sprintf("instead of checkpoint %d", latest.Seq)) {
		t.Fatalf("job %s %s: resume %d (want %d), note %q", done.State, done.Reason, done.ResumeSeq, earlier, done.CheckpointNote)
	}
	if r := second.runs(); len(r) == 0 || !strings.HasPrefix(r[0], fmt.Sprintf("seq=%d ", earlier)) || strings.HasSuffix(r[0], " count=0") {
		t.Fatalf("q's run started %v, want from checkpoint %d's state", r, earlier)
	}
	var logs strings.Builder
	if err := jc.FetchLogs(ctx, done, &logs); err != nil || !strings.Contains(logs.String(), fmt.Sprintf("resuming from checkpoint %d, an earlier one", earlier)) {
		t.Fatalf("log %q (err %v) does not say which checkpoint it resumed from", logs.String(), err)
	}
}
