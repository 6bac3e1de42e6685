package daemon

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpunet/gpunet/internal/apiserver"
)

// nodeMetrics are the node process's own metrics; the chain's come from
// netstats, the providers' (in a devnet) from provider.Metrics.
type nodeMetrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	reqSeconds  *prometheus.HistogramVec
	blobBytes   *prometheus.CounterVec
	blockExec   prometheus.Histogram
	blockTxSize prometheus.Histogram
}

func newNodeMetrics() *nodeMetrics {
	m := &nodeMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_api_requests_total",
			Help: "API requests by route (operation id) and HTTP status."}, []string{"route", "code"}),
		reqSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gpunet_api_request_seconds",
			Help: "API request durations by route.", Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, 1, 5}}, []string{"route"}),
		blobBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_blob_bytes_total",
			Help: "Bytes through the node's blob gateway: in (uploaded to it), out (downloaded from it)."}, []string{"direction"}),
		blockExec: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpunet_block_execution_seconds",
			Help:    "Time the ledger took to execute a block: its txs, then the scheduler and the rest of the block's end.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}),
		blockTxSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpunet_block_txs",
			Help: "Txs per block.", Buckets: []float64{0, 1, 10, 100, 1000, 10000}}),
	}
	m.blobBytes.WithLabelValues("in")
	m.blobBytes.WithLabelValues("out")
	m.reg.MustRegister(m.requests, m.reqSeconds, m.blobBytes, m.blockExec, m.blockTxSize,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *nodeMetrics) observeRequest(route string, status int, d time.Duration) {
	if status == 0 {
		status = http.StatusOK
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.reqSeconds.WithLabelValues(route).Observe(d.Seconds())
}

func (m *nodeMetrics) observeBlock(txs int, d time.Duration) {
	m.blockExec.Observe(d.Seconds())
	m.blockTxSize.Observe(float64(txs))
}

// MetricsRoute serves a registry's metrics in Prometheus's text format.
func MetricsRoute(g prometheus.Gatherer) apiserver.Route {
	return apiserver.Route{Method: "GET", Path: "/metrics", ID: "metrics", Tag: "meta",
		Summary:  "Prometheus metrics: chain height, tx/s, mempool, jobs by state, providers online, scheduler wait, block execution, executor runs, blob bytes, challenge outcomes, API requests",
		RespType: "text/plain", Handler: promhttp.HandlerFor(g, promhttp.HandlerOpts{})}
}

// countBlobs counts the bytes a blob gateway receives and sends.
func (m *nodeMetrics) countBlobs(h http.Handler) http.Handler {
	in, out := m.blobBytes.WithLabelValues("in"), m.blobBytes.WithLabelValues("out")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = &countingBody{ReadCloser: r.Body, c: in}
		}
		h.ServeHTTP(&countingWriter{ResponseWriter: w, c: out, head: r.Method == http.MethodHead}, r)
	})
}

type countingBody struct {
	io.ReadCloser
	c prometheus.Counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.Add(float64(n))
	return n, err
}

type countingWriter struct {
	http.ResponseWriter
	c    prometheus.Counter
	head bool
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if !w.head {
		w.c.Add(float64(n))
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
