package provider

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
}

// NewMetrics registers the agents' metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_provider_executor_runs_total",
			Help: "Job runs started in an executor."}, []string{"provider", "executor"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_provider_executor_failures_total",
			Help: "Job runs that failed: the job failed (exit code, trap, out of memory or time) or the executor could not run it."}, []string{"provider", "executor"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gpunet_provider_executor_run_seconds",
			Help: "Wall time of job runs.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"executor"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpunet_provider_jobs_running",
			Help: "Jobs running in an executor now."}, []string{"provider"}),
		blobBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_provider_blob_bytes_total",
			Help: "Job data moved through the blob gateway: in (downloaded inputs and modules), out (uploaded outputs and logs)."}, []string{"provider", "direction"}),
		challenges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_provider_challenges_total",
			Help: "Challenges this agent answered, by kind and outcome (its view; the ledger's verdicts are gpunet_challenges_total)."}, []string{"provider", "kind", "outcome"}),
	}
	reg.MustRegister(m.runs, m.failures, m.runSeconds, m.running, m.blobBytes, m.challenges)
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

func (e *countingExecutor) Run(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
	ex := e.Executor.Name()
	e.m.runs.WithLabelValues(e.name, ex).Inc()
	running := e.m.running.WithLabelValues(e.name)
	running.Inc()
	start := time.Now()
	res, err := e.Executor.Run(ctx, job, logs)
	running.Dec()
	e.m.runSeconds.WithLabelValues(ex).Observe(time.Since(start).Seconds())
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
// work.
func (m *Metrics) instrument(name string, o *Options) {
	var names []string
	wrapped := make(map[string]sandbox.Executor, len(o.Sandboxes))
	for k, ex := range o.Sandboxes {
		wrapped[k] = &countingExecutor{Executor: ex, m: m, name: name}
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
