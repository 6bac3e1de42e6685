package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestPreemptResume (issues 14 and 17): one provider with one slot runs a
// spot job that checkpoints (the counter of TestCheckpointResume); a
// priority job submitted then can only run by preempting it. The spot
// job's assignment gets PreemptAt, its agent checkpoints and stops it
// within the devnet's grace, the ledger requeues it, the priority job runs
// and succeeds, and the spot job resumes on the same provider from the
// checkpoint taken at the preemption: its log says so, its output equals
// an uninterrupted run's, and the owner pays exactly the seconds the
// checkpoint covers plus the seconds metered after the resume.
func TestPreemptResume(t *testing.T) {
	parallel(t, weightHeavy)
	dir := t.TempDir()
	counterWasm(t, filepath.Join(dir, "counter.wasm"))
	home := t.TempDir()
	startDevnet(t, home, "--block-time", "100ms")
	startProvider(t, home, "carol", "alice", "--max-jobs", "1")
	waitOfferCount(t, 30*time.Second, home, "", "", 1)
	submit := func(name, tier string, steps, work int, extra string) string {
		spec := fmt.Sprintf(`name: %s
executor: wasm
module: ./counter.wasm
args: ["%d", "%d"]
outputs: [/out]
resources: {cpu: 1, memory: 256MiB, gpu: {count: 0}}
max_price: 0.5
timeout: 5m
tier: %s
verification: none
%s`, name, steps, work, tier, extra)
		specPath := filepath.Join(dir, name+".yaml")
		os.WriteFile(specPath, []byte(spec), 0o644)
		var sub struct {
			ID uint64 `json:"id"`
		}
		gpunetJSON(t, &sub, "job", "submit", specPath, "--from", "alice", "--home", home)
		return fmt.Sprint(sub.ID)
	}
	status := func(id string) ledger.Job {
		var j ledger.Job
		gpunetJSON(t, &j, "job", "status", id, "--from", "alice", "--home", home) // grants the key when due
		return j
	}
	poll := func(id string) ledger.Job { return ownerJob(t, home, "alice", id) }
	before := balance(t, "alice", "--home", home)
	spot := submit("spot", "spot", counterSteps, counterWork, "checkpoint: {path: /ckpt, interval: 1s}\n")
	var j ledger.Job
	waitUntil(t, 60*time.Second, "checkpoints of the spot job's state committed", func() bool {
		j = poll(spot)
		return len(j.Checkpoints) >= 2 && j.Checkpoints[len(j.Checkpoints)-1].Size > 1024 || j.Done()
	})
	if j.Done() {
		t.Fatalf("the spot job ended before it could be preempted (make it longer): %s %s", j.State, j.Reason)
	}
	prio := submit("prio", "priority", 20, 20, "")
	submitted := time.Now()

	var preemptAt int64
	var requeued time.Time
	waitUntil(t, 60*time.Second, "the spot job preempted and requeued", func() bool {
		j = poll(spot)
		if preemptAt == 0 && len(j.Assignments) == 1 && j.Assignments[0].PreemptAt != 0 {
			preemptAt = j.Assignments[0].PreemptAt
		}
		return j.Preempted > 0 || j.Done()
	})
	requeued = time.Now()
	j = status(spot)
	if j.Preempted != 1 || j.Done() || j.ResumeSeq == 0 {
		t.Fatalf("the spot job after the priority submit: %s preempted %d resume_seq %d (%s)", j.State, j.Preempted, j.ResumeSeq, j.Reason)
	}
	resume := j.ResumeCheckpoint()
	if resume == nil || j.Progress != resume.Covered {
		t.Fatalf("the spot job keeps no checkpoint to resume from: resume_seq %d progress %d checkpoints %+v", j.ResumeSeq, j.Progress, j.Checkpoints)
	}
	t.Logf("preempted (grace until %d), requeued %s after the priority submit, to resume from checkpoint %d (%d s covered): %s",
		preemptAt, requeued.Sub(submitted).Round(100*time.Millisecond), resume.Seq, resume.Covered, j.Reason)
	if preemptAt != 0 && resume.Time > preemptAt {
		t.Errorf("the checkpoint it resumes from was committed at %d, after the grace ended at %d", resume.Time, preemptAt)
	}

	var p ledger.Job
	waitUntil(t, 60*time.Second, "the priority job done", func() bool {
		p = poll(prio)
		return p.Done()
	})
	p = status(prio)
	if p.State != ledger.JobSucceeded {
		t.Fatalf("the priority job: %s %s", p.State, p.Reason)
	}
	waitUntil(t, 180*time.Second, "the spot job done after its resume", func() bool {
		j = poll(spot)
		return j.Done()
	})
	j = status(spot)
	if j.State != ledger.JobSucceeded || j.ResumeSeq != resume.Seq || j.Preempted != 1 {
		t.Fatalf("the spot job: %s %s (resume_seq %d, preempted %d)", j.State, j.Reason, j.ResumeSeq, j.Preempted)
	}

	out := t.TempDir()
	if r := gpunet(t, "job", "get", spot, "--from", "alice", "--home", home, "--out", out); r.code != 0 {
		t.Fatalf("%s", r)
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "result.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := counterResult(counterSteps, counterWork); string(got) != want {
		t.Fatalf("output %q, an uninterrupted run gives %q", got, want)
	}
	log := gpunet(t, "job", "logs", spot, "--from", "alice", "--home", home)
	if !strings.Contains(log.stdout, fmt.Sprintf("resuming from checkpoint %d", resume.Seq)) || !strings.Contains(log.stdout, "resuming at step") {
		t.Errorf("the spot job's log does not say it resumed from checkpoint %d (exit %d):\n%s\nstderr: %s", resume.Seq, log.code, log.stdout, log.stderr)
	}

	// The charge: the seconds the preemption's checkpoint covers and the
	// seconds metered after the resume, at the provider's ask (the
	// market's index is far below it on a devnet), and nothing else.
	const price = 50_000 // 0.05 SYNC per core-hour, one core
	final := j.Assignments[0]
	wantCost := price*resume.Covered/3600 + price*final.Metered/3600
	if final.PricePerHour != price || j.Cost != wantCost || final.Paid != price*final.Metered/3600 {
		t.Fatalf("spot job cost %d (paid %d for %d s after the resume at %d usync/h), want %d: %d s covered + %d s metered at %d usync/h",
			j.Cost, final.Paid, final.Metered, final.PricePerHour, wantCost, resume.Covered, final.Metered, price)
	}
	if spent := before - balance(t, "alice", "--home", home); spent != j.Cost+j.Fee+p.Cost+p.Fee {
		t.Fatalf("the owner spent %d; the spot job cost %d + fee %d, the priority job %d + fee %d", spent, j.Cost, j.Fee, p.Cost, p.Fee)
	}
}
