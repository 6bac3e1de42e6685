package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestMetricsLint runs a devnet node and two provider agents (the example
// job is spot-checked: a second one runs its audit) whose metrics
// have a registry of their own (as `gpunet provider start --metrics`
// serves), puts a job through them, and lints both registries with the
// linter `promtool check metrics` uses: no problem. It then checks the
// series an operator watches are there with values that say the job
// happened. (The GPU series are provider's TestGPUMetrics': a devnet's
// simulated GPUs have no NVML for the agents to read.)
func TestMetricsLint(t *testing.T) {
	home := t.TempDir()
	if _, err := devnet.Setup(home, devnet.Options{BlockTime: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(t.Context(), home, daemon.Options{APIAddr: "127.0.0.1:0", CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	provReg := prometheus.NewRegistry()
	provReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctx, stop := context.WithCancel(context.Background())
	ps, err := devnet.RunProviders(ctx, home, d.APIURL, devnet.ProviderOptions{N: 2, Poll: 25 * time.Millisecond,
		NVML: func(int) nvml.Interface { return nvmlsim.Lib(nvmlsim.RTX4090, 1) }, Metrics: provider.NewMetrics(provReg)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		ps.Wait()
	})
	if err := ps.WaitReady(t.Context(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	ectx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := devnet.RunExample(ectx, home, d.APIURL, nil); err != nil {
		t.Fatal(err)
	}
	// The stats take the last block a moment after it commits.
	deadline := time.Now().Add(10 * time.Second)
	for value(t, d.Metrics, "gpunet_jobs_finished_total", map[string]string{"outcome": "succeeded"}) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}

	for name, reg := range map[string]prometheus.Gatherer{"node": d.Metrics, "provider": provReg} {
		problems, err := testutil.GatherAndLint(reg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s: %s", name, p.Metric, p.Text)
		}
	}

	for _, c := range []struct {
		reg    prometheus.Gatherer
		name   string
		labels map[string]string
		min    float64
	}{
		{d.Metrics, "gpunet_build_info", nil, 1},
		{d.Metrics, "gpunet_consensus_height", nil, 2},
		{d.Metrics, "gpunet_consensus_validators", nil, 1},
		{d.Metrics, "gpunet_p2p_peers", nil, 0},
		{d.Metrics, "gpunet_last_block_timestamp_seconds", nil, 1e9},
		{d.Metrics, "gpunet_jobs_submitted_total", nil, 1},
		{d.Metrics, "gpunet_jobs_finished_total", map[string]string{"outcome": "succeeded"}, 1},
		{d.Metrics, "gpunet_scheduler_wait_seconds", nil, 1}, // its sample count
		{d.Metrics, "gpunet_job_payments_usync_total", nil, 1},
		{d.Metrics, "gpunet_treasury_usync", nil, 1},
		{d.Metrics, "gpunet_scheduler_queue_jobs", map[string]string{"class": "cpu"}, 0},
		{provReg, "gpunet_build_info", nil, 1},
		{provReg, "gpunet_provider_executor_run_seconds", map[string]string{"provider": devnet.ProviderKey(1)}, 1},
		{provReg, "gpunet_provider_measured_int8_ops_per_second", map[string]string{"device": "cpu"}, 1},
	} {
		if got := value(t, c.reg, c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}
}

// value returns the value (a histogram's sample count) of the first
// series of name whose labels include labels; -1 when there is none.
func value(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if has(m, labels) {
				switch {
				case m.Histogram != nil:
					return float64(m.GetHistogram().GetSampleCount())
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				default:
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func has(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(labels)
}
