// Package nvmlsim builds simulated NVML libraries (on go-nvml's mock) so
// that tests and devnet simulations can give a provider GPUs the machine
// does not have. Nothing in production detection uses it.
package nvmlsim

import (
	"fmt"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// GPU describes one simulated device.
type GPU struct {
	Name         string // as a driver reports it, e.g. "NVIDIA GeForce RTX 4090"
	VRAMMiB      uint64
	Major, Minor int // compute capability
}

// Common GPUs.
var (
	H100    = GPU{"NVIDIA H100 80GB HBM3", 81559, 9, 0}
	RTX4090 = GPU{"NVIDIA GeForce RTX 4090", 24564, 8, 9}
	L4      = GPU{"NVIDIA L4", 23034, 8, 9}
)

// What a simulated board reports while idle.
const (
	IdleTemperatureC    = 34
	IdlePowerMilliwatts = 61_000
)

var boards atomic.Uint64

// Lib returns an NVML library with n copies of g.
func Lib(g GPU, n int) nvml.Interface {
	board := boards.Add(1)
	devs := make([]nvml.Device, n)
	for i := range devs {
		// Each library is a board of its own: one GPU is never two
		// providers' (the ledger refuses a UUID registered twice).
		uuid := fmt.Sprintf("GPU-5151%04x-%04x-4000-8000-%012x", board, i, board)
		devs[i] = &mock.Device{
			GetNameFunc:                   func() (string, nvml.Return) { return g.Name, nvml.SUCCESS },
			GetUUIDFunc:                   func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetMemoryInfoFunc:             func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: g.VRAMMiB << 20}, nvml.SUCCESS },
			GetCudaComputeCapabilityFunc:  func() (int, int, nvml.Return) { return g.Major, g.Minor, nvml.SUCCESS },
			GetMaxPcieLinkGenerationFunc:  func() (int, nvml.Return) { return 4, nvml.SUCCESS },
			GetMaxPcieLinkWidthFunc:       func() (int, nvml.Return) { return 16, nvml.SUCCESS },
			GetCurrPcieLinkGenerationFunc: func() (int, nvml.Return) { return 4, nvml.SUCCESS },
			GetCurrPcieLinkWidthFunc:      func() (int, nvml.Return) { return 16, nvml.SUCCESS },
			// An idle board, for the telemetry a provider's metrics read.
			GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS },
			GetTemperatureFunc:      func(nvml.TemperatureSensors) (uint32, nvml.Return) { return IdleTemperatureC, nvml.SUCCESS },
			GetPowerUsageFunc:       func() (uint32, nvml.Return) { return IdlePowerMilliwatts, nvml.SUCCESS },
		}
	}
	return &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12040, nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
	}
}

// DGXA100 returns go-nvml's simulated DGX A100: 8 A100 40GB.
func DGXA100() nvml.Interface { return dgxa100.New() }
