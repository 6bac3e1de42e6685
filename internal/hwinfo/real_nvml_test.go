package hwinfo_test

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/gpunet/gpunet/internal/hwinfo"
)

// TestRealNVML detects the GPUs of the machine it runs on through the real
// NVML library. It runs only where GPUNET_REAL_NVML=1 says the machine has
// an NVIDIA GPU and driver (the GPU machine of a session; see
// BENCHMARKS.md, "GPU machine checks"); CI machines have none.
func TestRealNVML(t *testing.T) {
	if os.Getenv("GPUNET_REAL_NVML") != "1" {
		t.Skip("set GPUNET_REAL_NVML=1 on a machine with an NVIDIA GPU and driver")
	}
	inv, err := hwinfo.Detect(t.Context(), hwinfo.Options{DiskPath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(inv, "", "  ")
	t.Logf("inventory:\n%s", b)
	if len(inv.GPUs) == 0 {
		t.Fatalf("no GPU detected; notes: %v", inv.Notes)
	}
	for _, g := range inv.GPUs {
		if g.UUID == "" || g.Name == "" || g.VRAMBytes < 1<<30 || !regexp.MustCompile(`^\d+\.\d+$`).MatchString(g.ComputeCapability) || !regexp.MustCompile(`^[A-Z0-9_]+$`).MatchString(g.Class) {
			t.Errorf("implausible GPU: %+v", g)
		}
	}
	if inv.DriverVersion == "" || inv.CUDAVersion == "" {
		t.Errorf("driver %q, CUDA %q", inv.DriverVersion, inv.CUDAVersion)
	}
}
