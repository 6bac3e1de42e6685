package hwinfo

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCPUBenchmarkerRun(t *testing.T) {
	b := NewCPUBenchmarker(0)
	if b.Device() != "cpu" {
		t.Errorf("Device() = %q, want cpu", b.Device())
	}
	const budget = 300 * time.Millisecond
	f, err := b.Run(t.Context(), budget)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("%+v", f)
	if f.Device != "cpu" || f.Int8TOPS <= 0 || f.MemBandwidthGBs <= 0 {
		t.Errorf("figures = %+v, want device cpu and positive rates", f)
	}
	// The budget is kept, not exceeded without bound: the race detector
	// and a busy machine (a CI runner with other test binaries) slow the
	// one GEMM that may overrun, so the bound is generous; the speed of
	// the measurement is the benchmarks' business.
	if f.Duration <= 0 || f.Duration > budget+5*time.Second {
		t.Errorf("Duration = %v for a %v budget", f.Duration, budget)
	}
}

func TestCPUBenchmarkerRunErrors(t *testing.T) {
	b := &CPUBenchmarker{Workers: 1, BufferBytes: 2 << 20}
	if _, err := b.Run(t.Context(), 0); err == nil {
		t.Error("Run with a zero budget: no error")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Run(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: err = %v, want context.Canceled", err)
	}
	// A context deadline shorter than the budget wins.
	ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	f, err := b.Run(ctx, time.Minute)
	if err != nil {
		t.Fatalf("Run with a short context deadline: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second || f.Int8TOPS <= 0 {
		t.Errorf("took %v and gave %+v: the context deadline was not respected", took, f)
	}
}

// TestGEMMBenchBlocks runs the timed product on sizes whose last block of
// rows is short or that have fewer rows than a block, and stops it.
func TestGEMMBenchBlocks(t *testing.T) {
	for _, n := range []int{1, 5, 64, 100} {
		g := newGEMMBench(n)
		if !g.run(3, func() bool { return false }) {
			t.Errorf("n=%d: run reported a stop that did not happen", n)
		}
		if g.run(3, func() bool { return true }) {
			t.Errorf("n=%d: run ignored stop", n)
		}
	}
}
