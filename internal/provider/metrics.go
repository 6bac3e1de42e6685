package provider

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/buildinfo"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/sandbox"
)

// Metrics are provider agents' Prometheus metrics. One Metrics serves
// every agent of a process (a devnet runs several); series carry the
// provider's key name.
type Metrics struct {
	runs       *prometheus.CounterVec
	failures   *prometheus.CounterVec
	runSeconds *prometheus.HistogramVec
	running    *prometheus.GaugeVec
	blobBytes  *prometheus.CounterVec
	challenges *prometheus.CounterVec
	int8OPS    *prometheus.GaugeVec
	bandwidth  *prometheus.GaugeVec
	gpus       *gpuCollector
}

// NewMetrics registers the agents' metrics, and gpunet_build_info, on
// reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_provider_executor_runs_total",
			Help: "Job runs started in an executor."}, []string{"provider", "executor"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_provider_executor_failures_total",
			Help: "Job runs that failed: the job failed (exit code, trap, out of memory or time) or the executor could not run it."}, []string{"provider", "executor"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gpunet_provider_executor_run_seconds",
			Help: "Wall time of job runs.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"provider", "executor"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpunet_provider_jobs_running",
			Help: "Jobs running in an executor now."}, []string{"provider"}),
		blobBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_provider_blob_bytes_total",
			Help: "Job data moved through the blob gateway: in (downloaded inputs and modules), out (uploaded outputs and logs)."}, []string{"provider", "direction"}),
		challenges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_provider_challenges_total",
			Help: "Challenges this agent answered, by kind and outcome (its view; the ledger's verdicts are gpunet_challenges_total)."}, []string{"provider", "kind", "outcome"}),
		int8OPS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpunet_provider_measured_int8_ops_per_second",
			Help: "Int8 GEMM throughput the agent measured, as its ledger record declares it (hardware challenges check it), by device: cpu, or a GPU's UUID with its class."}, []string{"provider", "device", "class"}),
		bandwidth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpunet_provider_measured_memory_bandwidth_bytes_per_second",
			Help: "Memory bandwidth of the CPU the agent measured, as its ledger record declares it."}, []string{"provider"}),
		gpus: newGPUCollector(),
	}
	reg.MustRegister(m.runs, m.failures, m.runSeconds, m.running, m.blobBytes, m.challenges, m.int8OPS, m.bandwidth, m.gpus)
	if err := buildinfo.Register(reg); err != nil {
		panic(err)
	}
	return m
}

// forAgent initialises name's series at zero, so they are exported before
// the first job.
func (m *Metrics) forAgent(name string, executors []string) {
	for _, ex := range executors {
		m.runs.WithLabelValues(name, ex)
		m.failures.WithLabelValues(name, ex)
	}
	m.running.WithLabelValues(name)
	m.blobBytes.WithLabelValues(name, "in")
	m.blobBytes.WithLabelValues(name, "out")
	for _, o := range []string{"answered", "error"} {
		m.challenges.WithLabelValues(name, "liveness", o)
	}
}

// challenge counts an answered (or failed to answer) challenge.
func (m *Metrics) challenge(name, kind, outcome string) {
	if m != nil {
		m.challenges.WithLabelValues(name, kind, outcome).Inc()
	}
}

// countingExecutor counts an executor's runs.
type countingExecutor struct {
	sandbox.Executor
	m    *Metrics
	name string
}

// Unwrap returns the executor counted, whose other abilities the agent
// looks for: a gang member's network namespace, a judge program's
// fuel-metered runs (judgeRunnerOf). Those are not counted.
func (c *countingExecutor) Unwrap() sandbox.Executor { return c.Executor }

// countingServiceExecutor is a countingExecutor of an executor that also
// runs services (sandbox.ServiceRunner), which it passes on.
type countingServiceExecutor struct {
	*countingExecutor
	sandbox.ServiceRunner
}

// Engine passes on the wrapped executor's engine (sandbox.Engined).
func (c *countingExecutor) Engine() string { return sandbox.EngineOf(c.Executor) }

func (e *countingExecutor) Run(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
	ex := e.Executor.Name()
	e.m.runs.WithLabelValues(e.name, ex).Inc()
	running := e.m.running.WithLabelValues(e.name)
	running.Inc()
	start := time.Now()
	res, err := e.Executor.Run(ctx, job, logs)
	running.Dec()
	e.m.runSeconds.WithLabelValues(e.name, ex).Observe(time.Since(start).Seconds())
	if err != nil || res == nil || res.Failed {
		e.m.failures.WithLabelValues(e.name, ex).Inc()
	}
	return res, err
}

// countingTransport counts the bytes of blob transfers.
type countingTransport struct {
	base    http.RoundTripper
	in, out prometheus.Counter
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countingReader{ReadCloser: r.Body, c: t.out}
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet {
		resp.Body = &countingReader{ReadCloser: resp.Body, c: t.in}
	}
	return resp, err
}

type countingReader struct {
	io.ReadCloser
	c prometheus.Counter
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.c.Add(float64(n))
	return n, err
}

// instrument wraps the agent's executors and blob client to count their
// work, its chain client to see the figures it declared, and watches its
// GPUs.
func (m *Metrics) instrument(name string, o *Options) {
	if o.Chain != nil && o.Key != nil {
		o.Chain = &recordingChain{Chain: o.Chain, m: m, name: name, addr: o.Key.Address}
	}
	m.gpus.add(name, o.NVML)
	var names []string
	wrapped := make(map[string]sandbox.Executor, len(o.Sandboxes))
	for k, ex := range o.Sandboxes {
		c := &countingExecutor{Executor: ex, m: m, name: name}
		wrapped[k] = c
		if sr, ok := ex.(sandbox.ServiceRunner); ok {
			// Keep what the executor can do beyond jobs: services.
			wrapped[k] = &countingServiceExecutor{countingExecutor: c, ServiceRunner: sr}
		}
		names = append(names, ex.Name())
	}
	o.Sandboxes = wrapped
	m.forAgent(name, names)
	if o.Blobs != nil {
		b := *o.Blobs
		base := http.DefaultTransport
		if b.HTTPClient != nil && b.HTTPClient.Transport != nil {
			base = b.HTTPClient.Transport
		}
		hc := &http.Client{}
		if b.HTTPClient != nil {
			*hc = *b.HTTPClient
		}
		hc.Transport = &countingTransport{base: base, in: m.blobBytes.WithLabelValues(name, "in"), out: m.blobBytes.WithLabelValues(name, "out")}
		b.HTTPClient = hc
		o.Blobs = &b
	}
}

// recordingChain notes the agent's own ledger record each time the agent
// reads it: the figures it declared (after registering or updating, the
// agent reads the record back).
type recordingChain struct {
	Chain
	m    *Metrics
	name string
	addr address.Address
}

func (c *recordingChain) Provider(ctx context.Context, a address.Address) (*apiwire.ProviderBody, error) {
	p, err := c.Chain.Provider(ctx, a)
	if err == nil && p != nil && p.Record != nil && a == c.addr {
		c.m.declared(c.name, p)
	}
	return p, err
}

// declared sets the measured figures of name's record.
func (m *Metrics) declared(name string, p *apiwire.ProviderBody) {
	r := p.Record
	m.int8OPS.DeletePartialMatch(prometheus.Labels{"provider": name})
	if r.Measured.Int8GOPS > 0 {
		m.int8OPS.WithLabelValues(name, "cpu", "cpu").Set(float64(r.Measured.Int8GOPS) * 1e9)
	}
	uuids := map[string]bool{}
	for _, g := range r.Inventory.GPUs {
		if g.UUID != "" {
			uuids[g.UUID] = true
			if g.Int8GOPS > 0 {
				m.int8OPS.WithLabelValues(name, g.UUID, g.Class).Set(float64(g.Int8GOPS) * 1e9)
			}
		}
	}
	m.bandwidth.WithLabelValues(name).Set(float64(r.Measured.BandwidthMBs) * 1e6)
	m.gpus.declare(name, len(r.Inventory.GPUs), uuids)
}

// gpuSource is where one agent's GPU telemetry comes from.
type gpuSource struct {
	lib    nvml.Interface // nil: the real library
	opened bool
	tel    *hwinfo.GPUTelemetry // nil: no NVML
	// declared is how many GPUs the agent's record lists, uuids their
	// UUIDs; until the record is read no GPU is reported.
	declared int
	uuids    map[string]bool
}

// gpuCollector reads the agents' GPUs through NVML at each scrape. An
// agent's NVML is opened at the first scrape after its record is read,
// and kept open for the life of the process (opening it costs up to a
// second). A machine without NVML or GPUs exports no GPU series.
type gpuCollector struct {
	mu                                   sync.Mutex
	sources                              map[string]*gpuSource
	util, memUsed, memTotal, temp, power *prometheus.Desc
}

func newGPUCollector() *gpuCollector {
	labels := []string{"provider", "gpu", "uuid", "class"}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, labels, nil) }
	return &gpuCollector{
		sources:  map[string]*gpuSource{},
		util:     d("gpunet_provider_gpu_utilization_ratio", "Share of NVML's last sample period in which a kernel ran on the GPU (0..1)."),
		memUsed:  d("gpunet_provider_gpu_memory_used_bytes", "GPU memory in use."),
		memTotal: d("gpunet_provider_gpu_memory_total_bytes", "GPU memory in all."),
		temp:     d("gpunet_provider_gpu_temperature_celsius", "Temperature of the GPU die."),
		power:    d("gpunet_provider_gpu_power_watts", "Power the GPU board draws."),
	}
}

// add watches name's GPUs through lib (nil: the real NVML).
func (c *gpuCollector) add(name string, lib nvml.Interface) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.sources[name]; ok && old.tel != nil {
		old.tel.Close()
	}
	c.sources[name] = &gpuSource{lib: lib}
}

// declare records the GPUs name's ledger record lists.
func (c *gpuCollector) declare(name string, n int, uuids map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sources[name]; ok {
		s.declared, s.uuids = n, uuids
	}
}

func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.util, c.memUsed, c.memTotal, c.temp, c.power} {
		ch <- d
	}
}

func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, s := range c.sources {
		if s.declared == 0 {
			continue
		}
		if !s.opened {
			s.opened = true
			s.tel, _ = hwinfo.OpenGPUTelemetry(s.lib) // none without NVML
		}
		if s.tel == nil {
			continue
		}
		for _, g := range s.tel.Read() {
			// Only the GPUs the agent declared (by UUID, when it
			// declared them with UUIDs).
			if len(s.uuids) > 0 && !s.uuids[g.UUID] {
				continue
			}
			labels := []string{name, strconv.Itoa(g.Index), g.UUID, g.Class}
			for _, v := range []struct {
				d *prometheus.Desc
				v float64
			}{{c.util, g.Utilization}, {c.memUsed, g.MemoryUsedBytes}, {c.memTotal, g.MemoryTotalBytes}, {c.temp, g.TemperatureC}, {c.power, g.PowerWatts}} {
				if !math.IsNaN(v.v) {
					ch <- prometheus.MustNewConstMetric(v.d, prometheus.GaugeValue, v.v, labels...)
				}
			}
		}
	}
}
