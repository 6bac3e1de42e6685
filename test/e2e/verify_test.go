package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/lmimage"
	"github.com/gpunet/gpunet/internal/bintest"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/receipt"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// Issue 29 across processes: the judging of float jobs and the disputes
// of services, each on a devnet whose providers are `gpunet provider
// start` processes of their own.

// fsumN is how many terms fsum (internal/compare/testdata/fsum) adds per
// row: the in-process test's size.
const fsumN = 20000

// fsumWant is what fsum computes in float64 in its natural order: row j
// is the sum of 1/(k²+j) for k = 1…N.
func fsumWant(n int) []float64 {
	sums := make([]float64, 16)
	for j := range sums {
		for k := 1; k <= n; k++ {
			kk := float64(k)
			sums[j] += 1 / (kk*kk + float64(j))
		}
	}
	return sums
}

// TestFloatJobJudgedAcrossProcesses (issue 29): a float job (fsum, which
// adds its terms in an order its first argument seeds) with compare:
// {numeric} at verification: full, on three provider processes. Each
// runs it with a seed of its own (--fault-job-args: the wasm sandbox is
// deterministic, so this is how the low bits of different GPUs are
// stood for), and the cheapest, p, adds in float32 (fsum -f32, its
// cheating variant). p and q are placed first; their outputs are judged
// different, the job escalates to r, whose output differs from q's byte
// for byte but is judged the same: the job succeeds with q's or r's sums,
// p is outvoted and slashed, q and r are not.
func TestFloatJobJudgedAcrossProcesses(t *testing.T) {
	parallel(t, weightHeavy)
	start := time.Now()
	home := t.TempDir()
	startDevnet(t, home, "--block-time", "100ms")
	// The cheater asks least, so that it is among the first two placed.
	provs := []struct{ name, price, args string }{
		{"p", "0.036sync", "-f32"},
		{"q", "0.072sync", ""},
		{"r", "0.108sync", ""},
	}
	names := map[string]string{} // address → name
	for i, pv := range provs {
		args := []string{"--price", pv.price}
		if pv.args != "" {
			args = append(args, "--fault-job-args="+pv.args)
		}
		args = append(args, "--fault-job-args", fmt.Sprint(101+i), "--fault-job-args", fmt.Sprint(fsumN))
		_, addr := startProvider(t, home, pv.name, "alice", args...)
		names[addr] = pv.name
	}
	waitOfferCount(t, 60*time.Second, home, "", "executor=wasm", 3)

	dir := t.TempDir()
	bin, err := bintest.Build(t.Context(), "../../internal/compare/testdata/fsum", "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if err != nil {
		t.Fatalf("build fsum: %v", err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fsum.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`name: fsum
executor: wasm
module: ./fsum.wasm
args: ["1", "%d"]
outputs: [/out]
max_price: 0.5
timeout: 2m
verification: full
compare:
  numeric: {rtol: 1e-5, atol: 1e-8}
`, fsumN)
	specPath := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	var sub struct {
		ID uint64 `json:"id"`
	}
	gpunetJSON(t, &sub, "job", "submit", specPath, "--from", "alice", "--home", home)
	id := fmt.Sprint(sub.ID)
	var j ledger.Job
	waitUntil(t, 180*time.Second, "the float job done", func() bool {
		j = ownerJob(t, home, "alice", id)
		return j.Done()
	})
	gpunetJSON(t, &j, "job", "status", id, "--from", "alice", "--home", home)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated {
		t.Fatalf("float job %s: %s %s (%s), want succeeded and validated; assignments %+v", id, j.State, j.Verdict, j.Reason, j.Assignments)
	}
	if j.JudgeRound == 0 {
		t.Fatalf("no judging round: the replicas' outputs did not differ")
	}
	manifests := map[string]ledger.Hash{} // name → its revealed manifest
	for _, a := range j.Assignments {
		name := names[a.Provider.String()]
		if a.Result != nil {
			manifests[name] = a.Result.ManifestHash
		}
		if name == "p" && (a.Outcome != ledger.OutcomeMinority || a.Paid != 0) {
			t.Errorf("the cheater's outcome %s, paid %d: want outvoted, unpaid", a.Outcome, a.Paid)
		}
	}
	if len(manifests) != 3 || manifests["q"] == manifests["r"] {
		t.Fatalf("revealed manifests %v: want three, q's and r's different byte for byte (judged the same within tolerance, not by hash)", manifests)
	}
	if j.Delivered == nil || names[j.Delivered.String()] == "p" {
		t.Errorf("delivered the outputs of %v, want an honest provider's", j.Delivered)
	}
	for _, pv := range provs {
		rec := provider(t, home, pv.name).Record
		switch {
		case pv.name == "p" && (rec.Slashed == 0 || !slices.ContainsFunc(rec.SlashEvents, func(e ledger.SlashEvent) bool { return e.Job == sub.ID })):
			t.Errorf("the cheater p: slashed %d, events %+v; want slashed for job %s", rec.Slashed, rec.SlashEvents, id)
		case pv.name != "p" && rec.Slashed != 0:
			t.Errorf("honest provider %s slashed %d: %+v", pv.name, rec.Slashed, rec.SlashEvents)
		}
	}

	// The owner gets the honest sums: float64 sums within 1e-12 of the
	// natural order's (float32 ones are off by ~1e-7).
	out := t.TempDir()
	if r := gpunet(t, "job", "get", id, "--from", "alice", "--home", home, "--out", out); r.code != 0 {
		t.Fatalf("%s", r)
	}
	raw, err := os.ReadFile(filepath.Join(out, "out", "sums.f64"))
	if err != nil || len(raw) != 16*8 {
		t.Fatalf("delivered sums.f64: %d bytes, %v", len(raw), err)
	}
	for i, want := range fsumWant(fsumN) {
		got := math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
		if math.Abs(got-want) > 1e-12*math.Abs(want) {
			t.Errorf("delivered row %d: %.17g, the float64 sum is %.17g", i, got, want)
		}
	}
	t.Logf("float job %s judged in %d round(s): %s (devnet start to checks)", id, j.JudgeRound, time.Since(start).Round(100*time.Millisecond))
}

// TestFaultyServiceDisputedAcrossProcesses (issue 29): the int8 model
// service of the devnet's registry (examples/tinylm -model tinylm-int8,
// openai.exact: true) with three replicas on three provider processes,
// one started with --fault-wrong-answers 0.5. Seeded chat completions go
// through the devnet node's OpenAI endpoint, which checks a quarter of
// them (the devnet's service_check_rate_ppm) against another replica,
// until a check catches a wrong answer and the node's dispute slashes the
// faulty provider. No honest provider is slashed; the service keeps
// answering.
func TestFaultyServiceDisputedAcrossProcesses(t *testing.T) {
	parallel(t, weightHeavy)
	_, err := oci.Probe(t.Context(), oci.Options{Dir: t.TempDir()})
	ocitest.RequireRunc(t, nil, err) // skips, or fails under CI=true
	if err := lmimage.Supported(); err != nil {
		t.Fatalf("the example image cannot be built here: %v", err)
	}
	start := time.Now()
	home := t.TempDir()
	// Its own free port for the registry: other tests may hold the default.
	_, info := startDevnet(t, home, "--block-time", "200ms", "--example=false", "--registry=127.0.0.1:0")
	api := strings.TrimSuffix(info.API, "/")
	if !strings.HasPrefix(api, "http") {
		api = "http://" + api
	}
	names := map[string]string{} // address → name
	addrs := map[string]string{} // name → address
	faulty := "frank"
	for _, name := range []string{"carol", "dave", faulty} {
		args := []string{"--allow-fetch-network", "127.0.0.1"}
		if name == faulty {
			args = append(args, "--fault-wrong-answers", "0.5")
		}
		addr := startOwnProvider(t, home, api, name, args...)
		names[addr], addrs[name] = name, addr
	}
	waitOfferCount(t, 90*time.Second, home, "", "executor=oci", 3)

	var d deployed
	gpunetJSON(t, &d, "service", "deploy", filepath.Join(home, "examples", "service", lmimage.Int8Model+".yaml"),
		"--replicas", "3", "--from", "alice", "--home", home)
	cl := nodeAPI(t, home, "")
	waitUntil(t, 180*time.Second, "three replicas ready, one on each provider", func() bool {
		ctx, cancel := pollCtx(t)
		defer cancel()
		s, err := cl.Service(ctx, d.ID)
		if err != nil || len(s.Replicas) != 3 {
			return false
		}
		for _, r := range s.Replicas {
			if !r.Ready || r.ReadyAt == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("devnet start → three replicas ready: %s", time.Since(start).Round(100*time.Millisecond))
	s := gpunetService(t, home, d.ID)
	if !s.Spec.OpenAI.Exact {
		t.Fatalf("the example's int8 service is not declared exact: %+v", s.Spec.OpenAI)
	}

	complete := func(i int) (int, string) {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"the cat sat %d"}],"seed":%d,"max_tokens":8}`, lmimage.Int8Model, i, i)
		req, err := http.NewRequestWithContext(t.Context(), "POST", d.Addresses.OpenAI+"/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+d.AccessKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode == http.StatusOK {
			r, err := receipt.Decode(resp.Header.Get(receipt.Header))
			if err != nil || r.Verify(info.ChainID) != nil {
				t.Fatalf("request %d: the answer's receipt %q does not verify: %v", i, resp.Header.Get(receipt.Header), err)
			}
		}
		return resp.StatusCode, names[resp.Header.Get("X-Gpunet-Provider")]
	}
	ctx, cancel := pollCtx(t)
	params, err := cl.Params(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if params.ServiceCheckRatePPM != devnet.DevServiceCheckRatePPM {
		t.Fatalf("the devnet checks %d ppm of the requests, want %d", params.ServiceCheckRatePPM, devnet.DevServiceCheckRatePPM)
	}
	stakeBefore := provider(t, home, addrs[faulty]).Record.Stake
	slashEvents := func(name string) []ledger.SlashEvent { return provider(t, home, addrs[name]).Record.SlashEvents }
	sent, byFaulty := 0, 0
	begin := time.Now()
	waitUntil(t, 120*time.Second, "the faulty provider slashed by a dispute", func() bool {
		if sent < 300 {
			sent++
			if code, by := complete(sent); code != http.StatusOK {
				t.Logf("request %d: status %d", sent, code)
			} else if by == faulty {
				byFaulty++
			}
		}
		return slices.ContainsFunc(slashEvents(faulty), func(e ledger.SlashEvent) bool {
			return e.Code == ledger.SlashServiceOutvoted && e.Service == d.ID
		})
	})
	t.Logf("the faulty provider slashed after %d requests (%d answered by it), %s after the first", sent, byFaulty, time.Since(begin).Round(100*time.Millisecond))
	// The first dispute takes slash_bps of the whole stake (a second, for
	// another wrong answer signed before the replica ended, may follow).
	if evs := slashEvents(faulty); evs[0].Amount != stakeBefore*params.SlashBps/10_000 {
		t.Errorf("the faulty provider's first slash %+v of its stake %d, want slash_bps (%d) of it", evs[0], stakeBefore, params.SlashBps)
	}
	for _, name := range []string{"carol", "dave"} {
		if rec := provider(t, home, addrs[name]).Record; rec.Slashed != 0 || len(rec.SlashEvents) != 0 {
			t.Errorf("honest provider %s slashed %d: %+v", name, rec.Slashed, rec.SlashEvents)
		}
	}
	// The faulty replica ends, disputed; the service answers on.
	waitUntil(t, 60*time.Second, "the faulty replica ended as disputed", func() bool {
		ctx, cancel := pollCtx(t)
		defer cancel()
		s, err := cl.Service(ctx, d.ID)
		return err == nil && slices.ContainsFunc(s.Ended, func(e ledger.ReplicaEnd) bool {
			return names[e.Provider.String()] == faulty && e.Code == ledger.EndDisputed
		})
	})
	for i := range 5 {
		if code, by := complete(1000 + i); code != http.StatusOK || by == faulty {
			t.Errorf("after the dispute, request %d: status %d from %q, want 200 from an honest replica", i, code, by)
		}
	}
	if s := gpunetService(t, home, d.ID); s.Done() {
		t.Errorf("the service ended: %s %s", s.State, s.Reason)
	}
	t.Logf("devnet start to checks: %s", time.Since(start).Round(100*time.Millisecond))
}

// gpunetService is `gpunet service status ID` on the devnet in home.
func gpunetService(t *testing.T, home string, id uint64) ledger.Service {
	t.Helper()
	var s ledger.Service
	gpunetJSON(t, &s, "service", "status", fmt.Sprint(id), "--home", home)
	return s
}

// startOwnProvider starts `gpunet provider start` for a new key name in a
// home of its own under devHome (a machine of its own: its containers in
// its own directory), talking to the devnet's node at api, funded with
// 100 SYNC by alice; 1-core benchmark of 200 ms, asking 0.05 SYNC a
// core-hour, then args. It returns the key's address.
func startOwnProvider(t *testing.T, devHome, api, name string, args ...string) string {
	t.Helper()
	home := filepath.Join(devHome, "machines", name)
	var k keyJSON
	gpunetJSON(t, &k, "keys", "add", name, "--home", home)
	gpunetJSON(t, &map[string]any{}, "tx", "send", k.Address, "100sync", "--from", "alice", "--home", devHome)
	// A killed provider's container outlives it until an executor on its
	// directory cleans up, as its next start would. Registered before the
	// provider starts, this runs after it is stopped (cleanups run last
	// first) and before the homes are removed.
	dir := filepath.Join(home, "provider", "oci")
	t.Cleanup(func() {
		if ex, err := oci.New(context.Background(), oci.Options{Dir: dir}); err == nil {
			ex.Close()
		}
	})
	startProc(t, "provider "+name, append([]string{"provider", "start", "--from", name, "--home", home, "--node", api,
		"--bench-time", "200ms", "--region", "eu", "--price", "0.05sync"}, args...)...)
	return k.Address
}
