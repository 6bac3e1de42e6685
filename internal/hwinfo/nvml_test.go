package hwinfo

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	mockserver "github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// mockDevice is an NVML device as a driver reports an H100 SXM.
func mockDevice(uuid string) *mock.Device {
	return &mock.Device{
		GetNameFunc:                   func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetUUIDFunc:                   func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetSerialFunc:                 func() (string, nvml.Return) { return "SN-" + uuid, nvml.SUCCESS },
		GetMemoryInfoFunc:             func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 81559 << 20}, nvml.SUCCESS },
		GetCudaComputeCapabilityFunc:  func() (int, int, nvml.Return) { return 9, 0, nvml.SUCCESS },
		GetMaxPcieLinkGenerationFunc:  func() (int, nvml.Return) { return 5, nvml.SUCCESS },
		GetMaxPcieLinkWidthFunc:       func() (int, nvml.Return) { return 16, nvml.SUCCESS },
		GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { return 16, nvml.SUCCESS },
		// PCIe between GPUs unless a test links them (interconnect_test.go).
		GetP2PStatusFunc: func(nvml.Device, nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		},
	}
}

// mockLib is an NVML library with the given devices; a nil device is one that
// has fallen off the bus.
func mockLib(devs ...nvml.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12040, nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			switch {
			case i < 0 || i >= len(devs):
				return nil, nvml.ERROR_INVALID_ARGUMENT
			case devs[i] == nil:
				return nil, nvml.ERROR_GPU_IS_LOST
			}
			return devs[i], nvml.SUCCESS
		},
	}
}

// fingerprintNVML runs only the NVML fingerprinter.
func fingerprintNVML(t *testing.T, lib nvml.Interface) *Inventory {
	t.Helper()
	inv, err := Collect(t.Context(), NVMLFingerprinter{Lib: lib})
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return inv
}

func hasNote(inv *Inventory, parts ...string) bool {
	return slices.ContainsFunc(inv.Notes, func(n string) bool {
		for _, p := range parts {
			if !strings.Contains(n, p) {
				return false
			}
		}
		return true
	})
}

func TestNVMLOneGPU(t *testing.T) {
	lib := mockLib(mockDevice("GPU-1234"))
	inv := fingerprintNVML(t, lib)
	want := GPU{
		Index: 0, UUID: "GPU-1234", Serial: "SN-GPU-1234", Name: "NVIDIA H100 80GB HBM3", Class: ClassH100_80GB,
		VRAMBytes: 81559 << 20, ComputeCapability: "9.0", PCIeGen: 5, PCIeWidth: 16,
	}
	if len(inv.GPUs) != 1 || inv.GPUs[0] != want {
		t.Fatalf("GPUs = %+v, want [%+v]", inv.GPUs, want)
	}
	if inv.DriverVersion != "550.54.15" || inv.CUDAVersion != "12.4" {
		t.Errorf("driver, CUDA = %q, %q, want 550.54.15, 12.4", inv.DriverVersion, inv.CUDAVersion)
	}
	if len(inv.Notes) != 0 {
		t.Errorf("Notes = %q, want none", inv.Notes)
	}
	if got := len(lib.ShutdownCalls()); got != 1 {
		t.Errorf("Shutdown called %d times, want 1", got)
	}
}

func TestNVMLNoGPUs(t *testing.T) {
	lib := mockLib()
	inv := fingerprintNVML(t, lib)
	if len(inv.GPUs) != 0 {
		t.Errorf("GPUs = %+v, want none", inv.GPUs)
	}
	if !hasNote(inv, "no GPUs", "CPU-only") {
		t.Errorf("Notes = %q, want one saying no GPUs: CPU-only", inv.Notes)
	}
	if got := len(lib.ShutdownCalls()); got != 1 {
		t.Errorf("Shutdown called %d times, want 1", got)
	}
}

func TestNVMLDGXA100(t *testing.T) {
	// The dgxa100 mock does not implement the PCIe link calls, and real
	// drivers may lack them too: without them the fields are left zero with a
	// note. With them, the GPUs are complete and there is nothing to note.
	for _, withPCIe := range []bool{false, true} {
		server := dgxa100.New()
		if withPCIe {
			for _, d := range server.Devices {
				d := d.(*mockserver.Device)
				d.GetMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return 4, nvml.SUCCESS }
				d.GetMaxPcieLinkWidthFunc = func() (int, nvml.Return) { return 16, nvml.SUCCESS }
				// A DGX A100's GPUs all reach each other over NVSwitch.
				d.GetP2PStatusFunc = func(nvml.Device, nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
					return nvml.P2P_STATUS_OK, nvml.SUCCESS
				}
			}
		}
		inv := fingerprintNVML(t, server)
		if len(inv.GPUs) != 8 {
			t.Fatalf("withPCIe=%v: %d GPUs, want 8", withPCIe, len(inv.GPUs))
		}
		uuids := map[string]bool{}
		for i, g := range inv.GPUs {
			uuids[g.UUID] = true
			if g.Index != i || g.Class != ClassA100_40GB || g.VRAMBytes != 40960<<20 || g.ComputeCapability != "8.0" {
				t.Errorf("withPCIe=%v: GPU %d = %+v", withPCIe, i, g)
			}
			if withPCIe && (g.PCIeGen != 4 || g.PCIeWidth != 16) {
				t.Errorf("GPU %d PCIe = gen%d x%d, want gen4 x16", i, g.PCIeGen, g.PCIeWidth)
			}
		}
		if len(uuids) != 8 {
			t.Errorf("withPCIe=%v: %d distinct UUIDs, want 8", withPCIe, len(uuids))
		}
		if inv.DriverVersion != "550.54.15" || inv.CUDAVersion != "12.4" {
			t.Errorf("driver, CUDA = %q, %q", inv.DriverVersion, inv.CUDAVersion)
		}
		if withPCIe && inv.Interconnect != InterconnectNVLink {
			t.Errorf("interconnect %q, want nvlink", inv.Interconnect)
		}
		if withPCIe && len(inv.Notes) != 0 {
			t.Errorf("Notes = %q, want none", inv.Notes)
		}
		if !withPCIe && !hasNote(inv, "GPU 7 (Mock NVIDIA A100-SXM4-40GB)", "PCIe generation", "panic") {
			t.Errorf("Notes = %q, want one per GPU about the PCIe generation", inv.Notes)
		}
		if got := inv.Summary(); withPCIe && !strings.HasPrefix(got, "8× A100_40GB (40 GiB, cc 8.0, PCIe gen4 x16), driver 550.54.15, CUDA 12.4\n") {
			t.Errorf("Summary() = %q", got)
		}
	}
}

func TestNVMLInitFails(t *testing.T) {
	tests := []struct {
		name string
		init func() nvml.Return
		note string
	}{
		{"library not found", func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }, "no NVML library found"},
		{"driver not loaded", func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }, "driver is not loaded"},
		{"no permission", func() nvml.Return { return nvml.ERROR_NO_PERMISSION }, "ERROR_NO_PERMISSION"},
		{"panics", func() nvml.Return { panic("libnvidia-ml.so.1: cannot open shared object file") }, "cannot open shared object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lib := mockLib(mockDevice("GPU-1"))
			lib.InitFunc = tt.init
			inv, err := Detect(t.Context(), Options{NVML: lib, DiskPath: t.TempDir()})
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if len(inv.GPUs) != 0 {
				t.Errorf("GPUs = %+v, want none", inv.GPUs)
			}
			if !hasNote(inv, tt.note, "CPU-only provider") {
				t.Errorf("Notes = %q, want one with %q and CPU-only provider", inv.Notes, tt.note)
			}
			if inv.CPUCores == 0 || inv.OS == "" {
				t.Errorf("host part missing: %+v", inv)
			}
			for name, calls := range map[string]int{
				"Shutdown":       len(lib.ShutdownCalls()),
				"DeviceGetCount": len(lib.DeviceGetCountCalls()),
			} {
				if calls != 0 {
					t.Errorf("%s called %d times after a failed Init, want 0", name, calls)
				}
			}
		})
	}
}

func TestNVMLDeviceErrors(t *testing.T) {
	broken := mockDevice("GPU-2")
	broken.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_UNKNOWN }
	broken.GetMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	broken.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	maxWidthOnly := mockDevice("GPU-3")
	maxWidthOnly.GetMaxPcieLinkWidthFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }
	maxWidthOnly.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 8, nvml.SUCCESS }

	lib := mockLib(mockDevice("GPU-1"), broken, nil, maxWidthOnly)
	lib.SystemGetCudaDriverVersionFunc = nil // panics, as a mock does for what it lacks

	inv := fingerprintNVML(t, lib)
	if got := len(inv.GPUs); got != 3 {
		t.Fatalf("%d GPUs, want 3 (the lost one skipped): %+v", got, inv.GPUs)
	}
	if g := inv.GPUs[1]; g.UUID != "GPU-2" || g.VRAMBytes != 0 || g.PCIeGen != 0 || g.PCIeWidth != 16 {
		t.Errorf("GPU with failing memory info = %+v, want VRAM 0, PCIe gen 0 x16", g)
	}
	if g := inv.GPUs[2]; g.Index != 3 || g.PCIeWidth != 8 {
		t.Errorf("GPU 3 = %+v, want index 3, PCIe width 8 from the current link", g)
	}
	wantNotes := [][]string{
		{"GPU 1 (NVIDIA H100 80GB HBM3)", "memory size", "ERROR_UNKNOWN"},
		{"GPU 2", "skipped", "ERROR_GPU_IS_LOST"},
		{"CUDA driver version", "panic"},
	}
	for _, parts := range wantNotes {
		if !hasNote(inv, parts...) {
			t.Errorf("Notes = %q, want one with %q", inv.Notes, parts)
		}
	}
	if hasNote(inv, "PCIe") {
		t.Errorf("Notes = %q: NOT_SUPPORTED and a working fallback should be silent", inv.Notes)
	}
	if inv.CUDAVersion != "" || inv.DriverVersion != "550.54.15" {
		t.Errorf("driver, CUDA = %q, %q, want 550.54.15 and none", inv.DriverVersion, inv.CUDAVersion)
	}
	if got := len(lib.ShutdownCalls()); got != 1 {
		t.Errorf("Shutdown called %d times, want 1", got)
	}
}

func TestNVMLShutdownOnCancel(t *testing.T) {
	lib := mockLib(mockDevice("GPU-1"), mockDevice("GPU-2"))
	ctx, cancel := context.WithCancel(t.Context())
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { cancel(); return 2, nvml.SUCCESS }
	if _, err := Collect(ctx, NVMLFingerprinter{Lib: lib}); err == nil {
		t.Error("Collect with a cancelled context: no error")
	}
	if got := len(lib.ShutdownCalls()); got != 1 {
		t.Errorf("Shutdown called %d times, want 1", got)
	}
}

func TestCUDAVersion(t *testing.T) {
	tests := map[int]string{12040: "12.4", 11080: "11.8", 12000: "12.0", 13010: "13.1", 0: "", -1: ""}
	for in, want := range tests {
		if got := cudaVersion(in); got != want {
			t.Errorf("cudaVersion(%d) = %q, want %q", in, got, want)
		}
	}
}
