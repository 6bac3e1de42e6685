package hwinfo

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPU describes one GPU as NVML reports it.
type GPU struct {
	Index             int    `json:"index"`
	UUID              string `json:"uuid"`
	Serial            string `json:"serial,omitempty"` // board serial, where NVML reads one
	Name              string `json:"name"`             // as NVML reports, e.g. "NVIDIA H100 80GB HBM3"
	Class             string `json:"class"`            // normalised hardware class, see ClassOf
	VRAMBytes         uint64 `json:"vram_bytes"`
	ComputeCapability string `json:"compute_capability"` // "9.0"
	PCIeGen           int    `json:"pcie_gen"`           // maximum link generation of the device in this host; 0 if unknown
	PCIeWidth         int    `json:"pcie_width"`         // maximum link width (lanes); 0 if unknown
}

// Inventory is what a provider has. Zero values mean "not determined"; the
// reason is then among Notes.
type Inventory struct {
	GPUs          []GPU  `json:"gpus"`
	DriverVersion string `json:"driver_version,omitempty"`
	CUDAVersion   string `json:"cuda_version,omitempty"` // "12.4" from NVML's CUDA driver version int
	// Interconnect is what links the GPUs to each other: InterconnectNVLink
	// when NVML reports every pair peer-to-peer capable over NVLink,
	// InterconnectPCIe otherwise; "" with fewer than two GPUs.
	Interconnect  string   `json:"interconnect,omitempty"`
	CPUModel      string   `json:"cpu_model"`
	CPUCores      int      `json:"cpu_cores"` // logical CPUs this process may use (affinity and cgroup quota)
	RAMBytes      uint64   `json:"ram_bytes"` // physical memory, capped by a cgroup memory limit
	DiskFreeBytes uint64   `json:"disk_free_bytes"`
	OS            string   `json:"os"`
	Arch          string   `json:"arch"`
	Notes         []string `json:"notes,omitempty"` // human-readable findings, e.g. "no NVML library found: CPU-only provider"
}

// Notef appends a human-readable finding to inv.Notes.
func (inv *Inventory) Notef(format string, args ...any) {
	inv.Notes = append(inv.Notes, fmt.Sprintf(format, args...))
}

// Fingerprinter fills in one part of the inventory.
//
// Fingerprint sets only the fields it owns and may append Notes. It returns an
// error only when its part could not be determined at all; Collect turns that
// error into a Note and carries on, so an implementation need not be careful to
// avoid failing. It must return promptly once ctx is done.
type Fingerprinter interface {
	Name() string
	Fingerprint(ctx context.Context, inv *Inventory) error
}

// Options configure Detect.
type Options struct {
	NVML     nvml.Interface // nil: the real library (github.com/NVIDIA/go-nvml/pkg/nvml); tests pass a mock
	DiskPath string         // where free disk is measured (the provider's --home); "" = "/"
}

// Fingerprinters returns the fingerprinters Detect runs, in order.
func Fingerprinters(o Options) []Fingerprinter {
	return []Fingerprinter{
		NVMLFingerprinter{Lib: o.NVML},
		CPUFingerprinter{},
		MemoryFingerprinter{},
		DiskFingerprinter{Path: o.DiskPath},
		OSFingerprinter{},
	}
}

// Detect inventories this machine. It returns an error only when ctx is done;
// anything it could not determine is explained in the inventory's Notes. A
// machine without NVML or without GPUs gives a CPU-only inventory.
func Detect(ctx context.Context, o Options) (*Inventory, error) {
	return Collect(ctx, Fingerprinters(o)...)
}

// Collect runs fingerprinters in order on a fresh Inventory. An error or a
// panic from one becomes a Note naming it; the others still run. Collect
// returns an error only when ctx is done, together with what it had so far.
func Collect(ctx context.Context, fps ...Fingerprinter) (*Inventory, error) {
	inv := &Inventory{GPUs: []GPU{}}
	for _, f := range fps {
		if err := ctx.Err(); err != nil {
			return inv, fmt.Errorf("hardware detection stopped before %s: %w", f.Name(), err)
		}
		if err := fingerprint(ctx, f, inv); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return inv, fmt.Errorf("hardware detection stopped in %s: %w", f.Name(), ctxErr)
			}
			inv.Notef("%s: %v", f.Name(), err)
		}
	}
	return inv, nil
}

// fingerprint runs f, turning a panic into an error.
func fingerprint(ctx context.Context, f Fingerprinter, inv *Inventory) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f.Fingerprint(ctx, inv)
}
