package provider_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestGPUMetrics runs an agent with a simulated RTX 4090 (an emulated
// device behind the CUDA backend's interface measures it) and reads its
// metrics: the throughput it measured and declared, per device, and the
// GPU's live figures from NVML, which lint clean. A second agent on a
// machine without GPUs exports no GPU series.
func TestGPUMetrics(t *testing.T) {
	n := startNetwork(t, "gpubox", "cpubox")
	lib := nvmlsim.Lib(nvmlsim.RTX4090, 1)
	inv, err := hwinfo.Detect(t.Context(), hwinfo.Options{NVML: lib})
	if err != nil || len(inv.GPUs) != 1 {
		t.Fatalf("simulated RTX 4090: %v, %+v", err, inv)
	}
	uuid := inv.GPUs[0].UUID
	dev := &gpu.Emulated{Name: "emulated RTX 4090", ID: uuid, Kernels: []string{"gemm_dp4a"}}
	gpuAgent, _ := runAgentWith(t, n, "gpubox", lib, "eu", 300_000, func(o *provider.Options) {
		o.NVML = lib
		o.GPUBackends = []gpu.Backend{dev}
	})
	cpuAgent, _ := runAgentWith(t, n, "cpubox", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 300_000, nil)
	waitFor(t, "both agents online", func() bool { return gpuAgent.Status().Online && cpuAgent.Status().Online })

	series := func() map[string][]*dto.Metric {
		mfs, err := n.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]*dto.Metric{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf.GetMetric()
		}
		return out
	}
	labels := func(m *dto.Metric) map[string]string {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		return l
	}
	waitFor(t, "the GPU's throughput declared", func() bool {
		for _, m := range series()["gpunet_provider_measured_int8_ops_per_second"] {
			if labels(m)["device"] == uuid {
				return true
			}
		}
		return false
	})
	got := series()
	ops := map[string]float64{}
	for _, m := range got["gpunet_provider_measured_int8_ops_per_second"] {
		l := labels(m)
		ops[l["provider"]+"/"+l["device"]+"/"+l["class"]] = m.GetGauge().GetValue()
	}
	if ops["gpubox/"+uuid+"/RTX_4090"] < 1e9 || ops["gpubox/cpu/cpu"] != 20e9 || ops["cpubox/cpu/cpu"] != 20e9 || len(ops) != 3 {
		t.Errorf("measured throughput: %v", ops)
	}
	for name, want := range map[string]float64{
		"gpunet_provider_gpu_temperature_celsius": nvmlsim.IdleTemperatureC,
		"gpunet_provider_gpu_power_watts":         nvmlsim.IdlePowerMilliwatts / 1000.0,
		"gpunet_provider_gpu_memory_total_bytes":  float64(nvmlsim.RTX4090.VRAMMiB << 20),
		"gpunet_provider_gpu_memory_used_bytes":   0,
		"gpunet_provider_gpu_utilization_ratio":   0,
	} {
		ms := got[name]
		if len(ms) != 1 {
			t.Errorf("%s: %d series, want 1 (the GPU box's one GPU; none for the CPU box)", name, len(ms))
			continue
		}
		l := labels(ms[0])
		if ms[0].GetGauge().GetValue() != want || l["provider"] != "gpubox" || l["gpu"] != "0" || l["uuid"] != uuid || l["class"] != "RTX_4090" {
			t.Errorf("%s = %v %v, want %v for gpubox's GPU 0", name, ms[0].GetGauge().GetValue(), l, want)
		}
	}
	if len(got["gpunet_build_info"]) != 1 {
		t.Errorf("gpunet_build_info: %v", got["gpunet_build_info"])
	}
	problems, err := testutil.GatherAndLint(n.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
