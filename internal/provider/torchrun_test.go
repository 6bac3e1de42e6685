package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/torchrun"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// torchResult is examples/torchrun/train.py's result.json.
type torchResult struct {
	Rank, World, Elems int
	SumSHA256          string `json:"sum_sha256"`
	Loss, Params       []float64
}

// TestGangTorchrun runs the PyTorch example (examples/torchrun) as a gang
// of two on two provider agents with the real container executor: each
// member runs Debian's torchrun with the variables gpunet sets, and
// train.py all-reduces an int64 vector and trains a small model with
// DistributedDataParallel, gloo on CPU over the gang's private network
// (each member's namespace holds lo and gpunet0 only). The image is built
// here from Debian's installed python3-torch (examples/internal/debimage).
// Both ranks' sums equal, byte for byte, the one-process run's (the same
// image as a single job, train.py --local 2); their trained parameters
// are the same on both ranks and equal the one-process run's up to the
// float64 rounding of adding the gradient in another order.
func TestGangTorchrun(t *testing.T) {
	if err := torchrun.Supported(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir := t.TempDir()
	ex, err := oci.New(t.Context(), oci.Options{Dir: filepath.Join(dir, "oci")})
	ocitest.RequireRunc(t, nil, err)
	t.Cleanup(func() { ex.Close() })
	requireGangHost(t, ex)

	t0 := time.Now()
	img, root, err := torchrun.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	reg := ocitest.Registry(t, nil)
	ref := ocitest.Push(t, reg, torchrun.Repo, img)
	size := int64(0)
	if m, err := img.Manifest(); err == nil {
		for _, l := range m.Layers {
			size += l.Size
		}
	}
	t.Logf("image: %d files and links, %d MB (%d MB compressed) from %d Debian packages, built and pushed in %s",
		len(root.Paths()), root.Bytes>>20, size>>20, len(root.Manifest), time.Since(t0).Round(time.Millisecond))

	names := []string{"p0", "p1"}
	n := startNetworkWith(t, nil, append([]string{"consumer"}, names...)...)
	logs := &syncLog{}
	var agents []*provider.Agent
	for _, name := range names {
		a, _ := runAgentWith(t, n, name, nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000, func(o *provider.Options) {
			o.Sandboxes = map[string]sandbox.Executor{oci.Name: ex}
			o.GangHost = netip.MustParseAddr("127.0.0.1")
			o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		})
		agents = append(agents, a)
	}
	for _, a := range agents {
		waitFor(t, "providers ready", func() bool { return ready(a) })
	}
	consumer, err := n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(n.cl, consumer, n.home, "provider-test")

	const elems, steps, seed = 100_000, 20, 3
	run := func(label string, o torchrun.SpecOptions) (out, log string) {
		t.Helper()
		o.Elems, o.Steps, o.Seed = elems, steps, seed
		text, err := torchrun.Spec(ref, o)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := jobspec.Parse([]byte(text), t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v\n%s", label, err, text)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
		defer cancel()
		t0 := time.Now()
		id, err := jc.Submit(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		go jc.Follow(ctx, id, 50*time.Millisecond, nil) // grants the members the job key
		var started time.Duration
		var j *ledger.Job
		for {
			if j, err = n.cl.Job(ctx, id); err != nil {
				t.Fatalf("%s: %v\nagents' log:\n%s", label, err, logs.String())
			}
			if started == 0 && (j.State == ledger.JobRunning || j.Done()) && allStarted(j) {
				started = time.Since(t0)
			}
			if j.Done() {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		var all bytes.Buffer
		if err := jc.FetchLogs(ctx, j, &all); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: submit → all %d member(s) started %s; done after %s", label, max(o.Nodes, 1), started.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
		if j.State != ledger.JobSucceeded {
			t.Fatalf("%s: job %d %s: %s\nthe job's log:\n%s\nagents' log:\n%s", label, id, j.State, j.Reason, all.String(), logs.String())
		}
		out = filepath.Join(t.TempDir(), "out")
		if err := jc.FetchOutputs(ctx, j, out); err != nil {
			t.Fatal(err)
		}
		return out, all.String()
	}
	read := func(label, path string) torchResult {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		var r torchResult
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v\n%s", label, err, b)
		}
		return r
	}

	gangOut, gangLog := run("gang of 2 (torchrun), image pulled", torchrun.SpecOptions{Nodes: 2})
	localOut, _ := run("one process (--local 2), image cached", torchrun.SpecOptions{Nodes: 1, Local: 2})
	want := read("the one-process run", filepath.Join(localOut, "out", "result.json"))
	if want.World != 2 || want.Elems != elems || len(want.Params) == 0 || len(want.Loss) != steps {
		t.Fatalf("the one-process run's result: %+v", want)
	}
	var ranks []torchResult
	for r := range 2 {
		got := read("rank "+string(rune('0'+r)), filepath.Join(gangOut, jobclient.GangRankDir(uint64(r)), "out", "result.json"))
		ranks = append(ranks, got)
		if got.Rank != r || got.World != 2 {
			t.Errorf("rank %d's result says rank %d of %d", r, got.Rank, got.World)
		}
		if got.SumSHA256 != want.SumSHA256 {
			t.Errorf("rank %d's all-reduced sum: sha256 %s; the one-process sum's %s", r, got.SumSHA256, want.SumSHA256)
		}
		if d := maxDiff(got.Params, want.Params); d > 1e-12 {
			t.Errorf("rank %d's trained parameters differ from the one-process run's by up to %g", r, d)
		}
		if d := maxDiff(got.Loss, want.Loss); d > 1e-12 {
			t.Errorf("rank %d's losses differ from the one-process run's by up to %g", r, d)
		}
		line := "[rank " + string(rune('0'+r)) + "] torchrun-example rank=" + string(rune('0'+r)) + " world=2 sum_sha256=" + want.SumSHA256
		if !strings.Contains(gangLog, line) {
			t.Errorf("the gang's log has no %q:\n%s", line, gangLog)
		}
	}
	if d := maxDiff(ranks[0].Params, ranks[1].Params); d != 0 {
		t.Errorf("the ranks' parameters differ by up to %g: DistributedDataParallel keeps them the same", d)
	}
	t.Logf("loss %.6f → %.6f over %d steps; parameters within %g of the one-process run's",
		want.Loss[0], want.Loss[steps-1], steps, maxDiff(ranks[0].Params, want.Params))
}

// maxDiff is the largest |a[i] - b[i]|, or +Inf when the lengths differ.
func maxDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}
