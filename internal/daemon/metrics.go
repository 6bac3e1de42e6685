package daemon

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/buildinfo"
	"github.com/gpunet/gpunet/internal/validator"
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
	if err := buildinfo.Register(m.reg); err != nil {
		panic(err)
	}
	return m
}

// watchConsensus exports the validator's peers and consensus, read at
// each scrape.
func (m *nodeMetrics) watchConsensus(read func(context.Context) (validator.Consensus, error)) {
	m.reg.MustRegister(newConsensusCollector(read))
}

// consensusCollector reads the validator's consensus at each scrape; a
// failed read exports nothing (the node is stopping).
type consensusCollector struct {
	read                                                        func(context.Context) (validator.Consensus, error)
	peers, height, round, lastRound, lastValidators, lastAbsent *prometheus.Desc
}

func newConsensusCollector(read func(context.Context) (validator.Consensus, error)) *consensusCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &consensusCollector{read: read,
		peers:  d("gpunet_p2p_peers", "Peers the node's consensus engine is connected to."),
		height: d("gpunet_consensus_height", "The height consensus is deciding (the last block's plus one)."),
		round: d("gpunet_consensus_round",
			"The round of the height being decided: above 0 when a proposal did not get through (a proposer offline or slow, votes missing)."),
		lastRound: d("gpunet_consensus_last_commit_round",
			"The round the last block was committed in: above 0 when it took more than one."),
		lastValidators: d("gpunet_consensus_validators", "Validators of the last block's commit."),
		lastAbsent:     d("gpunet_consensus_missing_validators", "Validators whose precommit the last block's commit lacks."),
	}
}

func (c *consensusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.peers, c.height, c.round, c.lastRound, c.lastValidators, c.lastAbsent} {
		ch <- d
	}
}

func (c *consensusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cs, err := c.read(ctx)
	if err != nil {
		return
	}
	for _, v := range []struct {
		d *prometheus.Desc
		v float64
	}{{c.peers, float64(cs.Peers)}, {c.height, float64(cs.Height)}, {c.round, float64(cs.Round)},
		{c.lastRound, float64(cs.LastCommitRound)}, {c.lastValidators, float64(cs.LastValidators)}, {c.lastAbsent, float64(cs.LastAbsent)}} {
		ch <- prometheus.MustNewConstMetric(v.d, prometheus.GaugeValue, v.v)
	}
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
		Summary:  "Prometheus metrics (docs/metrics.md): build, consensus and peers, blocks, txs and mempool, jobs, verification, slashes, escrow and fees, providers, scheduler wait and queue, challenges, API requests, blob bytes, and CometBFT's own (cometbft_*); in a devnet the providers' too",
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
