package provider_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/allreduce/ring"
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// requireGangHost fails (CI=true) or skips the test where a gang member's
// network cannot be made: it needs root, ip and /dev/net/tun, as
// internal/clusternet's tests do.
func requireGangHost(t *testing.T, ex *oci.Executor) {
	t.Helper()
	var why string
	switch {
	case ex.Capabilities().Rootless:
		why = "the container executor is rootless; a gang member's network namespace needs root"
	case os.Geteuid() != 0:
		why = "not root"
	default:
		if _, err := exec.LookPath("ip"); err != nil {
			why = "ip (iproute2) is missing"
		} else if _, err := os.Stat("/dev/net/tun"); err != nil {
			why = "/dev/net/tun is missing"
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// gangRig is a chain, provider agents sharing one real container
// executor, and the cluster example's image in a registry.
type gangRig struct {
	n      *network
	logs   *syncLog
	ref    string
	names  []string
	agents []*provider.Agent
	stops  []func()
	ex     *oci.Executor
}

// startGang starts the chain, one agent per name (all in region eu, each
// posting 127.0.0.1:port as its gang endpoint) and the image.
func startGang(t *testing.T, names ...string) *gangRig {
	t.Helper()
	return startGangWith(t, "../../examples/allreduce", nil, nil, names...)
}

// startGangWith is startGang with the program in progDir as the image's
// /job, the chain's parameters tuned and the keys extra funded too (with
// no agent).
func startGangWith(t *testing.T, progDir string, tune func(*ledger.Params), extra []string, names ...string) *gangRig {
	t.Helper()
	dir := t.TempDir()
	ex, err := oci.New(t.Context(), oci.Options{Dir: filepath.Join(dir, "oci")})
	ocitest.RequireRunc(t, nil, err)
	t.Cleanup(func() { ex.Close() })
	requireGangHost(t, ex)
	prog := ocitest.BuildGo(t, progDir)
	reg := ocitest.Registry(t, nil)
	g := &gangRig{logs: &syncLog{}, names: names, ex: ex}
	g.ref = ocitest.Push(t, reg, "test/"+filepath.Base(progDir), ocitest.ProgramImage(t, prog))
	g.n = startNetworkWith(t, tune, append(append([]string{"consumer"}, extra...), names...)...)
	for _, name := range names {
		a, stop := runAgentWith(t, g.n, name, nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000, func(o *provider.Options) {
			o.Sandboxes = map[string]sandbox.Executor{oci.Name: ex}
			o.GangHost = netip.MustParseAddr("127.0.0.1")
			o.Logger = slog.New(slog.NewTextHandler(g.logs, nil))
		})
		g.agents = append(g.agents, a)
		g.stops = append(g.stops, stop)
	}
	for _, a := range g.agents {
		waitFor(t, "providers ready", func() bool { return ready(a) })
	}
	return g
}

// TestGangAllReduce runs a 3-member gang on three provider agents with the
// real container executor (runc): the cluster example, built from this
// repository as an oci image, does a ring all-reduce over the gang's
// private network (each member in its own network namespace, WireGuard
// between them) reading only torchrun's variables and the members file.
// Every member's result equals a one-process run's; the owner gets each
// member's outputs under rank-N/ and each member's log. It reports how
// long the gang took from submit to every member started, first with the
// image pulled and then cached.
func TestGangAllReduce(t *testing.T) {
	g := startGang(t, "p0", "p1", "p2")
	n, logs, ref, members := g.n, g.logs, g.ref, g.names
	consumer, err := n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(n.cl, consumer, n.home, "provider-test")

	const elems, seed = 200_000, 7
	want := ring.Sum(seed, len(members), elems)
	wantDigest := ring.Digest(want)
	var started [3]time.Duration
	rounds := []struct {
		label  string
		single bool
	}{{"gang, image pulled", false}, {"gang, image cached", false}, {"single job (-local 3), image cached", true}}
	for round, rd := range rounds {
		nodes, args := 3, ""
		if rd.single {
			// The baseline: one provider, one process summing the
			// three ranks' vectors: the one-process run.
			nodes, args = 1, `-local, "3", `
		}
		spec, err := jobspec.Parse(fmt.Appendf(nil, `name: allreduce
executor: oci
image: %s
command: [/job, %s-n, "%d", -seed, "%d", -out, /out/sum, -timeout, 2m]
outputs: [/out]
resources: {nodes: %d, cpu: 1, memory: 256MiB, shm: 96MiB}
max_price: 0.5
timeout: 5m
verification: none
`, ref, args, elems, seed, nodes), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		t0 := time.Now()
		id, err := jc.Submit(ctx, spec)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		go jc.Follow(ctx, id, 50*time.Millisecond, nil) // grants the members the job key
		var j *ledger.Job
		for {
			if j, err = n.cl.Job(ctx, id); err != nil {
				cancel()
				t.Fatal(err)
			}
			if started[round] == 0 && (j.State == ledger.JobRunning || j.Done()) && allStarted(j) {
				started[round] = time.Since(t0)
			}
			if j.Done() {
				break
			}
			if ctx.Err() != nil {
				cancel()
				t.Fatalf("%s: job %d is %s after 3 minutes (%s)\nagents' log:\n%s", rd.label, id, j.State, j.Reason, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("%s: submit → all %d member(s) started %s; done after %s", rd.label, nodes, started[round].Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
		if j.State != ledger.JobSucceeded {
			cancel()
			t.Fatalf("%s: job %d %s: %s\nagents' log:\n%s", rd.label, id, j.State, j.Reason, logs.String())
		}
		out := filepath.Join(t.TempDir(), "out")
		if err := jc.FetchOutputs(ctx, j, out); err != nil {
			cancel()
			t.Fatal(err)
		}
		var all bytes.Buffer
		if err := jc.FetchLogs(ctx, j, &all); err != nil {
			cancel()
			t.Fatal(err)
		}
		cancel()
		if testing.Verbose() {
			t.Logf("the log:\n%s", all.String())
		}
		dirs := []string{out}
		if !rd.single {
			dirs = nil
			for r := range members {
				dirs = append(dirs, filepath.Join(out, jobclient.GangRankDir(uint64(r))))
			}
		}
		for r, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "out", "sum"))
			if err != nil {
				t.Fatalf("%s: rank %d's outputs: %v", rd.label, r, err)
			}
			got := make([]int64, len(b)/8)
			for i := range got {
				got[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
			}
			if d := ring.Digest(got); len(b) != 8*elems || d != wantDigest {
				t.Errorf("%s: rank %d's result: %d bytes, sha256 %s; the one-process sum's: %d bytes, sha256 %s", rd.label, r, len(b), d, 8*elems, wantDigest)
			}
			if rd.single {
				continue
			}
			line := fmt.Sprintf("[rank %d] allreduce rank=%d world=3 ", r, r)
			if !strings.Contains(all.String(), line) || !strings.Contains(all.String(), "sha256="+wantDigest) {
				t.Errorf("the gang's log has no %q with the one-process digest:\n%s", line, all.String())
			}
		}
	}
	t.Logf("submit → all started, image cached: gang of 3 %s, single job %s (%.2f×)", started[1].Round(time.Millisecond), started[2].Round(time.Millisecond), started[1].Seconds()/started[2].Seconds())
}

// TestGangFullAllReduce runs a 2-member gang at verification: full on four
// provider agents with the real container executor: the ledger places two
// whole replica gangs on distinct providers, each replica gang's members
// form their own private network (the example's log says world=2 in each:
// the two gangs never meet), every member commits and reveals its own
// rank's result, and the job ends validated, the two gangs agreeing rank
// for rank, every member paid; the owner's outputs are the delivered
// gang's, each rank's equal to the one-process sum.
func TestGangFullAllReduce(t *testing.T) {
	g := startGang(t, "p0", "p1", "p2", "p3")
	n := g.n
	consumer, err := n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(n.cl, consumer, n.home, "provider-test")
	const elems, seed = 50_000, 13
	wantDigest := ring.Digest(ring.Sum(seed, 2, elems))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// run runs the gang at verification v and returns the finished job and
	// how long it took from submit.
	run := func(v string) (*ledger.Job, time.Duration) {
		spec, err := jobspec.Parse(fmt.Appendf(nil, `name: allreduce-%s
executor: oci
image: %s
command: [/job, -n, "%d", -seed, "%d", -out, /out/sum, -timeout, 2m]
outputs: [/out]
resources: {nodes: 2, cpu: 1, memory: 256MiB}
max_price: 0.5
timeout: 5m
verification: %s
deterministic: true
`, v, g.ref, elems, seed, v), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		id, err := jc.Submit(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		go jc.Follow(ctx, id, 50*time.Millisecond, nil)
		for {
			j, err := n.cl.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.Done() {
				return j, time.Since(t0)
			}
			if ctx.Err() != nil {
				t.Fatalf("job %d at %s is %s after 3 minutes (%+v)\nagents' log:\n%s", id, v, j.State, j.Wait, g.logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The baseline: the same gang unverified, once to pull the image,
	// then measured with it cached, as the gang at full is.
	run(ledger.VerifyNone)
	base, baseTook := run(ledger.VerifyNone)
	if base.State != ledger.JobSucceeded {
		t.Fatalf("the gang at none: %s (%+v)\nagents' log:\n%s", base.State, base.Wait, g.logs.String())
	}
	j, took := run(ledger.VerifyFull)
	t.Logf("gang of 2, image cached: at none %s, cost %d usync; at full (2 replica gangs, 4 providers) %s (%.2f×), cost %d usync (%.2f×)",
		baseTook.Round(time.Millisecond), base.Cost, took.Round(time.Millisecond), took.Seconds()/baseTook.Seconds(), j.Cost, float64(j.Cost)/float64(max(base.Cost, 1)))
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated {
		t.Fatalf("job %d %s, verdict %s (%+v)\nagents' log:\n%s", j.ID, j.State, j.Verdict, j.Wait, g.logs.String())
	}
	seen := map[address.Address]bool{}
	perGang := map[uint64][]uint64{}
	for _, a := range j.Assignments {
		if seen[a.Provider] {
			t.Errorf("provider %s holds two members: %+v", a.Provider, j.Assignments)
		}
		seen[a.Provider] = true
		perGang[a.Gang] = append(perGang[a.Gang], a.Rank)
		if a.Outcome != ledger.OutcomeMajority || a.Paid == 0 || a.Commitment == nil || a.Result == nil {
			t.Errorf("gang %d rank %d: outcome %s paid %d (committed %v revealed %v)", a.Gang, a.Rank, a.Outcome, a.Paid, a.Commitment != nil, a.Result != nil)
		}
	}
	if len(perGang) != 2 || len(perGang[0]) != 2 || len(perGang[1]) != 2 {
		t.Fatalf("members by replica gang %v, want 2 gangs of 2", perGang)
	}
	out := fetchGangOutputs(t, ctx, jc, j)
	var all bytes.Buffer
	if err := jc.FetchLogs(ctx, j, &all); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		checkRankSum(t, out, r, wantDigest)
		// world=2: each replica gang's network holds its own 2 members.
		if line := fmt.Sprintf("[rank %d] allreduce rank=%d world=2 ", r, r); !strings.Contains(all.String(), line) {
			t.Errorf("the delivered gang's log has no %q:\n%s", line, all.String())
		}
	}
}

// allStarted reports whether every member of gang j has started.
func allStarted(j *ledger.Job) bool {
	if uint64(len(j.Assignments)) < j.Spec.Nodes {
		return false
	}
	for _, a := range j.Assignments {
		if a.StartedAt == 0 {
			return false
		}
	}
	return true
}

// TestGangMemberLost stops one member's agent while the gang runs (its
// container is killed and its provider goes offline, as a machine that
// dies would, only announced): the ledger stops the whole gang, the other
// members' agents kill their containers, the gang is placed again, whole,
// on the three providers left, and it completes with the one-process
// result. (The example keeps no checkpoint, so the second placement
// starts from the beginning.)
func TestGangMemberLost(t *testing.T) {
	g := startGang(t, "p0", "p1", "p2", "p3")
	consumer, err := g.n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(g.n.cl, consumer, g.n.home, "provider-test")
	const elems, seed = 50_000, 11
	wantDigest := ring.Digest(ring.Sum(seed, 3, elems))
	spec, err := jobspec.Parse(fmt.Appendf(nil, `name: allreduce
executor: oci
image: %s
command: [/job, -n, "%d", -seed, "%d", -hold, 4s, -out, /out/sum, -timeout, 2m]
outputs: [/out]
resources: {nodes: 3, cpu: 1, memory: 256MiB}
max_price: 0.5
timeout: 5m
`, g.ref, elems, seed), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	go jc.Follow(ctx, id, 50*time.Millisecond, nil)
	job := func() *ledger.Job {
		j, err := g.n.cl.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	waitForWithin(t, time.Minute, "the gang running", func() bool { j := job(); return j.State == ledger.JobRunning && allStarted(j) })
	first := job()
	// Stop rank 1's agent: its container is killed with it.
	victim := -1
	for _, a := range first.Assignments {
		if a.Rank == 1 {
			for i, ag := range g.agents {
				if ag.Status().Key() == a.Provider {
					victim = i
				}
			}
		}
	}
	if victim < 0 {
		t.Fatalf("no agent holds rank 1 of %+v", first.Assignments)
	}
	time.Sleep(time.Second) // inside the example's hold: mid-run
	t.Logf("stopping %s (rank 1)", g.names[victim])
	t0 := time.Now()
	g.stops[victim]()
	t.Logf("%s stopped in %s", g.names[victim], time.Since(t0).Round(time.Millisecond))
	var j *ledger.Job
	for {
		j = job()
		if j.Done() || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(t0)
	t.Logf("the gang ended %s after the stop: %s, %d placements", took.Round(time.Millisecond), j.State, j.Attempts)
	if took > time.Minute {
		// The example gives up after 2 minutes: the survivors, placed
		// again, went on with their first placement's runs.
		t.Errorf("the gang took %s after the stop; want well under a minute", took.Round(time.Second))
	}
	if j.State != ledger.JobSucceeded {
		t.Fatalf("job %d %s: %s\nagents' log:\n%s", id, j.State, j.Reason, g.logs.String())
	}
	if j.Attempts < 2 {
		t.Errorf("the gang completed in %d placement(s); want it placed again after losing a member", j.Attempts)
	}
	for _, a := range j.Assignments {
		if a.Provider == g.agents[victim].Status().Key() {
			t.Errorf("the stopped provider %s is still a member: %+v", g.names[victim], j.Assignments)
		}
	}
	out := fetchGangOutputs(t, ctx, jc, j)
	for r := range 3 {
		checkRankSum(t, out, r, wantDigest)
	}
	// The members that were not stopped killed their first containers
	// when the ledger stopped the gang.
	if l := g.logs.String(); !strings.Contains(l, `msg="job no longer ours; stopping it"`) {
		t.Errorf("no member's agent stopped its run when the gang was stopped:\n%s", l)
	}
}

// TestGangCheckpointResume: a checkpointing gang (each member counts, its
// chain starting from its rank, and keeps its state under /ckpt) loses
// rank 1's provider after a complete step; the gang is placed again and
// every member resumes from its own rank's checkpoint of that step, so
// each rank's result is the one an uninterrupted run of that rank gives.
func TestGangCheckpointResume(t *testing.T) {
	g := startGangWith(t, "../sandbox/oci/testdata/jobprog", func(p *ledger.Params) { p.CheckpointMinInterval = 1 }, nil, "p0", "p1", "p2", "p3")
	consumer, err := g.n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(g.n.cl, consumer, g.n.home, "provider-test")
	const steps, work = 40, 200
	spec, err := jobspec.Parse(fmt.Appendf(nil, `name: counters
executor: oci
image: %s
command: [/job, count, "%d", "%d", 150ms]
outputs: [/out]
resources: {nodes: 3, cpu: 1, memory: 128MiB}
max_price: 0.5
timeout: 5m
checkpoint: {path: /ckpt, interval: 1s}
`, g.ref, steps, work), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	go jc.Follow(ctx, id, 50*time.Millisecond, nil)
	job := func() *ledger.Job {
		j, err := g.n.cl.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	var first *ledger.Job
	waitForWithin(t, time.Minute, "a complete checkpoint step of the gang", func() bool {
		first = job()
		// Step 2, not 1: under load a member's first checkpoint can be
		// taken before its program wrote any state (a clean-clone CI run:
		// every rank resumed from step 1 and started over, its result
		// right but not resumed); by the next interval it has.
		return first.State == ledger.JobRunning && completeStep(first) >= 2
	})
	victim := -1
	for _, a := range first.Assignments {
		for i, ag := range g.agents {
			if a.Rank == 1 && ag.Status().Key() == a.Provider {
				victim = i
			}
		}
	}
	t.Logf("step %d complete; stopping %s (rank 1)", completeStep(first), g.names[victim])
	g.stops[victim]()
	var j *ledger.Job
	for {
		if j = job(); j.Done() || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if j.State != ledger.JobSucceeded || j.Attempts < 2 || j.ResumeSeq == 0 {
		t.Fatalf("job %d %s (%s) after %d placements, resumed from step %d; want it to succeed placed again from a checkpoint\nagents' log:\n%s", id, j.State, j.Reason, j.Attempts, j.ResumeSeq, g.logs.String())
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := jc.FetchOutputs(ctx, j, out); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if err := jc.FetchLogs(ctx, j, &logs); err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		b, err := os.ReadFile(filepath.Join(out, jobclient.GangRankDir(uint64(r)), "out", "result.txt"))
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if want := rankCounterResult(r, steps, work); string(b) != want {
			t.Errorf("rank %d's result %q, want %q (an uninterrupted run of rank %d)", r, b, want, r)
		}
		if !strings.Contains(logs.String(), fmt.Sprintf("[rank %d] resuming at step", r)) {
			t.Errorf("rank %d did not resume from a checkpoint:\n%s", r, logs.String())
		}
	}
}

// completeStep is the latest checkpoint every current member of gang j
// has committed, or 0.
func completeStep(j *ledger.Job) uint64 {
	var best uint64
	for _, c := range j.Checkpoints {
		all := uint64(len(j.Assignments)) == j.Spec.Nodes
		for _, a := range j.Assignments {
			found := false
			for _, d := range j.Checkpoints {
				if d.Seq == c.Seq && d.Provider == a.Provider {
					found = true
				}
			}
			all = all && found
		}
		if all && c.Seq > best {
			best = c.Seq
		}
	}
	return best
}

// rankCounterResult is what jobprog's count gives a gang member of rank r
// run without interruption: its chain starts from its rank.
func rankCounterResult(r, steps, work int) string {
	h := sha256.Sum256([]byte("rank/" + strconv.Itoa(r)))
	acc := h[:]
	for i := range steps {
		for range work {
			h := sha256.Sum256(fmt.Appendf(acc, "/%d", i))
			acc = h[:]
		}
	}
	return fmt.Sprintf("%d %x\n", steps, acc)
}

// TestGangMemberKilled: one member is a provider in a process of its own
// (`gpunet provider start`, its own container executor), and it is sent
// SIGKILL while the gang runs: no goodbye, its container and network
// left behind. The ledger finds the provider gone (liveness), stops the
// gang and places it again on the three in-process providers, and the
// gang completes with the one-process result.
func TestGangMemberKilled(t *testing.T) {
	g := startGangWith(t, "../../examples/allreduce", nil, []string{"k"}, "p0", "p1", "p2")
	bin := filepath.Join(t.TempDir(), "gpunet")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gpunet")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gpunet: %v\n%s", err, out)
	}
	khome := t.TempDir()
	if err := os.CopyFS(filepath.Join(khome, "keyring"), os.DirFS(filepath.Join(g.n.home, "keyring"))); err != nil {
		t.Fatal(err)
	}
	kKey, err := g.n.kr.Get("k")
	if err != nil {
		t.Fatal(err)
	}
	klog := &syncLog{}
	// The cheapest ask, so that the planner takes it into the gang.
	p := exec.Command(bin, "provider", "start", "--from", "k", "--home", khome, "--node", g.n.api, "--bench-time", "200ms",
		"--region", "eu", "--price", "0.01sync", "--gang-address", "127.0.0.1", "--allow-fetch-network", "127.0.0.0/8", "--executors", "oci")
	p.Stdout, p.Stderr = klog, klog
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Process.Kill()
		p.Wait()
		// The killed provider's container still runs, its rootfs and
		// network namespace pinned under its home: an executor started
		// on the same directory removes them, as the provider's would
		// when started again.
		ex, err := oci.New(context.Background(), oci.Options{Dir: filepath.Join(khome, "provider", "oci")})
		if err != nil {
			t.Errorf("remove the killed provider's container: %v", err)
			return
		}
		ex.Close()
	})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	waitForWithin(t, 2*time.Minute, "the provider process online", func() bool {
		pb, err := g.n.cl.Provider(ctx, kKey.Address)
		return err == nil && pb.Record != nil && pb.Record.Online
	})
	// p2 waits offline, so that the first placement must take the
	// provider process; it comes back for the second.
	g.stops[2]()
	consumer, err := g.n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(g.n.cl, consumer, g.n.home, "provider-test")
	const elems, seed = 50_000, 13
	wantDigest := ring.Digest(ring.Sum(seed, 3, elems))
	spec, err := jobspec.Parse(fmt.Appendf(nil, `name: allreduce
executor: oci
image: %s
command: [/job, -n, "%d", -seed, "%d", -hold, 3s, -out, /out/sum, -timeout, 2m]
outputs: [/out]
resources: {nodes: 3, cpu: 1, memory: 256MiB}
max_price: 0.5
timeout: 5m
`, g.ref, elems, seed), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id, err := jc.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	go jc.Follow(ctx, id, 50*time.Millisecond, nil)
	job := func() *ledger.Job {
		j, err := g.n.cl.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	var first *ledger.Job
	waitForWithin(t, 2*time.Minute, "the gang running", func() bool {
		first = job()
		return first.State == ledger.JobRunning && allStarted(first)
	})
	if assignmentRank(first, kKey.Address) < 0 {
		t.Fatalf("the provider process is not a member of the gang: %+v\nits log:\n%s", first.Assignments, klog.String())
	}
	a2, _ := runAgentWith(t, g.n, "p2", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000, func(o *provider.Options) {
		o.Sandboxes = map[string]sandbox.Executor{oci.Name: g.ex}
		o.GangHost = netip.MustParseAddr("127.0.0.1")
		o.Logger = slog.New(slog.NewTextHandler(g.logs, nil))
	})
	waitFor(t, "p2 ready again", func() bool { return ready(a2) })
	t.Logf("SIGKILL to the provider process (rank %d)", assignmentRank(first, kKey.Address))
	t0 := time.Now()
	p.Process.Kill()
	var j *ledger.Job
	for {
		if j = job(); j.Done() || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(t0)
	t.Logf("the gang ended %s after the kill: %s, %d placements; %d run(s) of the first placement stopped when placed here again, %d when the job left", took.Round(time.Millisecond), j.State, j.Attempts,
		strings.Count(g.logs.String(), "gang placed here again"), strings.Count(g.logs.String(), "job no longer ours"))
	if took > time.Minute {
		// The example gives up after 2 minutes: the survivors, placed
		// again, went on with their first placement's runs.
		t.Errorf("the gang took %s after the kill; want well under a minute", took.Round(time.Second))
	}
	if j.State != ledger.JobSucceeded || j.Attempts < 2 || assignmentRank(j, kKey.Address) >= 0 {
		t.Fatalf("job %d %s (%s) after %d placements, members %+v; want it placed again without the killed provider and done\nagents' log:\n%s", id, j.State, j.Reason, j.Attempts, j.Assignments, g.logs.String())
	}
	out := fetchGangOutputs(t, ctx, jc, j)
	for r := range 3 {
		checkRankSum(t, out, r, wantDigest)
	}
}

// fetchGangOutputs fetches gang j's outputs (each rank's under
// rank-N/) into a new directory.
func fetchGangOutputs(t *testing.T, ctx context.Context, jc *jobclient.Client, j *ledger.Job) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if err := jc.FetchOutputs(ctx, j, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkRankSum checks that rank r's all-reduced vector in the outputs at
// out (out/sum, little-endian int64s) has the digest want.
func checkRankSum(t *testing.T, out string, r int, want string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, jobclient.GangRankDir(uint64(r)), "out", "sum"))
	if err != nil {
		t.Fatalf("rank %d's outputs: %v", r, err)
	}
	got := make([]int64, len(b)/8)
	for i := range got {
		got[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	if d := ring.Digest(got); d != want {
		t.Errorf("rank %d's result: sha256 %s; the one-process sum's %s", r, d, want)
	}
}

// assignmentRank is the rank of provider a in gang j, or -1.
func assignmentRank(j *ledger.Job, a address.Address) int {
	for _, x := range j.Assignments {
		if x.Provider == a {
			return int(x.Rank)
		}
	}
	return -1
}
