package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/mandelbrot/kernel"
	"github.com/gpunet/gpunet/internal/ledger"
)

type jobJSON struct {
	ID          uint64 `json:"id"`
	State       string `json:"state"`
	Reason      string `json:"reason"`
	Attempts    uint64 `json:"attempts"`
	Cost        uint64 `json:"cost"`
	Refund      uint64 `json:"refund"`
	Assignments []struct {
		Provider  string `json:"provider"`
		StartedAt int64  `json:"started_at"`
	} `json:"assignments"`
}

// TestJobSurvivesProviderKill: the provider running a job is killed with
// SIGKILL; the ledger takes it offline after its missed challenges and
// reassigns the job, which another provider completes with the right
// output.
func TestJobSurvivesProviderKill(t *testing.T) {
	parallel(t, weightHeavy)
	home := t.TempDir()
	startDevnet(t, home, "--block-time", "100ms")
	provs := map[string]*proc{}
	addrs := map[string]string{}
	for _, name := range []string{"carol", "dave"} {
		p, addr := startProvider(t, home, name, "alice")
		provs[name], addrs[addr] = p, name
	}
	waitOfferCount(t, 30*time.Second, home, "", "", 2)

	// A job long enough to be killed in the middle of.
	dir := t.TempDir()
	wasm, err := os.ReadFile("../../examples/mandelbrot/mandelbrot.wasm")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "m.wasm"), wasm, 0o644)
	const w, h, iter = 600, 400, 3000
	spec := fmt.Sprintf(`name: long-mandelbrot
executor: wasm
module: ./m.wasm
args: ["%d", "%d", "%d"]
outputs: [/out]
resources: {cpu: 1, memory: 256MiB, gpu: {count: 0}}
max_price: 0.5
timeout: 5m
verification: none # reassignment is tested here; a spot audit would need a third provider
`, w, h, iter)
	specPath := filepath.Join(dir, "job.yaml")
	os.WriteFile(specPath, []byte(spec), 0o644)
	var sub struct {
		ID uint64 `json:"id"`
	}
	gpunetJSON(t, &sub, "job", "submit", specPath, "--from", "alice", "--home", home)
	id := fmt.Sprint(sub.ID)
	status := func() jobJSON {
		var j jobJSON
		gpunetJSON(t, &j, "job", "status", id, "--from", "alice", "--home", home) // grants the key when due
		return j
	}
	var first ledger.Job
	waitUntil(t, 30*time.Second, "job running", func() bool {
		first = ownerJob(t, home, "alice", id)
		return first.State == "running"
	})
	victim := addrs[first.Assignments[0].Provider.String()]
	time.Sleep(300 * time.Millisecond) // well into the run
	provs[victim].kill()
	t.Logf("killed %s while it ran job %s", victim, id)

	waitUntil(t, 90*time.Second, "job done after reassignment", func() bool {
		j := ownerJob(t, home, "alice", id)
		return j.State == "succeeded" || j.State == "failed" || j.State == "cancelled"
	})
	done := status()
	if done.State != "succeeded" || done.Attempts != 2 || addrs[done.Assignments[0].Provider] == victim {
		t.Fatalf("after the kill: %+v", done)
	}
	out := t.TempDir()
	r := gpunet(t, "job", "get", id, "--from", "alice", "--home", home, "--out", out)
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "mandelbrot.pgm"))
	if err != nil {
		t.Fatal(err)
	}
	want := kernel.PGM(w, h, kernel.Render(kernel.Whole, w, h, iter))
	if sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatalf("output differs from the kernel run natively (%d vs %d bytes)", len(got), len(want))
	}
	if !strings.Contains(r.stdout, "succeeded") {
		t.Errorf("job get output: %s", r.stdout)
	}
}
