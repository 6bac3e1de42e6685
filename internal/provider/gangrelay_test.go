package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/allreduce/ring"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// TestGangOverRelay: three members whose providers post no endpoint (no
// --gang-address: as behind NAT no one can reach) reach each other only
// through the node's relay, over the gang route of their agents' relay
// sessions (the node checks each stream against the gang's placement).
// The ring all-reduce still gives the one-process result in every rank's
// outputs. Without the route, no member could reach another.
func TestGangOverRelay(t *testing.T) {
	dir := t.TempDir()
	ex, err := oci.New(t.Context(), oci.Options{Dir: filepath.Join(dir, "oci")})
	ocitest.RequireRunc(t, nil, err)
	t.Cleanup(func() { ex.Close() })
	requireGangHost(t, ex)
	prog := ocitest.BuildGo(t, "../../examples/allreduce")
	reg := ocitest.Registry(t, nil)
	ref := ocitest.Push(t, reg, "test/allreduce", ocitest.ProgramImage(t, prog))
	names := []string{"p0", "p1", "p2"}
	n := startNetworkWith(t, nil, append([]string{"consumer"}, names...)...)
	logs := &syncLog{}
	var agents []*provider.Agent
	for _, name := range names {
		k, err := n.kr.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := runAgentWith(t, n, name, nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000, func(o *provider.Options) {
			o.Sandboxes = map[string]sandbox.Executor{oci.Name: ex}
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			o.Relay = provider.RelayLinkFor(n.cl, []string{"http://" + n.api}, k.PrivateKey(), o.Logger.With("provider", name))
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
	const elems, seed = 100_000, 5
	spec, err := jobspec.Parse(fmt.Appendf(nil, `name: allreduce-relayed
executor: oci
image: %s
command: [/job, -n, "%d", -seed, "%d", -out, /out/sum, -timeout, 2m]
outputs: [/out]
resources: {nodes: 3, cpu: 1, memory: 256MiB, shm: 96MiB}
max_price: 0.5
timeout: 5m
verification: none
`, ref, elems, seed), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	go jc.Follow(ctx, id, 50*time.Millisecond, nil) // grants the members the job key
	var j *ledger.Job
	for {
		if j, err = n.cl.Job(ctx, id); err != nil {
			t.Fatal(err)
		}
		if j.Done() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job %d is %s after 3 minutes\nagents' log:\n%s", id, j.State, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if j.State != ledger.JobSucceeded {
		var jl bytes.Buffer
		jc.FetchLogs(ctx, j, &jl)
		t.Fatalf("job %d %s: %s\njob's log:\n%s\nagents' log:\n%s", id, j.State, j.Reason, jl.String(), relayLines(logs.String()))
	}
	for _, as := range j.Assignments {
		if as.GangEndpoint != "" {
			t.Errorf("rank %d posted endpoint %q; this test's members post none", as.Rank, as.GangEndpoint)
		}
	}
	if testing.Verbose() {
		t.Logf("agents' log on gangs and the relay:\n%s", relayLines(logs.String()))
	}
	out := fetchGangOutputs(t, ctx, jc, j)
	want := ring.Digest(ring.Sum(seed, len(names), elems))
	for r := range names {
		checkRankSum(t, out, r, want)
	}
}

// relayLines are the lines of an agents' log about gangs and the relay.
func relayLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "relay") || strings.Contains(l, "gang") || strings.Contains(l, "wireguard") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
