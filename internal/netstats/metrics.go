package netstats

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the chain's Prometheus metrics, updated once per block.
type metrics struct {
	height        prometheus.Gauge
	txs           prometheus.Counter
	txRate        prometheus.Gauge
	jobs          *prometheus.GaugeVec
	providers     prometheus.Gauge
	online        prometheus.Gauge
	gpus          prometheus.Gauge
	utilization   prometheus.Gauge
	schedulerWait prometheus.Histogram
	challenges    *prometheus.CounterVec
}

// ChallengeOutcome names a ledger event type that reports the outcome of
// a challenge.
type ChallengeOutcome struct {
	Kind    string // liveness, hardware
	Outcome string // passed, failed, missed
}

var (
	challengeMu sync.RWMutex
	// challengeEvents maps ledger event types to the challenge outcome
	// they report, for gpunet_challenges_total.
	challengeEvents = map[string]ChallengeOutcome{
		"liveness_answered":   {"liveness", "passed"},
		"liveness_missed":     {"liveness", "missed"},
		"hw_challenge_passed": {"hardware", "passed"},
		"hw_challenge_failed": {"hardware", "failed"}, // late, missed or wrong (ledger/hwchallenge.go)
	}
	// challengeSeries are the label pairs exported from the start, at zero
	// until an event counts.
	challengeSeries = []ChallengeOutcome{
		{"liveness", "passed"}, {"liveness", "missed"},
		{"hardware", "passed"}, {"hardware", "failed"}, {"hardware", "missed"},
	}
)

// RegisterChallengeEvent makes ledger events of type eventType count in
// gpunet_challenges_total{kind, outcome}. The hardware challenges'
// events register here (the hardware kind is exported at zero until
// then). Call it before the node starts.
func RegisterChallengeEvent(eventType, kind, outcome string) {
	challengeMu.Lock()
	defer challengeMu.Unlock()
	challengeEvents[eventType] = ChallengeOutcome{kind, outcome}
	for _, c := range challengeSeries {
		if c.Kind == kind && c.Outcome == outcome {
			return
		}
	}
	challengeSeries = append(challengeSeries, ChallengeOutcome{kind, outcome})
}

func newMetrics(s *Stats, reg prometheus.Registerer) *metrics {
	m := &metrics{
		height:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_block_height", Help: "Height of the last block the node processed."}),
		txs:       prometheus.NewCounter(prometheus.CounterOpts{Name: "gpunet_txs_total", Help: "Txs in the blocks processed since the node started."}),
		txRate:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_tx_per_second", Help: "Txs per second of block time over the last 20 blocks."}),
		jobs:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpunet_jobs", Help: "Jobs by state."}, []string{"state"}),
		providers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_providers_registered", Help: "Registered providers."}),
		online:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_providers_online", Help: "Providers online."}),
		gpus:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_gpus_online", Help: "GPUs of online providers."}),
		utilization: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_utilization_ratio",
			Help: "Running jobs over the job slots of online providers (0..1)."}),
		schedulerWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gpunet_scheduler_wait_seconds",
			Help:    "Block time from a job's submission to its first placement by the scheduler.",
			Buckets: []float64{0.5, 1, 2, 5, 10, 30, 60, 300, 1800}}),
		challenges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_challenges_total",
			Help: "Challenge outcomes seen in blocks, by kind (liveness, hardware) and outcome."}, []string{"kind", "outcome"}),
	}
	for _, st := range States {
		m.jobs.WithLabelValues(st)
	}
	challengeMu.RLock()
	for _, c := range challengeSeries {
		m.challenges.WithLabelValues(c.Kind, c.Outcome)
	}
	challengeMu.RUnlock()
	if reg != nil {
		reg.MustRegister(m.height, m.txs, m.txRate, m.jobs, m.providers, m.online, m.gpus, m.utilization, m.schedulerWait, m.challenges,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gpunet_mempool_txs", Help: "Txs waiting in the mempool."},
				func() float64 { return float64(s.chain.Mempool()) }))
	}
	return m
}

// event counts a ledger event.
func (m *metrics) event(typ string) {
	challengeMu.RLock()
	c, ok := challengeEvents[typ]
	challengeMu.RUnlock()
	if ok {
		m.challenges.WithLabelValues(c.Kind, c.Outcome).Inc()
	}
}

// block records a block's sample.
func (m *metrics) block(sm Sample) {
	m.height.Set(float64(sm.Height))
	m.txs.Add(float64(sm.Txs))
	m.txRate.Set(sm.TxRate)
	for st, n := range sm.Jobs {
		m.jobs.WithLabelValues(st).Set(float64(n))
	}
	m.providers.Set(float64(sm.Providers))
	m.online.Set(float64(sm.Online))
	m.gpus.Set(float64(sm.GPUsOnline))
	m.utilization.Set(sm.Utilization)
}
