package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// counterSteps and counterWork size the counter job (testdata/counter):
// long enough to be killed in the middle of, on a loaded machine.
const counterSteps, counterWork = 3000, 3000

// counterResult is what an uninterrupted run of the counter writes.
func counterResult(n, work int) string {
	acc := make([]byte, 32)
	for i := range n {
		for range work {
			h := sha256.Sum256(fmt.Appendf(acc, "/%d", i))
			acc = h[:]
		}
	}
	return fmt.Sprintf("%d %x\n", n, acc)
}

// TestCheckpointResume (issue 17): a wasm job that counts through a long
// loop, keeping its state under its checkpoint path, checkpointed every
// second; its provider is killed with SIGKILL mid-run. The job resumes on
// the other provider from the last committed checkpoint (not from the
// beginning), its output equals an uninterrupted run's, and the owner's
// charge is exactly the lost provider's covered seconds plus the new
// provider's own, at their prices.
func TestCheckpointResume(t *testing.T) {
	parallel(t, weightHeavy)
	dir := t.TempDir()
	counterWasm(t, filepath.Join(dir, "counter.wasm"))
	spec := fmt.Sprintf(`name: counter
executor: wasm
module: ./counter.wasm
args: ["%d", "%d"]
outputs: [/out]
resources: {cpu: 1, memory: 256MiB, gpu: {count: 0}}
max_price: 0.5
timeout: 5m
verification: none # one provider at a time; a spot audit would need a third
checkpoint: {path: /ckpt, interval: 1s}
`, counterSteps, counterWork)
	testCheckpointResume(t, t.TempDir(), "wasm", dir, spec, counterResult(counterSteps, counterWork))
}

// testCheckpointResume is TestCheckpointResume's run of spec, a counter
// job (its files in dir) that keeps its state under /ckpt, checkpointed
// every second, and writes want to /out/result.txt when it is not
// interrupted: on a devnet in home of two providers offering executor, at 0.05
// SYNC a core-hour, the provider running it is killed with SIGKILL after
// three checkpoints; the job must resume on the other one from the last
// committed checkpoint, write want, say in its log that it resumed, and
// cost the covered and metered seconds at the price.
func testCheckpointResume(t *testing.T, home, executor, dir, spec, want string) {
	startDevnet(t, home, "--block-time", "100ms")
	provs := map[string]*proc{}
	addrs := map[string]string{}
	for _, name := range []string{"carol", "dave"} {
		p, addr := startProvider(t, home, name, "alice", "--allow-fetch-network", "127.0.0.1")
		provs[name], addrs[addr] = p, name
	}
	waitOfferCount(t, 60*time.Second, home, "", "executor="+executor, 2)
	specPath := filepath.Join(dir, "job.yaml")
	os.WriteFile(specPath, []byte(spec), 0o644)
	before := balance(t, "alice", "--home", home)
	var sub struct {
		ID uint64 `json:"id"`
	}
	gpunetJSON(t, &sub, "job", "submit", specPath, "--from", "alice", "--home", home)
	id := fmt.Sprint(sub.ID)
	status := func() ledger.Job {
		var j ledger.Job
		gpunetJSON(t, &j, "job", "status", id, "--from", "alice", "--home", home) // grants the key when due
		return j
	}
	poll := func() ledger.Job { return ownerJob(t, home, "alice", id) }
	var j ledger.Job
	waitUntil(t, 180*time.Second, "checkpoints of the counter's state committed", func() bool {
		j = poll()
		return len(j.Checkpoints) >= 3 && j.Checkpoints[len(j.Checkpoints)-1].Size > 1024 || j.Done()
	})
	if j.Done() {
		t.Fatalf("the job ended before it could be interrupted (make it longer): %s %s", j.State, j.Reason)
	}
	victim := addrs[j.Assignments[0].Provider.String()]
	provs[victim].kill()
	killed := time.Now()
	last := j.Checkpoints[len(j.Checkpoints)-1]
	t.Logf("killed %s while it ran job %s; its last checkpoint seen: %d (%d s covered, %d bytes)", victim, id, last.Seq, last.Covered, last.Size)

	var resumedAt time.Time
	var reassigned time.Time
	waitUntil(t, 120*time.Second, "job done after reassignment", func() bool {
		j = poll()
		if reassigned.IsZero() && j.ResumeSeq != 0 {
			reassigned = time.Now()
		}
		if resumedAt.IsZero() && j.State == ledger.JobRunning && len(j.Assignments) == 1 && addrs[j.Assignments[0].Provider.String()] != victim {
			resumedAt = time.Now()
		}
		return j.Done()
	})
	j = status()
	if j.State != ledger.JobSucceeded || addrs[j.Assignments[0].Provider.String()] == victim {
		t.Fatalf("after the kill: %s %s on %v", j.State, j.Reason, j.Assignments)
	}
	resume := j.ResumeCheckpoint()
	if j.ResumeSeq == 0 || resume == nil || addrs[resume.Provider.String()] != victim || j.Progress != resume.Covered {
		t.Fatalf("the job did not resume from the lost provider's checkpoint: resume_seq %d progress %d note %q checkpoints %+v", j.ResumeSeq, j.Progress, j.CheckpointNote, j.Checkpoints)
	}
	t.Logf("resumed from checkpoint %d (%d s of run kept); work lost: at most %s (kill to the last checkpoint's block); reassignment seen %s after the kill, running again %s after that",
		resume.Seq, resume.Covered, killed.Sub(time.Unix(resume.Time, 0)).Round(time.Second), reassigned.Sub(killed).Round(100*time.Millisecond), resumedAt.Sub(reassigned).Round(100*time.Millisecond))

	out := t.TempDir()
	if r := gpunet(t, "job", "get", id, "--from", "alice", "--home", home, "--out", out); r.code != 0 {
		t.Fatalf("%s", r)
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "result.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("output %q, an uninterrupted run gives %q", got, want)
	}
	log := gpunet(t, "job", "logs", id, "--from", "alice", "--home", home)
	if !strings.Contains(log.stdout, fmt.Sprintf("resuming from checkpoint %d", resume.Seq)) || !strings.Contains(log.stdout, "resuming at step") {
		t.Errorf("the job's log does not say it resumed (exit %d):\n%s\nstderr: %s", log.code, log.stdout, log.stderr)
	}

	// The charge: the lost provider's covered seconds and the new one's
	// metered seconds, each at its price, and nothing else.
	const price = 50_000 // 0.05 SYNC per core-hour, one core
	final := j.Assignments[0]
	wantCost := price*resume.Covered/3600 + price*final.Metered/3600
	if j.Cost != wantCost || final.Paid != price*final.Metered/3600 {
		t.Fatalf("cost %d (final provider paid %d for %d s), want %d: %d s covered + %d s metered at %d usync/h", j.Cost, final.Paid, final.Metered, wantCost, resume.Covered, final.Metered, price)
	}
	if spent := before - balance(t, "alice", "--home", home); spent != j.Cost+j.Fee {
		t.Fatalf("the owner spent %d, the job cost %d + fee %d", spent, j.Cost, j.Fee)
	}
	st := gpunet(t, "job", "status", id, "--from", "alice", "--home", home, "-o", "text")
	if !strings.Contains(st.stdout, "checkpoint") {
		t.Errorf("job status does not show the checkpoints:\n%s", st.stdout)
	}
}
