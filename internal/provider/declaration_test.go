package provider_test

import (
	"testing"

	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestDeclarationAsks: a GPU machine asks for its GPU classes and for its
// cores (found on the GPU machine: without a CPU ask the devnet's example
// job, a CPU job, waited forever); one price for every class is a GPU
// price, so cores keep the CPU default unless priced by name.
func TestDeclarationAsks(t *testing.T) {
	kr, err := keys.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k, _ := kr.Add("p")
	inv := &hwinfo.Inventory{CPUCores: 16, RAMBytes: 64 << 30, DiskFreeBytes: 100 << 30, OS: "linux", Arch: "amd64",
		GPUs: []hwinfo.GPU{{UUID: "GPU-1", Name: "NVIDIA H200", Class: "H200_141GB", VRAMBytes: 141 << 30, ComputeCapability: "9.0"}}}
	fig := &hwinfo.Figures{Device: "cpu", Int8TOPS: 0.05, MemBandwidthGBs: 50}
	asks := func(prices map[string]uint64) map[string]ledger.Amount {
		out := map[string]ledger.Amount{}
		for _, a := range provider.Declaration(inv, fig, nil, provider.Options{Key: k, Prices: prices}).Asks {
			out[a.Class] = a.PricePerHour
		}
		return out
	}
	got := asks(map[string]uint64{provider.AnyClass: 800_000})
	if got["H200_141GB"] != 800_000 || got[ledger.CPUClass] != ledger.Amount(provider.DefaultCPUPrice) || len(got) != 2 {
		t.Errorf("one price for all: asks %v", got)
	}
	got = asks(map[string]uint64{provider.AnyClass: 800_000, ledger.CPUClass: 5_000})
	if got[ledger.CPUClass] != 5_000 {
		t.Errorf("priced cores: asks %v", got)
	}
	inv.GPUs = nil
	got = asks(map[string]uint64{provider.AnyClass: 7_000})
	if got[ledger.CPUClass] != 7_000 || len(got) != 1 {
		t.Errorf("CPU-only machine: asks %v", got)
	}
}
