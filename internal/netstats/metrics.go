package netstats

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/ledger"
)

// metrics are the chain's Prometheus metrics, updated once per block.
// Counters count what the blocks this node processed since it started
// did; gauges are the state after the last one.
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

	lastBlock      prometheus.Gauge
	submitted      prometheus.Counter
	finished       *prometheus.CounterVec
	verdicts       *prometheus.CounterVec
	replicas       *prometheus.CounterVec
	slashes        *prometheus.CounterVec
	slashedUsync   *prometheus.CounterVec
	jobFees        prometheus.Counter
	jobPayments    prometheus.Counter
	jobRefunds     prometheus.Counter
	escrow         prometheus.Gauge
	treasury       prometheus.Gauge
	staked         prometheus.Gauge
	queued         *prometheus.GaugeVec
	queuedMu       sync.Mutex
	queuedLabels   map[string]bool
	lastBlockMu    sync.Mutex
	lastBlockTime  time.Time
	lastBlockClock func() time.Time
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

// Label values exported from the start (at zero until a block counts one).
var (
	finishedStates = []string{ledger.JobSucceeded, ledger.JobFailed, ledger.JobCancelled}
	verdictValues  = []string{ledger.VerdictValidated, ledger.VerdictUnverified, ledger.VerdictUnchecked, ledger.VerdictNoMajority}
	replicaValues  = []string{ledger.OutcomeMajority, ledger.OutcomeMinority, ledger.OutcomeUnrevealed, ledger.OutcomeNoMajority,
		ledger.OutcomeBadHandover, ledger.OutcomeWithheldKey, ledger.OutcomeJudgeOutvoted, ledger.OutcomeJudgeSilent,
		ledger.OutcomeGangOutvoted, ledger.OutcomeGangIncomplete}
	// slashReasons: job_replica_slashed's why (none: outvoted, "minority"),
	// and a failed hardware challenge.
	slashReasons = []string{ledger.OutcomeMinority, ledger.OutcomeUnrevealed, ledger.OutcomeBadHandover, ledger.OutcomeWithheldKey,
		ledger.OutcomeJudgeOutvoted, ledger.OutcomeJudgeSilent, slashHardware}
)

const slashHardware = "hardware_challenge"

// schedulerWaitBuckets start at 0: a job placed at the end of the block
// that submitted it (the usual case on an idle network) waited no block
// time at all.
var schedulerWaitBuckets = []float64{0, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800}

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
			Help:    "Block time from a job's submission to its first placement by the scheduler: 0 for a job placed at the end of the block that submitted it.",
			Buckets: schedulerWaitBuckets}),
		challenges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_challenges_total",
			Help: "Challenge outcomes seen in blocks, by kind (liveness, hardware) and outcome."}, []string{"kind", "outcome"}),

		lastBlock: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_last_block_timestamp_seconds",
			Help: "Block time of the last block the node processed, in seconds since the Unix epoch."}),
		submitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpunet_jobs_submitted_total",
			Help: "Jobs submitted in the blocks processed since the node started."}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_jobs_finished_total",
			Help: "Jobs that ended in the blocks processed since the node started, by outcome (succeeded, failed, cancelled)."}, []string{"outcome"}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_job_verdicts_total",
			Help: "Verification verdicts of jobs that ended: validated (a majority of replicas agreed), unverified (one replica, not audited), unchecked (verification none or not deterministic), no_majority."}, []string{"verdict"}),
		replicas: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_job_replica_outcomes_total",
			Help: "Outcomes of the replicas of checked jobs that ended: majority, minority, unrevealed, no_majority, bad_handover, withheld_key, judge_outvoted, judge_silent (a compare job's judging round)."}, []string{"outcome"}),
		slashes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_slashes_total",
			Help: "Slashes decided in blocks, by reason: a replica outvoted (minority), unrevealed, bad_handover or withheld_key, a judge outvoted or silent in a compare job's judging round (judge_outvoted, judge_silent), or a failed hardware_challenge."}, []string{"reason"}),
		slashedUsync: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpunet_slashed_usync_total",
			Help: "Stake taken by slashes, in usync, by reason (as gpunet_slashes_total)."}, []string{"reason"}),
		jobFees: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpunet_job_fees_usync_total",
			Help: "Protocol fees of the jobs that ended, paid to the treasury, in usync."}),
		jobPayments: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpunet_job_payments_usync_total",
			Help: "What the jobs that ended paid their providers, in usync."}),
		jobRefunds: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpunet_job_refunds_usync_total",
			Help: "Escrow returned to the owners of the jobs that ended, in usync."}),
		escrow: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_escrow_usync",
			Help: "Usync held in the escrow of unfinished jobs."}),
		treasury: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_treasury_usync",
			Help: "The treasury's balance in usync: tx and job fees and slashes in, audit replicas out."}),
		staked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpunet_stake_bonded_usync",
			Help: "Usync bonded as provider stake (not counting unbonding stake)."}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpunet_scheduler_queue_jobs",
			Help: "Jobs waiting for a provider (state queued) by the hardware class they ask for: cpu, a GPU class (a job naming several counts in each), any_gpu (a GPU job naming none), other (a class the ledger's table does not list)."}, []string{"class"}),
		lastBlockClock: time.Now,
	}
	for _, st := range States {
		m.jobs.WithLabelValues(st)
	}
	challengeMu.RLock()
	for _, c := range challengeSeries {
		m.challenges.WithLabelValues(c.Kind, c.Outcome)
	}
	challengeMu.RUnlock()
	for _, v := range finishedStates {
		m.finished.WithLabelValues(v)
	}
	for _, v := range verdictValues {
		m.verdicts.WithLabelValues(v)
	}
	for _, v := range replicaValues {
		m.replicas.WithLabelValues(v)
	}
	m.queue(nil)
	for _, v := range slashReasons {
		m.slashes.WithLabelValues(v)
		m.slashedUsync.WithLabelValues(v)
	}
	if reg != nil {
		reg.MustRegister(m.height, m.txs, m.txRate, m.jobs, m.providers, m.online, m.gpus, m.utilization, m.schedulerWait, m.challenges,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gpunet_mempool_txs", Help: "Txs waiting in the mempool."},
				func() float64 { return float64(s.chain.Mempool()) }),
			m.lastBlock, m.submitted, m.finished, m.verdicts, m.replicas, m.slashes, m.slashedUsync,
			m.jobFees, m.jobPayments, m.jobRefunds, m.escrow, m.treasury, m.staked, m.queued,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gpunet_last_block_age_seconds",
				Help: "Seconds from the block time of the last block the node processed to now (by this node's clock); it grows while no block comes. 0 before the first."},
				m.lastBlockAge))
	}
	return m
}

func (m *metrics) lastBlockAge() float64 {
	m.lastBlockMu.Lock()
	at := m.lastBlockTime
	m.lastBlockMu.Unlock()
	if at.IsZero() {
		return 0
	}
	return max(0, m.lastBlockClock().Sub(at).Seconds())
}

// event counts a ledger event: challenge outcomes, submissions, ends and
// slashes.
func (m *metrics) event(e ledger.Event) {
	challengeMu.RLock()
	c, ok := challengeEvents[e.Type]
	challengeMu.RUnlock()
	if ok {
		m.challenges.WithLabelValues(c.Kind, c.Outcome).Inc()
	}
	switch e.Type {
	case "job_submitted":
		m.submitted.Inc()
	case "job_" + ledger.JobSucceeded, "job_" + ledger.JobFailed, "job_" + ledger.JobCancelled:
		m.finished.WithLabelValues(e.Type[len("job_"):]).Inc()
	case "job_replica_slashed":
		reason := attr(e, "why")
		if reason == "" {
			reason = ledger.OutcomeMinority
		}
		m.slash(reason, attr(e, "amount"))
	case "hw_challenge_failed":
		m.slash(slashHardware, attr(e, "slashed"))
	}
}

func (m *metrics) slash(reason, amount string) {
	m.slashes.WithLabelValues(reason).Inc()
	if n, err := strconv.ParseUint(amount, 10, 64); err == nil {
		m.slashedUsync.WithLabelValues(reason).Add(float64(n))
	}
}

func attr(e ledger.Event, key string) string {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

// jobEnded counts what a job that ended settled: its verdict, its
// replicas' outcomes and its money.
func (m *metrics) jobEnded(j *ledger.Job) {
	if j.Verdict != "" {
		m.verdicts.WithLabelValues(j.Verdict).Inc()
	}
	for _, a := range j.Assignments {
		if a.Outcome != "" {
			m.replicas.WithLabelValues(a.Outcome).Inc()
		}
	}
	m.jobFees.Add(float64(j.Fee))
	m.jobPayments.Add(float64(j.Cost))
	m.jobRefunds.Add(float64(j.Refund))
}

// ledgerTotals are the ledger's money totals after a block.
type ledgerTotals struct{ escrow, treasury, staked uint64 }

func totalsOf(kv ledger.KV) ledgerTotals {
	return ledgerTotals{escrow: ledger.Escrowed(kv), treasury: ledger.Treasury(kv), staked: ledger.Staked(kv)}
}

// block records a block's sample.
func (m *metrics) block(sm Sample, t ledgerTotals) {
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
	m.lastBlock.Set(float64(sm.Time.UnixNano()) / 1e9)
	m.lastBlockMu.Lock()
	m.lastBlockTime = sm.Time
	m.lastBlockMu.Unlock()
	m.escrow.Set(float64(t.escrow))
	m.treasury.Set(float64(t.treasury))
	m.staked.Set(float64(t.staked))
}

// queue sets gpunet_scheduler_queue_jobs from the count per class: cpu
// and any_gpu are always exported, other classes while jobs wait for
// them.
func (m *metrics) queue(perClass map[string]int) {
	m.queuedMu.Lock()
	defer m.queuedMu.Unlock()
	if m.queuedLabels == nil {
		m.queuedLabels = map[string]bool{}
	}
	for c := range m.queuedLabels {
		if _, ok := perClass[c]; !ok && c != ledger.CPUClass && c != queueAnyGPU {
			m.queued.DeleteLabelValues(c)
			delete(m.queuedLabels, c)
		}
	}
	for _, c := range []string{ledger.CPUClass, queueAnyGPU} {
		m.queued.WithLabelValues(c).Set(float64(perClass[c]))
		m.queuedLabels[c] = true
	}
	for c, n := range perClass {
		m.queued.WithLabelValues(c).Set(float64(n))
		m.queuedLabels[c] = true
	}
}
