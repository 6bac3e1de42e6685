package hwinfo

import (
	"context"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLFingerprinter finds NVIDIA GPUs, the driver version and the CUDA driver
// version through NVML.
//
// Without NVML (no libnvidia-ml.so.1, no driver loaded, Init failing or
// panicking) or without GPUs it records a Note saying the provider is CPU-only
// and returns nil. An error on one device or field skips just that device or
// field, with a Note naming the device and the error. Shutdown is always called
// after a successful Init.
type NVMLFingerprinter struct {
	Lib nvml.Interface // nil: nvml.New(), the real library
}

// Name returns "nvml".
func (NVMLFingerprinter) Name() string { return "nvml" }

// nvcall runs one NVML call, turning a non-SUCCESS return into an error (an
// nvml.Return, so errors.Is works against nvml constants) and a panic into an
// error. Mocks panic on methods they do not implement; the real library
// returns ERROR_FUNCTION_NOT_FOUND for symbols an old driver lacks.
//
// Recovering does not make it safe to call NVML before a successful Init: the
// real library then dies on an unresolved C symbol, which no recover catches.
func nvcall(f func() nvml.Return) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	if ret := f(); ret != nvml.SUCCESS {
		return ret
	}
	return nil
}

// Fingerprint fills inv.GPUs, inv.DriverVersion and inv.CUDAVersion.
func (f NVMLFingerprinter) Fingerprint(ctx context.Context, inv *Inventory) error {
	lib := f.Lib
	if lib == nil {
		// nvml.New, not the package-level functions: a library of our own
		// whose Init/Shutdown reference count nobody else touches.
		lib = nvml.New()
	}
	if err := nvcall(lib.Init); err != nil {
		switch {
		case errors.Is(err, nvml.ERROR_LIBRARY_NOT_FOUND):
			inv.Notef("no NVML library found (libnvidia-ml.so.1; is the NVIDIA driver installed?): CPU-only provider")
		case errors.Is(err, nvml.ERROR_DRIVER_NOT_LOADED):
			inv.Notef("NVML library found but the NVIDIA kernel driver is not loaded: CPU-only provider")
		default:
			inv.Notef("NVML initialisation failed (%v): CPU-only provider", err)
		}
		return nil
	}
	defer func() {
		if err := nvcall(lib.Shutdown); err != nil {
			inv.Notef("NVML shutdown: %v", err)
		}
	}()

	var driver string
	if err := nvcall(func() (r nvml.Return) { driver, r = lib.SystemGetDriverVersion(); return }); err != nil {
		inv.Notef("NVML driver version: %v", err)
	}
	inv.DriverVersion = driver
	var cuda int
	if err := nvcall(func() (r nvml.Return) { cuda, r = lib.SystemGetCudaDriverVersion(); return }); err != nil {
		inv.Notef("NVML CUDA driver version: %v", err)
	} else {
		inv.CUDAVersion = cudaVersion(cuda)
	}

	var count int
	if err := nvcall(func() (r nvml.Return) { count, r = lib.DeviceGetCount(); return }); err != nil {
		inv.Notef("NVML device count: %v: CPU-only provider", err)
		return nil
	}
	if count == 0 {
		inv.Notef("NVML found (driver %s) but no GPUs: CPU-only provider", orUnknown(driver))
		return nil
	}
	for i := range count {
		if err := ctx.Err(); err != nil {
			return err
		}
		if g, ok := nvmlDevice(lib, i, inv); ok {
			inv.GPUs = append(inv.GPUs, g)
		}
	}
	if len(inv.GPUs) == 0 {
		inv.Notef("NVML reports %d GPUs but none could be read: CPU-only provider", count)
	}
	inv.Interconnect = nvmlInterconnect(lib, inv)
	return nil
}

// Values of Inventory.Interconnect: the ledger's words for them.
const (
	InterconnectNVLink = "nvlink"
	InterconnectPCIe   = "pcie"
)

// nvmlInterconnect says what links inv's GPUs: InterconnectNVLink when
// NVML reports every pair of them peer-to-peer capable over NVLink
// (nvmlDeviceGetP2PStatus with NVML_P2P_CAPS_INDEX_NVLINK: direct links or
// an NVSwitch), InterconnectPCIe when some pair is not, or cannot be asked
// (with a Note), "" with fewer than two GPUs. A gang's job that asks for
// NVLink counts on every GPU reaching every other over it, so one pair
// short is PCIe.
func nvmlInterconnect(lib nvml.Interface, inv *Inventory) string {
	if len(inv.GPUs) < 2 {
		return ""
	}
	devs := make([]nvml.Device, len(inv.GPUs))
	for i, g := range inv.GPUs {
		if err := nvcall(func() (r nvml.Return) { devs[i], r = lib.DeviceGetHandleByIndex(g.Index); return }); err != nil || devs[i] == nil {
			inv.Notef("GPU %d: no device handle for its NVLink status (%v): interconnect taken as PCIe", g.Index, err)
			return InterconnectPCIe
		}
	}
	for i := range devs {
		for j := i + 1; j < len(devs); j++ {
			var st nvml.GpuP2PStatus
			err := nvcall(func() (r nvml.Return) { st, r = devs[i].GetP2PStatus(devs[j], nvml.P2P_CAPS_INDEX_NVLINK); return })
			if errors.Is(err, nvml.ERROR_NOT_SUPPORTED) || errors.Is(err, nvml.ERROR_FUNCTION_NOT_FOUND) {
				return InterconnectPCIe // a driver or board without it: nothing to note
			}
			if err != nil {
				inv.Notef("GPUs %d and %d: NVLink peer-to-peer status: %v: interconnect taken as PCIe", inv.GPUs[i].Index, inv.GPUs[j].Index, err)
				return InterconnectPCIe
			}
			if st != nvml.P2P_STATUS_OK {
				return InterconnectPCIe
			}
		}
	}
	return InterconnectNVLink
}

// nvmlDevice reads GPU i. It returns false, with a Note, only when the device
// handle itself cannot be had; a failing field is left zero with a Note.
func nvmlDevice(lib nvml.Interface, i int, inv *Inventory) (GPU, bool) {
	var dev nvml.Device
	if err := nvcall(func() (r nvml.Return) { dev, r = lib.DeviceGetHandleByIndex(i); return }); err != nil {
		inv.Notef("GPU %d: skipped: no device handle: %v", i, err)
		return GPU{}, false
	}
	if dev == nil {
		inv.Notef("GPU %d: skipped: NVML returned no device handle", i)
		return GPU{}, false
	}
	g := GPU{Index: i}
	if err := nvcall(func() (r nvml.Return) { g.Name, r = dev.GetName(); return }); err != nil {
		inv.Notef("GPU %d: name: %v", i, err)
	}
	label := fmt.Sprintf("GPU %d", i)
	if g.Name != "" {
		label = fmt.Sprintf("GPU %d (%s)", i, g.Name)
	}
	if err := nvcall(func() (r nvml.Return) { g.UUID, r = dev.GetUUID(); return }); err != nil {
		inv.Notef("%s: UUID: %v", label, err)
	}
	// The board serial, where NVML has it (data-centre boards): best
	// effort, consumer boards answer NOT_SUPPORTED.
	if err := nvcall(func() (r nvml.Return) { g.Serial, r = dev.GetSerial(); return }); err != nil {
		g.Serial = ""
	}
	var mem nvml.Memory
	if err := nvcall(func() (r nvml.Return) { mem, r = dev.GetMemoryInfo(); return }); err != nil {
		inv.Notef("%s: memory size: %v", label, err)
	} else {
		g.VRAMBytes = mem.Total
	}
	var major, minor int
	if err := nvcall(func() (r nvml.Return) { major, minor, r = dev.GetCudaComputeCapability(); return }); err != nil {
		inv.Notef("%s: compute capability: %v", label, err)
	} else {
		g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	// The maximum link, not the current one: an idle GPU drops its link to
	// gen 1 to save power, which says nothing about what a job will get.
	g.PCIeGen = pcieField(inv, label, "PCIe generation", dev.GetMaxPcieLinkGeneration, dev.GetCurrPcieLinkGeneration)
	g.PCIeWidth = pcieField(inv, label, "PCIe width", dev.GetMaxPcieLinkWidth, dev.GetCurrPcieLinkWidth)
	g.Class = ClassOf(g.Name, g.VRAMBytes)
	return g, true
}

// pcieField reads a PCIe link property, falling back from the maximum to the
// current value. NOT_SUPPORTED (common in VMs and on some boards) is silent.
func pcieField(inv *Inventory, label, what string, get ...func() (int, nvml.Return)) int {
	var err error
	for _, f := range get {
		var v int
		if err = nvcall(func() (r nvml.Return) { v, r = f(); return }); err == nil {
			return v
		}
	}
	if !errors.Is(err, nvml.ERROR_NOT_SUPPORTED) {
		inv.Notef("%s: %s: %v", label, what, err)
	}
	return 0
}

// cudaVersion formats NVML's CUDA driver version (1000·major + 10·minor,
// e.g. 12040) as "12.4".
func cudaVersion(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
