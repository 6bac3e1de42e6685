package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The agent's GPUs as compute devices: each GPU that NVML found is opened
// through the CUDA driver (package gpu), measured with its own benchmark,
// and answers the hardware challenges the ledger issues for it with the
// kernel the benchmark chose. Without a driver, GPUs are still rented out
// (containers get them through CDI) but declare no throughput of their own,
// so the ledger never challenges them and ranks them on nothing they have
// not shown.

// gpuDevice is one opened GPU.
type gpuDevice struct {
	dev gpu.Backend
	fig hwinfo.Figures
}

// openGPUs opens and measures the GPUs of inv: Options.GPUBackends if
// set, else this machine's CUDA devices. It returns them by UUID; a GPU
// that cannot be opened or measured is left out with a log line saying
// why.
func (a *Agent) openGPUs(ctx context.Context, inv *hwinfo.Inventory) map[string]*gpuDevice {
	if len(inv.GPUs) == 0 {
		return nil
	}
	backends := a.o.GPUBackends
	if backends == nil {
		devs, err := gpu.Open()
		switch {
		case errors.Is(err, gpu.ErrNoDriver):
			a.gpuNote("GPUs are rented out but not measured or challenged: %v", err)
			return nil
		case err != nil:
			a.gpuNote("some GPUs could not be opened: %v", err)
		}
		for _, d := range devs {
			backends = append(backends, d)
		}
	}
	byUUID := map[string]gpu.Backend{}
	for _, b := range backends {
		byUUID[b.UUID()] = b
	}
	out := map[string]*gpuDevice{}
	for _, g := range inv.GPUs {
		b := byUUID[g.UUID]
		if g.UUID == "" || b == nil {
			a.gpuNote("GPU %d (%s) not measured: the CUDA driver has no device with its UUID", g.Index, g.UUID)
			continue
		}
		delete(byUUID, g.UUID)
		fig, err := (&gpu.Benchmarker{Dev: b}).Run(ctx, a.o.BenchBudget)
		if err != nil {
			a.gpuNote("GPU %d (%s) not measured: %v", g.Index, g.UUID, err)
			b.Close()
			continue
		}
		a.gpuNote("GPU %d: %s: %.1f int8 TOPS for a whole challenge proof with %s (alone %.1f), %.0f GB/s", g.Index, b.Describe(), fig.Int8TOPS, fig.Kernel, kernelTOPS(fig), fig.MemBandwidthGBs)
		out[g.UUID] = &gpuDevice{dev: b, fig: fig}
	}
	for _, b := range byUUID { // devices NVML did not list
		b.Close()
	}
	return out
}

// gpuNote logs a finding about the GPUs and keeps it for the status.
func (a *Agent) gpuNote(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	a.log.Info("gpu: " + msg)
	a.update(func(s *Status) { s.GPUNotes = append(s.GPUNotes, msg) })
}

func kernelTOPS(f hwinfo.Figures) float64 {
	for _, k := range f.Kernels {
		if k.Kernel == f.Kernel {
			return k.Int8TOPS
		}
	}
	return 0
}

func (a *Agent) closeGPUs() {
	for _, d := range a.gpuDevs {
		d.dev.Close()
	}
}

// proverFor returns the prover of the device a challenge names: the CPU
// for device 0, else the GPU with that UUID.
func (a *Agent) proverFor(c *ledger.HardwareChallenge) (prove.Prover, string, error) {
	if c.Device == 0 {
		return &prove.CPU{Workers: a.cpuProverWorkers()}, "cpu", nil
	}
	d := a.gpuDevs[c.DeviceUUID]
	if d == nil {
		return nil, "", fmt.Errorf("the challenge is for GPU %s, which this agent has not opened", c.DeviceUUID)
	}
	return &gpu.Prover{Dev: d.dev, Kernel: d.fig.Kernel}, d.fig.Device + " (" + d.fig.Kernel + ")", nil
}
