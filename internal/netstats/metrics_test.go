package netstats

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// histogram returns the sample count and sum of a histogram.
func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// TestChainMetrics follows a chain whose blocks are 1.25 s apart through
// jobs placed in their submit block, placed later, cancelled while
// queued, and run to the end, and checks what each metric says.
func TestChainMetrics(t *testing.T) {
	g := lt.Genesis(100_000_000_000, "consumer", "cpu", "gpu")
	g.Params.LivenessRatePPM = 0
	c := newChain(t, g)
	start := time.Unix(1_700_000_000, 0)
	c.times = func(h int64) time.Time { return start.Add(time.Duration(h) * 1250 * time.Millisecond) }
	c.block(c.tx(cpuProv, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("", 0, 36_000)}), c.tx(cpuProv, &ledger.MsgStake{Amount: 10_000_000}))
	// A GPU job that waits: nobody has an RTX 4090 yet. It was submitted
	// before the stats start, so its submit block is read back.
	gpuJob := lt.WasmJob("gpu", 10_000_000, 60)
	gpuJob.GPUCount, gpuJob.GPUModels = 1, []string{"RTX_4090"}
	c.block(c.tx(consumer, &ledger.MsgSubmitJob{Spec: gpuJob, ConsumerKey: lt.AgeKey("consumer")}))

	reg := prometheus.NewRegistry()
	s := New(c, Options{Registry: reg})
	now := start
	s.m.lastBlockClock = func() time.Time { return now }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitHeight(t, s, 2)
	queue := func(class string) float64 { return testutil.ToFloat64(s.m.queued.WithLabelValues(class)) }
	if got := queue("RTX_4090"); got != 1 {
		t.Errorf("queue RTX_4090 after load = %v, want 1", got)
	}

	// Placed in the block that submits it: a wait of 0, recorded.
	b := c.block(c.tx(consumer, &ledger.MsgSubmitJob{Spec: lt.WasmJob("now", 1_000_000, 60), ConsumerKey: lt.AgeKey("consumer")}))
	waitHeight(t, s, uint64(b.Height))
	if n, sum := histogram(t, s.m.schedulerWait); n != 1 || sum != 0 {
		t.Errorf("scheduler wait after a job placed in its submit block: %d samples, sum %v; want 1, 0", n, sum)
	}
	// A job asking for a class outside the ledger's table waits as
	// "other", then is cancelled.
	odd := lt.WasmJob("odd", 10_000_000, 60)
	odd.GPUCount, odd.GPUModels = 1, []string{"NEWGPU_9000"}
	waitHeight(t, s, uint64(c.block(c.tx(consumer, &ledger.MsgSubmitJob{Spec: odd, ConsumerKey: lt.AgeKey("consumer")})).Height))
	if got := queue(queueOther); got != 1 {
		t.Errorf("queue other = %v, want 1", got)
	}
	waitHeight(t, s, uint64(c.block(c.tx(consumer, &ledger.MsgCancelJob{JobID: 3})).Height))
	if got := testutil.ToFloat64(s.m.finished.WithLabelValues(ledger.JobCancelled)); got != 1 {
		t.Errorf("jobs finished cancelled = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(s.m.queued); n != 3 { // cpu, any_gpu, RTX_4090
		t.Errorf("queue series = %d, want 3 (other gone once nothing waits for it)", n)
	}

	// The GPU provider comes: job 1 is placed at block 6, submitted at
	// block 2, 4 × 1.25 s earlier.
	gpuInfo := lt.ProviderInfo("RTX_4090", 2, 1_000_000)
	b = c.block(c.tx(gpuProv, &ledger.MsgRegisterProvider{ProviderInfo: gpuInfo}), c.tx(gpuProv, &ledger.MsgStake{Amount: 200_000_000}))
	waitHeight(t, s, uint64(b.Height))
	if j, _, _ := ledger.GetJob(c.kv, 1); j.State != ledger.JobAssigned {
		t.Fatalf("job 1 is %s, want assigned", j.State)
	}
	if n, sum := histogram(t, s.m.schedulerWait); n != 2 || sum != 5 {
		t.Errorf("scheduler wait: %d samples, sum %v; want 2, 5 (0 and 4 blocks of 1.25 s)", n, sum)
	}
	if got := queue("RTX_4090"); got != 0 {
		t.Errorf("queue RTX_4090 after placement = %v", got)
	}

	// Job 2 runs to the end on the CPU provider.
	j2, _, _ := ledger.GetJob(c.kv, 2)
	p := j2.Assignments[0].Provider
	prov := map[bool]lt.Key{true: cpuProv, false: gpuProv}[p == cpuProv.Addr]
	step := func(tx []byte) { waitHeight(t, s, uint64(c.block(tx).Height)) }
	step(c.tx(consumer, &ledger.MsgGrantKey{JobID: 2, Grants: []ledger.Grant{{Provider: p, WrappedKey: []byte("k")}}}))
	step(c.tx(prov, &ledger.MsgStartJob{JobID: 2}))
	step(c.tx(prov, &ledger.MsgCommitResult{JobID: 2, MeteredSeconds: 3, Result: &ledger.JobResult{ManifestHash: ledger.Hash{1}, OutputBlob: "sha256:" + strings.Repeat("ab", 32), MeteredSeconds: 3}}))
	j2, _, _ = ledger.GetJob(c.kv, 2)
	if j2.State != ledger.JobSucceeded {
		t.Fatalf("job 2 is %s", j2.State)
	}
	for _, c := range []struct {
		name string
		m    prometheus.Collector
		want float64
	}{
		{"jobs submitted", s.m.submitted, 2}, // jobs 2 and 3; job 1 came before the stats
		{"jobs finished succeeded", s.m.finished.WithLabelValues(ledger.JobSucceeded), 1},
		{"verdict unchecked", s.m.verdicts.WithLabelValues(ledger.VerdictUnchecked), 1},
		{"job fees", s.m.jobFees, float64(j2.Fee)},
		{"job payments", s.m.jobPayments, float64(j2.Cost)},
		{"escrow", s.m.escrow, float64(ledger.Escrowed(c.kv))},
		{"treasury", s.m.treasury, float64(ledger.Treasury(c.kv))},
		{"stake", s.m.staked, float64(ledger.Staked(c.kv))},
		{"last block", s.m.lastBlock, float64(c.times(c.height).UnixNano()) / 1e9},
	} {
		if got := testutil.ToFloat64(c.m); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if j2.Cost == 0 || ledger.Escrowed(c.kv) == 0 {
		t.Errorf("the test should see money move: cost %d, escrow %d", j2.Cost, ledger.Escrowed(c.kv))
	}
	now = c.times(c.height).Add(1500 * time.Millisecond)
	if got := s.m.lastBlockAge(); got != 1.5 {
		t.Errorf("last block age = %v, want 1.5", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestSlashMetrics counts slashes by reason from the ledger's events.
func TestSlashMetrics(t *testing.T) {
	s := New(&chain{}, Options{Registry: prometheus.NewRegistry()})
	for _, e := range []ledger.Event{
		{Type: "job_replica_slashed", Attrs: []ledger.Attr{{Key: "job", Value: "1"}, {Key: "amount", Value: "100"}}},
		{Type: "job_replica_slashed", Attrs: []ledger.Attr{{Key: "amount", Value: "7"}, {Key: "why", Value: ledger.OutcomeUnrevealed}}},
		{Type: "hw_challenge_failed", Attrs: []ledger.Attr{{Key: "reason", Value: "late"}, {Key: "slashed", Value: "40"}}},
	} {
		s.m.event(e)
	}
	for reason, want := range map[string][2]float64{ledger.OutcomeMinority: {1, 100}, ledger.OutcomeUnrevealed: {1, 7}, slashHardware: {1, 40}, ledger.OutcomeWithheldKey: {0, 0}} {
		n, amt := testutil.ToFloat64(s.m.slashes.WithLabelValues(reason)), testutil.ToFloat64(s.m.slashedUsync.WithLabelValues(reason))
		if n != want[0] || amt != want[1] {
			t.Errorf("slashes %s: %v, %v usync; want %v", reason, n, amt, want)
		}
	}
	if got := testutil.ToFloat64(s.m.challenges.WithLabelValues("hardware", "failed")); got != 1 {
		t.Errorf("hardware challenges failed = %v", got)
	}
}
