package provider

import (
	"testing"

	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The CPU figure an agent declares must be measured with the workers its
// prover has: on two cores a figure from both cores was twice what the
// one-worker prover achieves, so every challenge ran late.
func TestCPUClaimMeasuredWithProverWorkers(t *testing.T) {
	a := &Agent{}
	p, _, err := a.proverFor(&ledger.HardwareChallenge{Device: 0})
	if err != nil {
		t.Fatal(err)
	}
	cpu, ok := p.(*prove.CPU)
	if !ok {
		t.Fatalf("device 0 prover is %T, want *prove.CPU", p)
	}
	if got, want := a.cpuBenchmarker().Workers, cpu.Workers; got != want {
		t.Fatalf("benchmark workers = %d, prover workers = %d", got, want)
	}
}
