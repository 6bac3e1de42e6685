package provider_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// watchedOCI is the agent's container executor, watched from outside as
// an operator would with runc: when the agent pauses it, the watcher
// reads the job container's status and the CPU time its cgroup counted,
// once the pause has begun and again as it ends, just before the thaw.
type watchedOCI struct {
	*oci.Executor
	root string // the executor's runc state directory

	mu   sync.Mutex
	seen []pauseSeen
}

type pauseSeen struct {
	paused    int    // what Pause reported
	container string // the one container there was, if any
	status    string // its status once paused
	// cpuAtPause and cpuAtResume are its CPU time at both ends.
	cpuAtPause, cpuAtResume time.Duration
	took                    time.Duration
	err                     error // reading the container's state
	pauseErr                error // what Pause returned
}

func (w *watchedOCI) Pause(ctx context.Context) (func() error, int, error) {
	resume, n, err := w.Executor.Pause(ctx)
	s := pauseSeen{paused: n, pauseErr: err}
	t0 := time.Now()
	l, lerr := ocitest.ListContainers(w.root)
	if s.err = lerr; lerr == nil && len(l) == 1 {
		s.container, s.status = l[0].ID, l[0].Status
		s.cpuAtPause, s.err = ocitest.ContainerCPU(w.root, s.container)
	}
	return func() error {
		if s.container != "" && s.err == nil {
			s.cpuAtResume, s.err = ocitest.ContainerCPU(w.root, s.container)
		}
		s.took = time.Since(t0)
		w.mu.Lock()
		w.seen = append(w.seen, s)
		w.mu.Unlock()
		return resume()
	}, n, err
}

// pauseOfRunningJob returns the first pause seen that froze a job's
// container. A pause may pass a container over: one runc has created and
// not yet started cannot be frozen, and on a machine whose processes wait
// on the disk the kernel may not freeze a cgroup in the time runc gives it
// ("unable to freeze"); the proof then runs beside the job, and is late at
// worst, which measures the device and slashes nothing. The challenges
// repeat every few seconds, so the test looks for a pause that did freeze.
func (w *watchedOCI) pauseOfRunningJob() (pauseSeen, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.seen {
		if s.container != "" && s.paused > 0 {
			return s, true
		}
	}
	return pauseSeen{}, false
}

// pauses returns every pause seen, for a failure's message.
func (w *watchedOCI) pauses() []pauseSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// TestCPUProofPausesContainerJob runs an agent with the real container
// executor (runc) on a chain that challenges its CPU again and again, and
// a consumer's job on it that burns the CPU on two threads: each time the
// agent proves, the job's container is frozen (runc shows it paused, and
// its cgroup counts no CPU time from the start of the proof to its end),
// and it runs on afterwards; the honest provider passes its challenges
// with the hog beside its prover.
func TestCPUProofPausesContainerJob(t *testing.T) {
	dir := t.TempDir()
	ex, err := oci.New(t.Context(), oci.Options{Dir: filepath.Join(dir, "oci")})
	ocitest.RequireRunc(t, nil, err)
	t.Cleanup(func() { ex.Close() })
	if p := ex.Capabilities().Pause; strings.HasPrefix(p, "unavailable") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("containers cannot be paused: %s", p)
		}
		t.Skipf("containers cannot be paused: %s", p)
	}
	w := &watchedOCI{Executor: ex, root: filepath.Join(dir, "oci", "runc")}
	prog := ocitest.BuildGo(t, "../sandbox/oci/testdata/jobprog")
	reg := ocitest.Registry(t, nil)
	ref := ocitest.Push(t, reg, "test/jobprog", ocitest.ProgramImage(t, prog, "hello"))

	// Challenges of 100 ms at the claim: the ledger challenges the CPU
	// again 60 busy times (7.5 s) after the last.
	n := startNetworkWith(t, func(p *ledger.Params) {
		p.HWRatePPM = 1_000_000
		p.HWTargetMillis = 100
		p.HWAllowanceMillis = 3_000
	}, "consumer", "p")
	logs := &syncLog{}
	a, _ := runAgentWith(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000, func(o *provider.Options) {
		o.Sandboxes = map[string]sandbox.Executor{oci.Name: w}
		// 2 GOPS: a tenth of one core of the prover's kernel, so that it
		// passes on a machine other tests load too.
		o.Figures = &hwinfo.Figures{Device: "cpu", Int8TOPS: 0.002, MemBandwidthGBs: 20}
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	waitFor(t, "provider ready", func() bool { return ready(a) })

	spec, err := jobspec.Parse(fmt.Appendf(nil, `name: hog
executor: oci
image: %s
command: [/job, spin, "2"]
outputs: [/out]
resources: {cpu: 2, memory: 64MiB}
max_price: 0.5
timeout: 5m
verification: none
`, ref), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(n.cl, consumer, n.home, "provider-test")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	go jc.Follow(ctx, id, 50*time.Millisecond, nil) // grants the job key
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, ok := w.pauseOfRunningJob(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no proof froze the hog's container in 2 minutes; the pauses: %+v", w.pauses())
		}
		time.Sleep(100 * time.Millisecond)
	}
	s, _ := w.pauseOfRunningJob()
	t.Logf("pause: %+v", s)
	if s.err != nil || s.paused != 1 || s.status != "paused" {
		t.Fatalf("the proof's pause: %+v; want the job's container paused", s)
	}
	if s.cpuAtResume != s.cpuAtPause {
		t.Errorf("the job's cgroup counted %s of CPU time during the proof (%s then %s); want none", s.cpuAtResume-s.cpuAtPause, s.cpuAtPause, s.cpuAtResume)
	}
	// It runs on afterwards: its CPU time grows again (looked at for up
	// to 10 s: a clean-clone CI run with a busy core saw none in one
	// 300-ms look after the thaw).
	u0, st := ocitest.CPUUsage(t, w.root, s.container)
	u1 := u0
	for end := time.Now().Add(10 * time.Second); u1 <= u0 && time.Now().Before(end); {
		time.Sleep(300 * time.Millisecond)
		u1, st = ocitest.CPUUsage(t, w.root, s.container)
	}
	if u1 <= u0 || st == "paused" {
		t.Errorf("after the proof the job's container is %s and used %s then %s over 10 s; want it running", st, u0, u1)
	}
	for _, want := range []string{"pausing this provider's jobs and services while it proves on the CPU", "paused=1", "resumed the paused jobs and services"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %q in the agent's log:\n%s", want, logs.String())
		}
	}
	// The pause ends when the proof is computed, or, on a machine other
	// tests load, when the challenge's busy time is up (the jobs never
	// wait longer than that): both say why.
	if l := logs.String(); !strings.Contains(l, `why="the proof is computed"`) && !strings.Contains(l, `why="the proof took longer than the challenge's busy time`) {
		t.Errorf("the resume does not say why in the agent's log:\n%s", l)
	}
	p, err := n.cl.Provider(t.Context(), a.Status().Key())
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Record; r.Slashed != 0 || r.Challenges.Failed != 0 {
		t.Errorf("the honest provider beside its hog: slashed %d, challenges %+v", r.Slashed, r.Challenges)
	}
	if _, err := jc.Cancel(t.Context(), id); err != nil {
		t.Errorf("cancel the hog: %v", err)
	}
}

// syncLog is an agent's log, written by its goroutines and read by the
// test.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
