package hwinfo

import (
	"errors"
	"math"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPUTelemetry reads NVIDIA GPUs' live figures (utilisation, memory in
// use, temperature, power) through NVML, for a provider's metrics. It
// keeps NVML initialised from Open to Close: initialising it can take a
// good part of a second, too long to pay at every scrape. Its methods are
// safe for concurrent use.
type GPUTelemetry struct {
	mu  sync.Mutex
	lib nvml.Interface // nil once closed
}

// GPUReading is one GPU's live figures. A figure NVML could not read (the
// board does not report it, the call failed) is NaN.
type GPUReading struct {
	Index            int
	UUID             string
	Name             string
	Class            string  // ClassOf the name and memory size
	Utilization      float64 // share of the last sample period a kernel ran, 0..1
	MemoryUsedBytes  float64
	MemoryTotalBytes float64
	TemperatureC     float64 // the GPU die's, degrees Celsius
	PowerWatts       float64 // the board's draw
}

// ErrNoNVML is OpenGPUTelemetry's answer on a machine without a usable
// NVML (no library, no driver): no GPU to report, which is not a fault.
var ErrNoNVML = errors.New("no usable NVML library (no NVIDIA driver)")

// OpenGPUTelemetry initialises lib (nil: the real library) for Read. On a
// machine without NVML it returns an error wrapping ErrNoNVML.
func OpenGPUTelemetry(lib nvml.Interface) (*GPUTelemetry, error) {
	if lib == nil {
		lib = nvml.New()
	}
	if err := nvcall(lib.Init); err != nil {
		return nil, errors.Join(ErrNoNVML, err)
	}
	return &GPUTelemetry{lib: lib}, nil
}

// Read returns every GPU's figures now, by index; none (and no error)
// where NVML sees no GPU. A device whose handle cannot be had is left
// out.
func (t *GPUTelemetry) Read() []GPUReading {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lib == nil {
		return nil
	}
	var count int
	if err := nvcall(func() (r nvml.Return) { count, r = t.lib.DeviceGetCount(); return }); err != nil {
		return nil
	}
	out := make([]GPUReading, 0, count)
	for i := range count {
		var dev nvml.Device
		if err := nvcall(func() (r nvml.Return) { dev, r = t.lib.DeviceGetHandleByIndex(i); return }); err != nil || dev == nil {
			continue
		}
		out = append(out, readGPU(i, dev))
	}
	return out
}

func readGPU(i int, dev nvml.Device) GPUReading {
	nan := math.NaN()
	g := GPUReading{Index: i, Utilization: nan, MemoryUsedBytes: nan, MemoryTotalBytes: nan, TemperatureC: nan, PowerWatts: nan}
	_ = nvcall(func() (r nvml.Return) { g.UUID, r = dev.GetUUID(); return })
	_ = nvcall(func() (r nvml.Return) { g.Name, r = dev.GetName(); return })
	var mem nvml.Memory
	if nvcall(func() (r nvml.Return) { mem, r = dev.GetMemoryInfo(); return }) == nil {
		g.MemoryUsedBytes, g.MemoryTotalBytes = float64(mem.Used), float64(mem.Total)
	}
	g.Class = ClassOf(g.Name, mem.Total)
	var u nvml.Utilization
	if nvcall(func() (r nvml.Return) { u, r = dev.GetUtilizationRates(); return }) == nil {
		g.Utilization = float64(u.Gpu) / 100
	}
	var temp uint32
	if nvcall(func() (r nvml.Return) { temp, r = dev.GetTemperature(nvml.TEMPERATURE_GPU); return }) == nil {
		g.TemperatureC = float64(temp)
	}
	var mw uint32
	if nvcall(func() (r nvml.Return) { mw, r = dev.GetPowerUsage(); return }) == nil {
		g.PowerWatts = float64(mw) / 1000
	}
	return g
}

// Close shuts NVML down; Read then returns nothing.
func (t *GPUTelemetry) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lib == nil {
		return nil
	}
	lib := t.lib
	t.lib = nil
	return nvcall(lib.Shutdown)
}
