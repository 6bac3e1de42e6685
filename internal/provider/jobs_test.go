package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/gpunet/gpunet/examples/wordcount/count"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
)

// wordcountSpec loads the bundled wordcount example.
// wordcountSpec is the wordcount example without verification: these
// tests run one provider, which no second provider could audit.
// TestWASIJobEndToEnd runs it as written (spot) on two.
func wordcountSpec(t *testing.T) *jobspec.Spec {
	t.Helper()
	s, err := jobspec.Load("../../examples/wordcount/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s.Verification = jobspec.VerifyNone
	return s
}

// TestWASIJobEndToEnd runs the wordcount example as a job on a real chain:
// the consumer encrypts and uploads it, a provider agent runs it in the
// real wasm sandbox, and the decrypted output equals the program run
// natively on the same input. The escrow settles to the base unit.
func TestWASIJobEndToEnd(t *testing.T) {
	n := startNetwork(t, "consumer", "p", "q")
	a, _ := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	b, _ := runAgent(t, n, "q", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 72_000)
	waitFor(t, "providers ready", func() bool { return ready(a) && ready(b) })
	key, err := n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	before, _ := n.cl.Balance(t.Context(), key.Address)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	spec := wordcountSpec(t)
	spec.Verification = jobspec.VerifySpot // p is new: its result is always audited by q
	id, err := jc.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	keyFiles := func() []string {
		m, _ := filepath.Glob(filepath.Join(jc.Dir, "*.key"))
		return m
	}
	if len(keyFiles()) != 1 {
		t.Fatalf("job key files after submit: %v", keyFiles())
	}
	var states []string
	j, err := jc.Follow(ctx, id, 20*time.Millisecond, func(j *ledger.Job) { states = append(states, j.State) })
	if err != nil {
		t.Fatal(err)
	}
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || len(j.Assignments) != 2 {
		t.Fatalf("job %s %s on %d providers: %s (states %v)", j.State, j.Verdict, len(j.Assignments), j.Reason, states)
	}
	// The job has ended: its key, which opens its inputs, is gone from
	// the owner's home (outputs are sealed to the owner's own key).
	if left := keyFiles(); len(left) != 0 {
		t.Fatalf("job key files left after the job ended: %v", left)
	}
	out := t.TempDir()
	if err := jc.FetchOutputs(ctx, j, out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "counts.txt"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open("../../examples/wordcount/input.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var c count.Counts
	if err := c.Add(in); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	c.Report(&want)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("job output differs from the native run:\n%s\n---\n%s", got, want.Bytes())
	}
	var logs bytes.Buffer
	if err := jc.FetchLogs(ctx, j, &logs); err != nil || !strings.Contains(logs.String(), "words") {
		t.Errorf("logs %q, err %v", logs.String(), err)
	}
	// Exact settlement: the owner paid cost + fee, nothing else.
	after, _ := n.cl.Balance(t.Context(), key.Address)
	if before.Balance-after.Balance != j.Cost+j.Fee || j.Escrow != 0 || j.Refund == 0 {
		t.Fatalf("balance %d → %d, cost %d fee %d refund %d", before.Balance, after.Balance, j.Cost, j.Fee, j.Refund)
	}
	for _, s := range []string{ledger.JobAssigned, ledger.JobSucceeded} {
		if !strings.Contains(strings.Join(states, " "), s) {
			t.Errorf("states %v never showed %s", states, s)
		}
	}
	// The agent's metrics counted the run and its data, in Prometheus's
	// text format.
	srv := httptest.NewServer(promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var parser expfmt.TextParser
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	metric := func(name string, labels map[string]string) float64 {
		t.Helper()
		for _, m := range mfs[name].GetMetric() {
			match := 0
			for _, lp := range m.Label {
				if labels[lp.GetName()] == lp.GetValue() {
					match++
				}
			}
			if match == len(labels) {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	if v := metric("gpunet_provider_executor_runs_total", map[string]string{"provider": "p", "executor": "wasm"}); v != 1 {
		t.Errorf("executor runs = %v, want 1", v)
	}
	if v := metric("gpunet_provider_executor_failures_total", map[string]string{"provider": "p", "executor": "wasm"}); v != 0 {
		t.Errorf("executor failures = %v, want 0", v)
	}
	if v := metric("gpunet_provider_jobs_running", map[string]string{"provider": "p"}); v != 0 {
		t.Errorf("jobs running = %v after the job", v)
	}
	if in, out := metric("gpunet_provider_blob_bytes_total", map[string]string{"provider": "p", "direction": "in"}), metric("gpunet_provider_blob_bytes_total", map[string]string{"provider": "p", "direction": "out"}); in < 1000 || out < 100 {
		t.Errorf("blob bytes in %v out %v", in, out)
	}

	// The gateway only ever held ciphertext: neither the input text nor
	// the output appears anywhere under the node's blob store.
	input, _ := os.ReadFile("../../examples/wordcount/input.txt")
	marks := [][]byte{input[:40], want.Bytes()[:30], logs.Bytes()[:20]}
	filepath.Walk(filepath.Join(n.home, "data", "blobs"), func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		for _, m := range marks {
			if bytes.Contains(b, m) {
				t.Errorf("plaintext %q found in the gateway's %s", m, path)
			}
		}
		return nil
	})
}

// TestCancelRunningJob: cancelling a running job pays the provider its
// elapsed seconds at the agreed price and refunds the rest, exactly.
func TestCancelRunningJob(t *testing.T) {
	n := startNetwork(t, "consumer", "p")
	n.sb = map[string]sandbox.Executor{"wasm": fake.New(fake.Block()).WithName("wasm")}
	a, _ := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	waitFor(t, "provider ready", func() bool { return ready(a) })
	key, _ := n.kr.Get("consumer")
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	before, _ := n.cl.Balance(ctx, key.Address)
	id, err := jc.Submit(ctx, wordcountSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(ctx)
	go jc.Follow(fctx, id, 20*time.Millisecond, nil)
	waitFor(t, "running", func() bool {
		j, err := n.cl.Job(ctx, id)
		return err == nil && j.State == ledger.JobRunning
	})
	stop()
	time.Sleep(1500 * time.Millisecond)
	if _, err := n.cl.SendMsg(ctx, key, 0, &ledger.MsgCancelJob{JobID: id}); err != nil {
		t.Fatal(err)
	}
	j, err := n.cl.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	a0 := j.Assignments[0]
	elapsed := uint64(j.FinishedAt - a0.StartedAt)
	wantCost := a0.PricePerHour * elapsed / 3600
	wantFee := wantCost * 100 / 10_000
	escrow := j.Cost + j.Fee + j.Refund
	if j.State != ledger.JobCancelled || elapsed == 0 || j.Cost != wantCost || j.Fee != wantFee || j.Escrow != 0 {
		t.Fatalf("cancelled after %ds: %s cost %d (want %d) fee %d (want %d) escrow %d", elapsed, j.State, j.Cost, wantCost, j.Fee, wantFee, j.Escrow)
	}
	after, _ := n.cl.Balance(ctx, key.Address)
	if before.Balance-after.Balance != escrow-j.Refund {
		t.Fatalf("owner paid %d, want %d", before.Balance-after.Balance, escrow-j.Refund)
	}
	// The provider stops the run: the job is no longer its.
	waitFor(t, "the run stopped", func() bool {
		l, err := n.cl.ProviderJobs(ctx, a.Status().Key())
		return err == nil && len(l.Jobs) == 0
	})
}

// TestJobWaitsForMatchingProvider: a job nobody can take stays queued with
// the reason, and runs once a provider that fits joins.
func TestJobWaitsForMatchingProvider(t *testing.T) {
	n := startNetwork(t, "consumer", "cpu", "gamer")
	cpu, _ := runAgent(t, n, "cpu", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	waitFor(t, "cpu provider ready", func() bool { return ready(cpu) })
	key, _ := n.kr.Get("consumer")
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	s := wordcountSpec(t)
	s.Resources.GPU.Count = 1
	s.Resources.GPU.Models = []string{"RTX_4090"}
	s.Resources.GPU.MinVRAM = 20 << 30
	s.MaxPrice = 2_000_000
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var j *ledger.Job
	waitFor(t, "a reason", func() bool {
		j, err = n.cl.Job(ctx, id)
		return err == nil && strings.Contains(j.Reason, "no online provider offers RTX_4090")
	})
	if j.State != ledger.JobQueued {
		t.Fatalf("state %s", j.State)
	}
	gamer, _ := runAgent(t, n, "gamer", nvmlsim.Lib(nvmlsim.RTX4090, 1), "eu", 500_000)
	done, err := jc.Follow(ctx, id, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done.State != ledger.JobSucceeded || done.Assignments[0].Provider != gamer.Status().Key() || done.Assignments[0].PricePerHour != 500_000 {
		t.Fatalf("after the GPU provider joined: %s %q %+v", done.State, done.Reason, done.Assignments)
	}
}

// TestLiveLogs: a job's log reaches its owner, decrypted, while the job
// still runs; the relay refuses posts from anyone but the job's provider.
func TestLiveLogs(t *testing.T) {
	n := startNetwork(t, "consumer", "p", "stranger")
	release := make(chan struct{})
	slow := fake.New(func(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
		fmt.Fprintln(logs, "step 1 of 2: warming up")
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		fmt.Fprintln(logs, "step 2 of 2: done")
		os.MkdirAll(filepath.Join(job.WorkDir, "out"), 0o755)
		return fake.Exit(0), nil
	}).WithName("wasm")
	n.sb = map[string]sandbox.Executor{"wasm": slow}
	a, _ := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	waitFor(t, "provider ready", func() bool { return ready(a) })
	key, _ := n.kr.Get("consumer")
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, wordcountSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	go jc.Follow(ctx, id, 20*time.Millisecond, nil) // grants the key
	var live bytes.Buffer
	var next uint64
	waitFor(t, "the first log line while the job runs", func() bool {
		jc.StreamLogs(ctx, id, &next, &live)
		return strings.Contains(live.String(), "warming up")
	})
	if j, _ := n.cl.Job(ctx, id); j.State != ledger.JobRunning {
		t.Fatalf("job is %s, want running while its log streams", j.State)
	}
	// Only the job's provider may post, with a valid signature.
	stranger, _ := n.kr.Get("stranger")
	if err := n.cl.PostLog(ctx, stranger, id, 0, []byte("forged")); err == nil || !strings.Contains(err.Error(), "not running job") {
		t.Fatalf("a stranger's post: %v", err)
	}
	close(release)
	j, err := jc.Follow(ctx, id, 20*time.Millisecond, nil)
	if err != nil || j.State != ledger.JobSucceeded {
		t.Fatalf("job: %v %+v", err, j)
	}
	jc.StreamLogs(ctx, id, &next, &live)
	if !strings.Contains(live.String(), "step 2 of 2") {
		t.Errorf("live log %q lacks the last line", live.String())
	}
	var full bytes.Buffer
	if err := jc.FetchLogs(ctx, j, &full); err != nil || full.String() != "step 1 of 2: warming up\nstep 2 of 2: done\n" {
		t.Errorf("committed log %q, err %v", full.String(), err)
	}
}

// TestFailingJobsFailCleanly: jobs that run out of memory or time fail with
// the reason, are paid for what they ran, and the agent goes on serving.
func TestFailingJobsFailCleanly(t *testing.T) {
	n := startNetwork(t, "consumer", "p")
	a, _ := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	waitFor(t, "provider ready", func() bool { return ready(a) })
	key, _ := n.kr.Get("consumer")
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	mandel, err := jobspec.Load("../../examples/mandelbrot/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mandel.Verification = jobspec.VerifyNone // one provider
	for _, tc := range []struct {
		name   string
		mutate func(s *jobspec.Spec)
		reason string
	}{
		{"out of memory", func(s *jobspec.Spec) { s.Resources.Memory = 2 << 20 }, "out of memory"},
		{"out of time", func(s *jobspec.Spec) {
			s.Args = []string{"4000", "3000", "5000"}
			s.Timeout = jobspec.Duration(time.Second)
		}, "timed out"},
	} {
		s := *mandel
		tc.mutate(&s)
		id, err := jc.Submit(ctx, &s)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		j, err := jc.Follow(ctx, id, 20*time.Millisecond, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if j.State != ledger.JobFailed || !strings.Contains(j.Reason, tc.reason) {
			t.Errorf("%s: %s %q", tc.name, j.State, j.Reason)
		}
		r := j.Assignments[0].Result
		cost := j.Assignments[0].PricePerHour * r.MeteredSeconds / 3600
		if j.Escrow != 0 || j.Cost != cost || j.Fee != cost*100/10_000 || j.Refund == 0 {
			t.Errorf("%s: settled cost %d (want %d for %ds) fee %d refund %d escrow %d", tc.name, j.Cost, cost, r.MeteredSeconds, j.Fee, j.Refund, j.Escrow)
		}
	}
	// The agent still serves.
	id, err := jc.Submit(ctx, wordcountSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if j, err := jc.Follow(ctx, id, 20*time.Millisecond, nil); err != nil || j.State != ledger.JobSucceeded {
		t.Fatalf("a good job after the failures: %v %+v", err, j)
	}
}

// TestAgentSweepsLeftovers: what a killed agent left in its work
// directory (a job's decrypted module and inputs, other replicas' outputs
// opened to judge them, a downloaded blob) is removed when the agent starts
// again; pending reveals and judgments are kept.
func TestAgentSweepsLeftovers(t *testing.T) {
	n := startNetwork(t, "p")
	work := filepath.Join(n.home, "work", "p")
	for _, f := range []string{"job-7/root/in/secret.txt", "job-7/module.wasm", "judge-7/0/out/sums.f64", "blob-123", "reveals/7.json", "judgments/7.json"} {
		p := filepath.Join(work, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	waitFor(t, "p online", func() bool { return ready(a) })
	for _, gone := range []string{"job-7", "judge-7", "blob-123"} {
		if _, err := os.Stat(filepath.Join(work, gone)); !os.IsNotExist(err) {
			t.Errorf("%s left in the work directory: %v", gone, err)
		}
	}
	for _, kept := range []string{"reveals/7.json", "judgments/7.json"} {
		if _, err := os.Stat(filepath.Join(work, kept)); err != nil {
			t.Errorf("a pending reveal was removed: %v", err)
		}
	}
}
