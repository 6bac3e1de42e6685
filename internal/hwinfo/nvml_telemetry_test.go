package hwinfo

import (
	"errors"
	"math"
	"os"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

func TestGPUTelemetry(t *testing.T) {
	busy := mockDevice("GPU-1")
	busy.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 81559 << 20, Used: 1 << 30}, nvml.SUCCESS }
	busy.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 87, Memory: 40}, nvml.SUCCESS }
	busy.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return 71, nvml.SUCCESS
	}
	busy.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 612_500, nvml.SUCCESS }
	// A board that reports no power and no temperature (the mock panics
	// on calls it does not implement, as an old driver lacks symbols).
	quiet := mockDevice("GPU-2")
	quiet.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	lib := mockLib(busy, nil, quiet)
	shut := 0
	lib.ShutdownFunc = func() nvml.Return { shut++; return nvml.SUCCESS }

	tel, err := OpenGPUTelemetry(lib)
	if err != nil {
		t.Fatal(err)
	}
	got := tel.Read()
	if len(got) != 2 {
		t.Fatalf("read %d GPUs, want 2 (the lost one left out): %+v", len(got), got)
	}
	g := got[0]
	if g.Index != 0 || g.UUID != "GPU-1" || g.Class != "H100_80GB" || g.Utilization != 0.87 || g.MemoryUsedBytes != 1<<30 ||
		g.MemoryTotalBytes != 81559<<20 || g.TemperatureC != 71 || g.PowerWatts != 612.5 {
		t.Errorf("busy GPU: %+v", g)
	}
	q := got[1]
	if q.Index != 2 || q.UUID != "GPU-2" || !math.IsNaN(q.Utilization) || !math.IsNaN(q.TemperatureC) || !math.IsNaN(q.PowerWatts) || q.MemoryUsedBytes != 0 {
		t.Errorf("quiet GPU: %+v", q)
	}
	if err := tel.Close(); err != nil || shut != 1 {
		t.Errorf("close: %v, shutdown called %d times", err, shut)
	}
	if r := tel.Read(); r != nil {
		t.Errorf("read after close: %+v", r)
	}
	tel.Close()
	if shut != 1 {
		t.Errorf("shutdown called %d times after a second close", shut)
	}
}

func TestGPUTelemetryWithoutGPUs(t *testing.T) {
	tel, err := OpenGPUTelemetry(mockLib())
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	if r := tel.Read(); len(r) != 0 {
		t.Errorf("no GPUs: read %+v", r)
	}
	_, err = OpenGPUTelemetry(&mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }})
	if !errors.Is(err, ErrNoNVML) || !errors.Is(err, nvml.ERROR_LIBRARY_NOT_FOUND) {
		t.Errorf("no library: %v", err)
	}
}

// TestGPUTelemetryRealNVML reads the live figures of the machine's GPUs
// through the real NVML library. Like TestRealNVML it runs only where
// GPUNET_REAL_NVML=1 says the machine has an NVIDIA GPU and driver.
func TestGPUTelemetryRealNVML(t *testing.T) {
	if os.Getenv("GPUNET_REAL_NVML") != "1" {
		t.Skip("set GPUNET_REAL_NVML=1 on a machine with an NVIDIA GPU and driver")
	}
	tel, err := OpenGPUTelemetry(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close()
	got := tel.Read()
	if len(got) == 0 {
		t.Fatal("no GPU read")
	}
	for _, g := range got {
		t.Logf("%+v", g)
		if g.UUID == "" || !(g.Utilization >= 0 && g.Utilization <= 1) || !(g.MemoryTotalBytes >= 1<<30) ||
			!(g.MemoryUsedBytes <= g.MemoryTotalBytes) || !(g.TemperatureC > 0 && g.TemperatureC < 120) || !(g.PowerWatts > 0 && g.PowerWatts < 2000) {
			t.Errorf("implausible reading: %+v", g)
		}
	}
}
