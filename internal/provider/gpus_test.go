package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestGPUPool: jobs get distinct GPUs that fit them, identified by UUID
// (by index when there is none), and get them back when released.
func TestGPUPool(t *testing.T) {
	var p gpuPool
	p.init([]hwinfo.GPU{
		{Index: 0, UUID: "GPU-a", Class: "RTX_4090", VRAMBytes: 24 << 30},
		{Index: 1, UUID: "GPU-b", Class: "A100_80GB", VRAMBytes: 80 << 30},
		{Index: 2, Class: "A100_80GB", VRAMBytes: 80 << 30},
	})
	if got, err := p.take(1, &ledger.JobSpec{}); err != nil || got != nil {
		t.Fatalf("CPU job: %v %v", got, err)
	}
	got, err := p.take(2, &ledger.JobSpec{GPUCount: 1, GPUModels: []string{"A100_80GB"}})
	if err != nil || !slices.Equal(got, []string{"GPU-b"}) {
		t.Fatalf("job 2: %v %v", got, err)
	}
	got, err = p.take(3, &ledger.JobSpec{GPUCount: 1, MinVRAM: 40 << 30})
	if err != nil || !slices.Equal(got, []string{"2"}) {
		t.Fatalf("job 3: %v %v, want the A100 without a UUID, by index", got, err)
	}
	if _, err := p.take(4, &ledger.JobSpec{GPUCount: 1, MinVRAM: 40 << 30}); err == nil || !strings.Contains(err.Error(), "0 of this machine's 3 fit and are free") {
		t.Fatalf("job 4 got a GPU in use: %v", err)
	}
	p.release(2)
	if got, err := p.take(4, &ledger.JobSpec{GPUCount: 1, MinVRAM: 40 << 30}); err != nil || !slices.Equal(got, []string{"GPU-b"}) {
		t.Fatalf("after release: %v %v", got, err)
	}
}
