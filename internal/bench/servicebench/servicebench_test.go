package servicebench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/bintest"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// TestServiceBench runs the benchmark once, small (one run of each path),
// on the gpunet binary of this tree: the first answer crosses both nodes,
// every step of its path is seen in the logs (the agent opened its relay
// session at its start), a killed single replica is reported by both
// validators, ended as unreachable, replaced and answers again, and with
// two replicas a killed one costs no failed request (the
// node routes around it). Minutes of processes and containers: skipped
// with -short.
func TestServiceBench(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two nodes, two providers and containers")
	}
	_, err := oci.Probe(t.Context(), oci.Options{Dir: t.TempDir()})
	ocitest.RequireRunc(t, nil, err)
	bin, err := bintest.Build(t.Context(), "github.com/gpunet/gpunet/cmd/gpunet")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := devnet.FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(t.Context(), Options{Bin: bin, Repo: repo, Dir: t.TempDir(), Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	res.WriteText(&text)
	t.Logf("\n%s", text.String())
	if !res.RelayBeforeDeploy {
		t.Errorf("the providers' relay sessions were not open before the first deploy")
	}
	for _, p := range []struct {
		name string
		runs []Path
	}{{"deploy", res.Runs.Deploy}, {"failover", res.Runs.Failover}} {
		if len(p.runs) != 1 || p.runs[0].TotalMs <= 0 {
			t.Fatalf("%s: %+v, want one run", p.name, p.runs)
		}
		for _, st := range p.runs[0].Steps {
			if st.Ms < 0 {
				t.Errorf("%s: step %q not seen", p.name, st.Name)
			}
		}
	}
	// Both nodes are validators: they report the killed provider's
	// replica, and the ledger ends it before its heartbeat timeout.
	if f := res.Runs.Failover[0]; f.EndedAs != ledger.EndUnreachable {
		t.Errorf("failover: the killed replica ended as %q, want %q (reported by the validators)", f.EndedAs, ledger.EndUnreachable)
	}
	if ra := res.Runs.RouteAround; len(ra) != 1 || ra[0].Failed != 0 {
		t.Errorf("route-around: %+v, want one run and no failed request", ra)
	}
}

// TestSummarize: the median of each step over the runs, steps not seen
// left out of it.
func TestSummarize(t *testing.T) {
	runs := []Path{
		{TotalMs: 300, Steps: []Step{{"a", 100}, {"b", -1}}},
		{TotalMs: 100, Steps: []Step{{"a", 50}, {"b", 20}}},
		{TotalMs: 200, Steps: []Step{{"a", 70}, {"b", 40}}},
	}
	s := summarize(runs)
	if s.P50Ms != 200 || s.MinMs != 100 || s.MaxMs != 300 || s.Runs != 3 {
		t.Errorf("summary %+v, want p50 200, min 100, max 300 of 3", s)
	}
	if want := []Step{{"a", 70}, {"b", 30}}; len(s.StepsP50) != 2 || s.StepsP50[0] != want[0] || s.StepsP50[1] != want[1] {
		t.Errorf("steps %+v, want %+v", s.StepsP50, want)
	}
	r := &Result{Deploy: s, Runs: struct {
		Deploy      []Path `json:"deploy"`
		Failover    []Path `json:"failover"`
		RouteAround []Path `json:"route_around"`
	}{Deploy: runs}}
	var b bytes.Buffer
	r.WriteText(&b)
	if !strings.Contains(b.String(), "p50 200ms") || !strings.Contains(b.String(), "b  ") {
		t.Errorf("text:\n%s", b.String())
	}
}
