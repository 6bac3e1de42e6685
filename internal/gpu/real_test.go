package gpu

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
)

// TestRealCUDA runs the kernels on this machine's GPUs when it has an
// NVIDIA driver and a GPU (the tests never need one; BENCHMARKS.md says
// where this ran): every GEMM kernel against the CPU, and the prover
// against the CPU prover on challenges of a few shapes. GPUNET_REAL_CUDA=1
// makes a missing GPU a failure rather than a skip.
//
//	go test -c -o gpu.test ./internal/gpu && GPUNET_REAL_CUDA=1 ./gpu.test -test.run TestRealCUDA -test.v
func TestRealCUDA(t *testing.T) {
	devs, err := Open()
	if len(devs) == 0 {
		if os.Getenv("GPUNET_REAL_CUDA") == "1" {
			t.Fatalf("GPUNET_REAL_CUDA=1 but no CUDA device: %v", err)
		}
		t.Skipf("no NVIDIA GPU here (%v)", err)
	}
	if err != nil {
		t.Error(err) // a device that did not open
	}
	ctx := context.Background()
	for _, dev := range devs {
		t.Logf("device: %s, kernels %v", dev.Describe(), dev.GEMMKernels())
		b := &Benchmarker{Dev: dev}
		for _, k := range dev.GEMMKernels() {
			if err := b.check(k); err != nil {
				t.Errorf("%s: %v", k, err)
			}
		}
		for _, c := range []challenge.Challenge{
			testChallenge(1, 576, 64, 192, 20),
			testChallenge(2, 1024, 4096, 1024, 60),
			testChallenge(3, 4160, 2048, 1728, 60), // not multiples of the tiles
		} {
			cpu, err := (&prove.CPU{}).Commit(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range dev.GEMMKernels() {
				t0 := time.Now()
				cm, err := (&Prover{Dev: dev, Kernel: k, BlockBytes: 64 << 20}).Commit(ctx, c)
				if err != nil {
					t.Errorf("%s %s: %v", c.Size, k, err)
					continue
				}
				dt := time.Since(t0)
				if cm.Root() != cpu.Root() {
					t.Errorf("%s %s: root %x, the CPU prover's %x", c.Size, k, cm.Root(), cpu.Root())
				}
				rnd := [32]byte{7}
				op, err := cm.Open(ctx, rnd)
				if err == nil {
					err = c.Verify(cm.Root(), rnd, op)
				}
				if err != nil {
					t.Errorf("%s %s: opening: %v", c.Size, k, err)
				}
				t.Logf("%s with %s: commit %v", c.Size, k, dt)
				cm.Close()
			}
			cpu.Close()
		}
		dev.Close()
	}
}
