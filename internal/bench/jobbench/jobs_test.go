package jobbench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// TestNoopModule: the hand-assembled no-op is a valid WASI command that
// leaves an empty /out behind, in the real executor.
func TestNoopModule(t *testing.T) {
	dir := t.TempDir()
	mod := filepath.Join(dir, "noop.wasm")
	if err := os.WriteFile(mod, noopWASM(), 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	ex, err := wasm.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	res, err := ex.Run(t.Context(), &sandbox.Job{ID: "noop", Module: mod, WorkDir: work, Outputs: []string{"/out"},
		Limits: sandbox.Limits{Timeout: 10 * time.Second}, Deterministic: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(res.OutputDir)
	if res.Failed || res.ExitCode != 0 {
		t.Fatalf("no-op run: %+v", res)
	}
	ents, err := os.ReadDir(filepath.Join(res.OutputDir, "out"))
	if err != nil || len(ents) != 0 {
		t.Fatalf("/out: %v, %v", ents, err)
	}
	t.Logf("%d bytes", len(noopWASM()))
}

// TestJobsSmall runs no-op spot jobs on a fast devnet with two providers (one
// runs each job, the other audits it: both are new), one
// consumer at a time.
func TestJobsSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{BlockTime: 50 * time.Millisecond, Poll: 20 * time.Millisecond, Providers: 2,
		LatencyJobs: 2, SustainedJobs: 2, Concurrency: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range []Phase{res.Latency, res.Sustained} {
		if ph.Succeeded != ph.Jobs || ph.Failed != 0 || ph.P50Ms <= 0 || ph.BlocksP50 < 1 || ph.SubmitP50Ms <= 0 {
			t.Errorf("phase %+v", ph)
		}
	}
	if res.Sustained.JobsPerS <= 0 {
		t.Errorf("sustained %+v", res.Sustained)
	}
	t.Logf("latency %+v", res.Latency)
	t.Logf("sustained %+v", res.Sustained)
}

// BenchmarkJobs is `gpunet bench job` at its defaults as a Go benchmark:
// each iteration is a whole run (devnet set-up, latency and sustained
// phases). Use -benchtime 1x.
func BenchmarkJobs(b *testing.B) {
	var p50, blocks, rate float64
	for range b.N {
		res, err := Run(b.Context(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		p50 += res.Latency.P50Ms
		blocks += float64(res.Latency.BlocksMax)
		rate += res.Sustained.JobsPerS
	}
	n := float64(b.N)
	b.ReportMetric(p50/n, "p50-ms")
	b.ReportMetric(blocks/n, "max-blocks")
	b.ReportMetric(rate/n, "jobs/s")
	b.ReportMetric(0, "ns/op")
}
