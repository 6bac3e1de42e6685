package provider_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
)

// buildFsum builds internal/compare/testdata/fsum (a float summation in an
// order its first argument seeds) for wasip1 into dir.
func buildFsum(t *testing.T, dir string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go toolchain to build the wasip1 guest: %v", err)
	}
	module := filepath.Join(dir, "fsum.wasm")
	build := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s", "-o", module, "../compare/testdata/fsum")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fsum: %v\n%s", err, out)
	}
	return module
}

// TestFloatJobJudged runs a real float job (fsum: sums added in an order of
// each replica's own, as different GPUs or thread counts would) with
// `compare` on three provider agents and a real chain. Each agent runs it
// with its own seed (Faults.JobArgs), so honest replicas' outputs differ
// in the low bits: they open a judging round, judge each other the same,
// and the job is validated with nobody slashed. A replica that skips half
// the terms, or adds in float32, is judged different by the others: the
// job escalates to the third provider, whose judgment joins the honest
// one's, and the cheater is outvoted and slashed. So is one that reveals
// an output blob nobody serves ("hide"): the judges count outputs they
// cannot get as different, rather than fall silent and be slashed.
func TestFloatJobJudged(t *testing.T) {
	for _, cheat := range []string{"", "-half", "-f32", "hide"} {
		name := "honest"
		if cheat != "" {
			name = "cheater " + cheat
		}
		t.Run(name, func(t *testing.T) { floatJobJudged(t, cheat, "numeric: {rtol: 1e-5, atol: 1e-8}") })
	}
}

// buildFsumJudge builds examples/judges/fsumjudge (fsum's outputs the same
// within rtol 1e-5, atol 1e-8) for wasip1 into dir.
func buildFsumJudge(t *testing.T, dir string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go toolchain to build the wasip1 judge: %v", err)
	}
	build := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s", "-o", filepath.Join(dir, "fsumjudge.wasm"), "../../examples/judges/fsumjudge")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fsumjudge: %v\n%s", err, out)
	}
}

// TestFloatJobJudgedByProgram is TestFloatJobJudged with the owner's judge
// program (compare: {program: fsumjudge.wasm}) in place of the numeric
// comparator: each provider runs it over every pair of outputs in the
// read-only wasm sandbox. Honest replicas are judged the same and nobody
// is slashed; the replica that skips half the terms, or adds in float32,
// is judged different, outvoted and slashed.
func TestFloatJobJudgedByProgram(t *testing.T) {
	for _, cheat := range []string{"", "-half", "-f32"} {
		name := "honest"
		if cheat != "" {
			name = "cheater " + cheat
		}
		t.Run(name, func(t *testing.T) { floatJobJudged(t, cheat, "program: ./fsumjudge.wasm") })
	}
}

// TestFloatJobJudgeOutOfFuel: the owner's judge program gets too little
// fuel to decide (fsumjudge with 100,000, less than the Go runtime takes
// to start). Every judge runs out at the same count, so every judge
// reveals the same vector (every pair different): no judge is outvoted,
// no replica slashed as a wrong result, and the job ends without a
// majority. Were running out of fuel read as a verdict on one pair and
// not another, or were it a wall-clock timeout, honest replicas could be
// left out of a class and slashed.
func TestFloatJobJudgeOutOfFuel(t *testing.T) {
	floatJobJudged(t, "", "program: ./fsumjudge.wasm\n  fuel: 100000")
}

func floatJobJudged(t *testing.T, cheat, rule string) {
	n := startNetwork(t, "consumer", "p", "q", "r")
	// Each provider adds in an order of its own (its seed); p, the
	// cheapest and so placed first, cheats when asked to.
	agents := map[string]*provider.Agent{}
	// The agents' logs, shown when the test fails: what each judged.
	logs := &lockedLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the agents' logs:\n%s", logs.String())
		}
	})
	for i, name := range []string{"p", "q", "r"} {
		seed := strconv.Itoa(101 + i)
		var flags []string
		if name == "p" && cheat != "" && cheat != "hide" {
			flags = []string{cheat}
		}
		faults := &provider.Faults{JobArgs: func(_ uint64, args []string) []string {
			return append(append(append([]string{}, flags...), seed), args[1:]...)
		}, HideOutputs: name == "p" && cheat == "hide"}
		agents[name], _ = runAgentWith(t, n, name, nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", uint64(36_000*(i+1)), func(o *provider.Options) {
			o.Faults = faults
			o.Logger = slog.New(slog.NewTextHandler(logs, nil)).With("agent", name)
		})
	}
	waitFor(t, "providers ready", func() bool { return ready(agents["p"]) && ready(agents["q"]) && ready(agents["r"]) })
	dir := t.TempDir()
	buildFsum(t, dir)
	if strings.HasPrefix(rule, "program:") {
		buildFsumJudge(t, dir)
	}
	yaml := `name: fsum
executor: wasm
module: ./fsum.wasm
args: ["1", "20000"]
outputs: [/out]
max_price: 0.5
timeout: 2m
verification: full
compare:
  ` + rule + `
`
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := jobspec.Load(filepath.Join(dir, "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	var waits []string
	j, err := jc.Follow(ctx, id, 20*time.Millisecond, func(j *ledger.Job) {
		if j.Wait != nil {
			waits = append(waits, j.Wait.Code)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rule, "fuel:") {
		judgeOutOfFuel(t, n, j, waits, logs)
		return
	}
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated {
		t.Fatalf("float job %s %s (%+v); waits %v", j.State, j.Verdict, j.Wait, waits)
	}
	if j.JudgeRound == 0 {
		t.Fatalf("no judging round: the replicas' outputs did not differ (waits %v)", waits)
	}
	// The replicas' outputs differ byte for byte: judged by hash, one
	// honest replica would have been outvoted.
	seen := map[ledger.Hash]bool{}
	for _, a := range j.Assignments {
		if a.Result != nil {
			seen[a.Result.ManifestHash] = true
		}
	}
	if len(seen) < 2 {
		t.Fatalf("the replicas revealed %d distinct manifests; want differing outputs", len(seen))
	}
	slashed := map[string]uint64{}
	for _, name := range []string{"p", "q", "r"} {
		k, _ := n.kr.Get(name)
		pb, err := n.cl.Provider(t.Context(), k.Address)
		if err != nil {
			t.Fatal(err)
		}
		slashed[name] = pb.Record.Slashed
	}
	pk, _ := n.kr.Get("p")
	if cheat == "" {
		if len(j.Assignments) != 2 || j.JudgeRound != 1 {
			t.Errorf("honest replicas: %d assignments, %d rounds; want 2 and 1", len(j.Assignments), j.JudgeRound)
		}
		for name, s := range slashed {
			if s != 0 {
				t.Errorf("honest provider %s slashed %d", name, s)
			}
		}
	} else {
		if slashed["p"] == 0 || slashed["q"] != 0 || slashed["r"] != 0 {
			t.Errorf("slashed %v: want the cheater p slashed and nobody else", slashed)
		}
		for _, a := range j.Assignments {
			if a.Provider == pk.Address && (a.Outcome != ledger.OutcomeMinority || a.Paid != 0) {
				t.Errorf("cheater's outcome %s paid %d: want outvoted, unpaid", a.Outcome, a.Paid)
			}
		}
		if *j.Delivered == pk.Address {
			t.Error("the cheater's outputs were delivered")
		}
	}
	// The owner opens the delivered outputs (sealed to it as well as to
	// the job key).
	out := t.TempDir()
	if err := jc.FetchOutputs(ctx, j, out); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "out", "sums.f64")); err != nil || len(b) != 16*8 || bytes.Equal(b, make([]byte, 16*8)) {
		t.Errorf("delivered sums.f64: %d bytes, err %v", len(b), err)
	}
}

// judgeOutOfFuel checks a job whose judge program ran out of fuel: judged,
// every revealed vector 0, no majority, nobody slashed.
func judgeOutOfFuel(t *testing.T, n *network, j *ledger.Job, waits []string, logs *lockedLog) {
	t.Helper()
	if !strings.Contains(logs.String(), "the job's judge program ran out of fuel") {
		t.Error("no agent says its judge program ran out of fuel")
	}
	if j.JudgeRound == 0 || j.Verdict != ledger.VerdictNoMajority {
		t.Fatalf("judge out of fuel: %s %s after %d rounds (%+v); want no majority after a judging round; waits %v", j.State, j.Verdict, j.JudgeRound, j.Wait, waits)
	}
	for i, a := range j.Assignments {
		if a.Judgment != nil && *a.Judgment != 0 {
			t.Errorf("replica %d revealed vector %#x; want 0 (every pair different)", i, *a.Judgment)
		}
		if a.Outcome == ledger.OutcomeJudgeOutvoted || a.Outcome == ledger.OutcomeMinority {
			t.Errorf("replica %d: outcome %s", i, a.Outcome)
		}
	}
	for _, name := range []string{"p", "q", "r"} {
		k, _ := n.kr.Get(name)
		pb, err := n.cl.Provider(t.Context(), k.Address)
		if err != nil {
			t.Fatal(err)
		}
		if pb.Record.Slashed != 0 {
			t.Errorf("provider %s slashed %d", name, pb.Record.Slashed)
		}
	}
}

// lockedLog is a buffer that several agents log to.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
