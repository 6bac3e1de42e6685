package provider_test

import (
	"testing"

	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
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

// TestDeclarationFigures: the CPU's figure goes in measured, each GPU's in
// its own gpus[i].int8_gops (a GPU without a measurement declares none),
// and a device that measured anything declares at least 1 GOPS: 0 would
// mean "not measured", never challenged (a loaded 2-core machine measured
// 0.0004 TOPS and declared 0).
func TestDeclarationFigures(t *testing.T) {
	kr, err := keys.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k, _ := kr.Add("p")
	inv := &hwinfo.Inventory{CPUCores: 2, RAMBytes: 8 << 30, DiskFreeBytes: 10 << 30, OS: "linux", Arch: "amd64",
		GPUs: []hwinfo.GPU{
			{UUID: "GPU-1", Serial: "SN-1", Name: "NVIDIA H200", Class: "H200_141GB", VRAMBytes: 141 << 30, ComputeCapability: "9.0"},
			{UUID: "GPU-2", Name: "NVIDIA H200", Class: "H200_141GB", VRAMBytes: 141 << 30, ComputeCapability: "9.0"},
		}}
	cpu := &hwinfo.Figures{Device: "cpu", Int8TOPS: 0.0004, MemBandwidthGBs: 10}
	gpus := map[string]hwinfo.Figures{"GPU-1": {Device: "gpu:GPU-1", Int8TOPS: 456.8, Kernel: "gemm_mma_256x128"}}
	wasm := map[string]sandbox.Executor{"wasm": fake.New(nil).WithName("wasm")}
	pi := provider.Declaration(inv, cpu, gpus, provider.Options{Key: k, Region: "eu", Executors: []string{"wasm"}, Sandboxes: wasm, MaxJobs: 4})
	if pi.WasmEngine != "fake-1" {
		t.Errorf("wasm_engine %q, want the wasm executor's engine fake-1", pi.WasmEngine)
	}
	if pi.Measured.Int8GOPS != 1 {
		t.Errorf("CPU at 0.4 GOPS declares %d GOPS, want 1", pi.Measured.Int8GOPS)
	}
	g := pi.Inventory.GPUs
	if len(g) != 2 || g[0].Int8GOPS != 456_800 || g[0].Serial != "SN-1" || g[0].UUID != "GPU-1" || g[1].Int8GOPS != 0 {
		t.Errorf("GPUs declared %+v", g)
	}
	if err := pi.Validate(); err != nil {
		t.Errorf("the declaration is refused: %v", err)
	}
	over := provider.Declaration(inv, cpu, gpus, provider.Options{Key: k, Faults: &provider.Faults{OverclaimFactor: 3}})
	if over.Inventory.GPUs[0].Int8GOPS != 1_370_400 {
		t.Errorf("a 3× overclaim declares %d GOPS for the GPU", over.Inventory.GPUs[0].Int8GOPS)
	}
}

// TestDeclarationInterconnect: the GPUs' interconnect, as NVML found it,
// is declared for two or more GPUs, and valid to the ledger; one GPU
// declares none.
func TestDeclarationInterconnect(t *testing.T) {
	kr, err := keys.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k, _ := kr.Add("p")
	gpu := func(uuid string) hwinfo.GPU {
		return hwinfo.GPU{UUID: uuid, Name: "NVIDIA H100 80GB HBM3", Class: "H100_80GB", VRAMBytes: 80 << 30, ComputeCapability: "9.0"}
	}
	inv := &hwinfo.Inventory{CPUCores: 16, RAMBytes: 64 << 30, DiskFreeBytes: 100 << 30, OS: "linux", Arch: "amd64",
		GPUs: []hwinfo.GPU{gpu("GPU-1"), gpu("GPU-2")}, Interconnect: hwinfo.InterconnectNVLink}
	fig := &hwinfo.Figures{Device: "cpu", Int8TOPS: 0.05, MemBandwidthGBs: 50}
	pi := provider.Declaration(inv, fig, nil, provider.Options{Key: k, Executors: []string{"oci"}, MaxJobs: 1, Region: "eu"})
	if pi.Inventory.Interconnect != ledger.InterconnectNVLink {
		t.Errorf("two NVLinked GPUs declare %q", pi.Inventory.Interconnect)
	}
	if err := (&ledger.MsgRegisterProvider{ProviderInfo: pi}).ValidateBasic(); err != nil {
		t.Errorf("the ledger refuses the declaration: %v", err)
	}
	inv.GPUs = inv.GPUs[:1]
	if pi := provider.Declaration(inv, fig, nil, provider.Options{Key: k, Executors: []string{"oci"}, MaxJobs: 1}); pi.Inventory.Interconnect != "" {
		t.Errorf("one GPU declares %q", pi.Inventory.Interconnect)
	}
}
