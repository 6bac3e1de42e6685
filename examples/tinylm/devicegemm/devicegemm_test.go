package devicegemm

import (
	"testing"

	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/gpu/kernels"
)

var requests = []struct {
	prompt string
	o      model.Options
}{
	{"Is not Fire a Body heated so hot as to emit Light copiously?", model.Options{MaxTokens: 40}},
	{"Do not Bodies act upon Light at a distance", model.Options{Temperature: 0.7, Seed: 42, MaxTokens: 60}},
	{"And", model.Options{Temperature: 1.3, Seed: 7, MaxTokens: 60}},
	{"zyxw unknown words", model.Options{Temperature: 1, TopP: 0.9, Seed: 3, MaxTokens: 60}},
}

// TestSameAsCPU: the int8 model on the GPU code path (weights in device
// memory padded to the kernels' tiles, a launch per product, copies in and
// out) gives the CPU's logits and completions, under a tensor-core
// kernel's name and dp4a's, and launches the kernel for its products. The
// device here is the Emulated one, which computes each entry with a plain
// dot product: a real GPU's kernels are checked the same way by
// `tinylm -gemm gpu` before it serves (model.Int8.SameLogits).
func TestSameAsCPU(t *testing.T) {
	cpu, err := model.DefaultInt8(model.CPU{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []*gpu.Emulated{
		{Name: "A100", Kernels: []string{kernels.TensorCoreKernels[0]}},
		{Name: "GTX 1080", Kernels: []string{"gemm_dp4a"}},
	} {
		m, err := model.DefaultInt8(Device{Dev: dev})
		if err != nil {
			t.Fatalf("%s: %v", dev.Name, err)
		}
		if err := m.SameLogits(cpu); err != nil {
			t.Error(err)
		}
		launched := dev.LaunchCount(dev.Kernels[0])
		tokens := 0
		for i, r := range requests {
			want := cpu.Generate(cpu.Tokenize(r.prompt), r.o)
			g := m.Generate(m.Tokenize(r.prompt), r.o)
			if a, b := g.Run(), want.Run(); a != b || g.Tokens() != want.Tokens() || g.FinishReason() != want.FinishReason() || g.Err() != nil {
				t.Errorf("%s, request %d: %q (%d, %s, %v); the CPU: %q", m.GEMM(), i, a, g.Tokens(), g.FinishReason(), g.Err(), b)
			}
			tokens += g.Tokens() + 1 // the End that finished it, or the last token's
		}
		// Two products a step; a completion stopped by length computes
		// no token after its last.
		if got := dev.LaunchCount(dev.Kernels[0]) - launched; got < 2*(tokens-len(requests)) || got > 2*tokens {
			t.Errorf("%s: %d launches for %d tokens", m.GEMM(), got, tokens)
		}
	}
}

// TestWeightsChecked: weights of the wrong shape, or an inner dimension
// the kernels do not take, are an error.
func TestWeightsChecked(t *testing.T) {
	d := Device{Dev: &gpu.Emulated{Name: "A100"}}
	if _, err := d.Weights(make([]int8, 10), 2, 64); err == nil {
		t.Error("10 entries as 2 rows of 64: no error")
	}
	if _, err := d.Weights(make([]int8, 96), 2, 48); err == nil {
		t.Error("an inner dimension of 48: no error")
	}
	w, err := d.Weights(make([]int8, 128), 2, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Mul(make([]int32, 3), make([]int8, 64), 1); err == nil {
		t.Error("c of 3 entries for 1 row of 2: no error")
	}
}
