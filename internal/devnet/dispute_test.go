package devnet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/examples/tinylm/server"
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/receipt"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
)

// TestFaultyReplicaDisputed runs a devnet node (its ledger, relay and
// OpenAI gateway, which samples every deterministic request here) and
// four provider agents whose "containers" are the examples' tinylm server
// (the fake executor serves it in process; everything else is the real
// path: relay sessions, the agents' receipt proxies, heartbeats, txs).
// The cheapest provider answers every completion wrongly
// (Faults.WrongAnswers, as `provider start --fault-wrong-answers 1`).
// Requests through the node's /openai/v1 get their replica's receipt;
// the gateway's checks find the faulty replica, the node sends a dispute
// with its operator key, and the ledger slashes exactly slash_bps of the
// faulty provider's stake, ends its replica ("disputed") and places a
// replacement on the fourth provider. No honest provider is slashed.
func TestFaultyReplicaDisputed(t *testing.T) {
	home := t.TempDir()
	if _, err := Setup(home, Options{BlockTime: 100 * time.Millisecond, NoHWChallenges: true, ServiceCheckRatePPM: 1_000_000}); err != nil {
		t.Fatal(err)
	}
	dkey, err := DisputeKey(home)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	d, err := daemon.Start(t.Context(), home, daemon.Options{APIAddr: "127.0.0.1:0", CheckInvariants: true, DisputeKey: dkey, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	cl := chainclient.New(d.APIURL)
	ctx, stop := context.WithCancel(context.Background())
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := kr.Get(DevKeys[0])
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	pkeys := make([]*keys.Key, n)
	funded, err := fundProviders(ctx, cl, kr, alice, pkeys)
	if err != nil {
		t.Fatal(err)
	}
	if err := funded(ctx); err != nil {
		t.Fatal(err)
	}
	inv, err := hwinfo.Detect(ctx, hwinfo.Options{DiskPath: home})
	if err != nil {
		t.Fatal(err)
	}
	inv.GPUs = nil
	fig := hwinfo.Figures{Int8TOPS: 0.01}
	var wg sync.WaitGroup
	var agents []*provider.Agent
	for i, k := range pkeys {
		oci := fake.New(nil).WithName("oci").WithService(fake.Serve(server.New(model.Default(), server.Options{}), 8000))
		var faults *provider.Faults
		ask := uint64(provider.DefaultCPUPrice * (i + 2))
		if i == 0 {
			faults, ask = &provider.Faults{WrongAnswers: 1}, provider.DefaultCPUPrice
		}
		a := provider.NewInHome(home, cl, nil, provider.Options{
			Key: k, Region: "eu", Faults: faults, Inventory: inv, Figures: &fig, Poll: 25 * time.Millisecond, Logger: logger,
			Sandboxes: map[string]sandbox.Executor{"oci": oci},
			Prices:    map[string]uint64{provider.AnyClass: ask, ledger.CPUClass: ask},
		})
		agents = append(agents, a)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(ctx); err != nil {
				t.Errorf("provider %d: %v", i, err)
			}
		}()
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	faulty, honest := pkeys[0].Address, []address.Address{pkeys[1].Address, pkeys[2].Address, pkeys[3].Address}
	eventually(t, 60*time.Second, "the providers staked", func() bool {
		for _, a := range agents {
			if st := a.Status(); !st.Registered || !st.Online || st.Stake == 0 {
				return false
			}
		}
		return true
	})
	spec := lt.ServiceSpec("tinylm", 100*provider.DefaultCPUPrice)
	spec.Replicas = 3
	spec.Readiness.IntervalSeconds = 1
	// tinylm is integer code: its answers are bit-exact on any hardware,
	// which only makes an outvoted replica disputable.
	spec.OpenAI.Exact = true
	res, err := cl.SendMsg(t.Context(), alice, 0, &ledger.MsgDeployService{Spec: spec, Budget: 50_000_000, ConsumerKey: alice.Recipient(), Public: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 0 {
		t.Fatalf("deploy: %+v", res)
	}
	var svc *ledger.Service
	eventually(t, 60*time.Second, "three replicas ready, the faulty one among them", func() bool {
		svc, err = cl.Service(t.Context(), 1)
		if err != nil || len(svc.Replicas) != 3 {
			return false
		}
		for _, r := range svc.Replicas {
			if r.ReadyAt == 0 || !r.Ready {
				return false
			}
		}
		return slices.ContainsFunc(svc.Replicas, func(r ledger.Replica) bool { return r.Provider == faulty })
	})
	stakeOf := func(a address.Address) (uint64, []ledger.SlashEvent) {
		p, err := cl.Provider(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		return p.Record.Stake, p.Record.SlashEvents
	}
	before, _ := stakeOf(faulty)
	honestBefore := map[address.Address]uint64{}
	for _, a := range honest {
		honestBefore[a], _ = stakeOf(a)
	}
	params, err := cl.Params(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Deterministic requests (a seed) until the faulty provider is
	// slashed: each is checked, and any that reaches the faulty replica
	// (first, or as the copy) is disputed.
	sent := 0
	eventually(t, 90*time.Second, "the faulty provider slashed", func() bool {
		if sent < 200 {
			sent++
			body := fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"the cat sat %d"}],"seed":%d,"max_tokens":8}`, sent, sent)
			resp, err := http.Post(d.APIURL+"/openai/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Logf("request %d: status %d", sent, resp.StatusCode)
			} else if r, err := receipt.Decode(resp.Header.Get(receipt.Header)); err != nil {
				t.Fatalf("request %d: the answer's receipt: %v", sent, err)
			} else if err := r.Verify(ChainID); err != nil || r.Provider.String() != resp.Header.Get("X-Gpunet-Provider") {
				t.Fatalf("request %d: receipt of %s, answered by %s: %v", sent, r.Provider, resp.Header.Get("X-Gpunet-Provider"), err)
			}
		}
		_, evs := stakeOf(faulty)
		return slices.ContainsFunc(evs, func(e ledger.SlashEvent) bool { return e.Code == ledger.SlashServiceOutvoted })
	})
	after, evs := stakeOf(faulty)
	// Each dispute slashes slash_bps of what stake is left: the first of
	// the whole stake. (A second dispute, for a receipt the replica signed
	// before it ended, may land in the same block.)
	var first *ledger.SlashEvent
	var taken uint64
	for i, e := range evs {
		if e.Code != ledger.SlashServiceOutvoted {
			t.Errorf("slash event %+v: want only service_outvoted ones", e)
			continue
		}
		if e.Service != 1 || e.Count != 2 || e.Of != 3 {
			t.Errorf("slash event %+v, want service 1, outvoted by 2 of 3", e)
		}
		if first == nil {
			first = &evs[i]
		}
		taken += e.Amount
	}
	if want := before * params.SlashBps / 10_000; first.Amount != want || before-after != taken {
		t.Errorf("the faulty provider's first slash %d of its stake %d, want slash_bps (%d) of it: %d; it lost %d, its slash events say %d", first.Amount, before, params.SlashBps, want, before-after, taken)
	}
	eventually(t, 30*time.Second, "the disputed replica replaced", func() bool {
		svc, err = cl.Service(t.Context(), 1)
		if err != nil || len(svc.Replicas) != 3 {
			return false
		}
		return !slices.ContainsFunc(svc.Replicas, func(r ledger.Replica) bool { return r.Provider == faulty })
	})
	if !slices.ContainsFunc(svc.Ended, func(e ledger.ReplicaEnd) bool { return e.Provider == faulty && e.Code == ledger.EndDisputed }) {
		t.Errorf("no ended replica of the faulty provider with code %q: %+v", ledger.EndDisputed, svc.Ended)
	}
	// A streamed answer brings its receipt as a trailer; the service's
	// own port through /svc/ passes other requests as they are and gives
	// completions their receipts too.
	resp, err := http.Post(d.APIURL+"/openai/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"tinylm","messages":[{"role":"user","content":"streamed"}],"seed":7,"max_tokens":8,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if r, err := receipt.Decode(resp.Trailer.Get(receipt.Header)); err != nil || r.Verify(ChainID) != nil {
		t.Errorf("a streamed answer's receipt trailer %q: %v", resp.Trailer.Get(receipt.Header), err)
	}
	for _, tc := range []struct {
		method, path, body string
		receipt            bool
	}{
		{"GET", "/health", "", false},
		{"GET", "/v1/models", "", false},
		{"POST", "/v1/chat/completions", `{"model":"tinylm","messages":[{"role":"user","content":"direct"}],"seed":3,"max_tokens":4}`, true},
		{"GET", "/health", "", false},
	} {
		req, _ := http.NewRequest(tc.method, d.APIURL+"/svc/1/8000"+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get(receipt.Header) != ""; resp.StatusCode != 200 || got != tc.receipt {
			t.Errorf("%s /svc/1/8000%s: status %d, receipt %v, want 200 and %v", tc.method, tc.path, resp.StatusCode, got, tc.receipt)
		}
	}
	// The node shows the checks it sampled, with their receipts (a check
	// is recorded once its dispute's tx is in a block).
	type checkView struct {
		Service  uint64   `json:"service"`
		Receipts []string `json:"receipts"`
		Verdict  string   `json:"verdict"`
	}
	var disputed []checkView
	eventually(t, 10*time.Second, "a disputed check in GET /v1/services/checks", func() bool {
		cresp, err := http.Get(d.APIURL + "/v1/services/checks")
		if err != nil {
			t.Fatal(err)
		}
		var checks []checkView
		err = json.NewDecoder(cresp.Body).Decode(&checks)
		cresp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		disputed = disputed[:0]
		for _, c := range checks {
			if c.Verdict == "disputed" {
				disputed = append(disputed, c)
			}
		}
		return len(disputed) > 0
	})
	for _, c := range disputed {
		if len(c.Receipts) != 3 {
			t.Errorf("a disputed check with %d receipts", len(c.Receipts))
		}
		for _, enc := range c.Receipts {
			if r, err := receipt.Decode(enc); err != nil || r.Verify(ChainID) != nil {
				t.Errorf("a kept receipt %q does not verify: %v", enc, err)
			}
		}
	}
	// The node's metrics count them.
	mresp, err := http.Get(d.APIURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !regexp.MustCompile(`(?m)^gpunet_service_checks_total\{verdict="disputed"\} [1-9]`).Match(mb) {
		t.Errorf("/metrics has no disputed check counted:\n%s", regexp.MustCompile(`(?m)^gpunet_service_checks.*$`).FindAll(mb, -1))
	}
	// More requests, all to honest replicas now: none is disputed.
	for i := range 20 {
		body := fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"a dog %d"}],"temperature":0,"max_tokens":8}`, i)
		resp, err := http.Post(d.APIURL+"/openai/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	time.Sleep(time.Second)
	for _, a := range honest {
		st, evs := stakeOf(a)
		if st != honestBefore[a] || len(evs) != 0 {
			t.Errorf("honest provider %s: stake %d (was %d), slash events %+v", a, st, honestBefore[a], evs)
		}
	}
	t.Logf("caught after %d requests", sent)
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
