package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestQueryProviderShowsEachDevice: `gpunet query provider` prints one line
// per device (the CPU, then each GPU with its class and UUID) with its
// claim and the ruling on it, and the effective total the ledger counts;
// --output json stays the API's JSON, per-GPU figures and rulings
// included.
func TestQueryProviderShowsEachDevice(t *testing.T) {
	rec := &ledger.Provider{Address: address.Address{7}}
	rec.Inventory.CPUCores = 16
	rec.Measured.Int8GOPS = 800
	rec.Inventory.GPUs = []ledger.GPUSpec{
		{Class: "H100_80GB", UUID: "GPU-aaaa", Int8GOPS: 1_500_000},
		{Class: "H100_80GB", UUID: "GPU-bbbb", Int8GOPS: 1_400_000},
		{Class: "H100_80GB", Int8GOPS: 1_300_000},
		{Class: "T4"}, // not measured
	}
	// The CPU showed 500 of its 800 by a late commit; GPU-aaaa passed; the
	// others have no ruling; an earlier challenge was missed.
	rec.Challenges = ledger.ChallengeRecord{Passed: 1, Late: 1, Missed: 1, MissesInARow: 1, Failed: 1, Proven: true, ProvenGOPS: 500,
		GPUs: []ledger.DeviceProof{{Proven: true, ProvenGOPS: 1_500_000}, {}, {}, {}}}
	rec.HWChallenge = &ledger.HardwareChallenge{Device: 2, DeviceUUID: "GPU-bbbb", N: 64, K: 64, M: 64, ClaimedGOPS: 1_400_000, Height: 9}
	body := apiwire.ProviderBody{Record: rec}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/providers/"+rec.Address.String() {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(body)
	}))
	defer srv.Close()

	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append([]string{"query", "provider", rec.Address.String(), "--node", srv.URL, "--home", t.TempDir()}, args...)
		if code := Run(t.Context(), args, &out, &errOut); code != 0 {
			t.Fatalf("gpunet %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}

	text := run()
	for _, want := range []string{
		"hardware:    challenges 1 passed, 1 late (measured), 1 missed, 1 failed (slashed); effective 4200 TOPS\n",
		"             1 missed in a row: is the agent running?",
		"  cpu (16 cores)               claims 0.8 TOPS, proven only 0.5 TOPS; counts 0.5 TOPS\n",
		"  gpus[0] H100_80GB GPU-aaaa   claims 1500 TOPS, proven 1500 TOPS; counts 1500 TOPS\n",
		"  gpus[1] H100_80GB GPU-bbbb   claims 1400 TOPS, not yet challenged; counts 1400 TOPS\n",
		"  gpus[2] H100_80GB (no uuid)  claims 1300 TOPS, not yet challenged; counts 1300 TOPS\n",
		"  gpus[3] T4 (no uuid)         claims nothing, never challenged; counts 0 TOPS\n",
		"  open: 64×64×64 GEMM on gpus[1] GPU-bbbb at 1400 TOPS, issued at height 9\n",
		// Units, and no "0× cpu" for a machine without GPUs.
		"offer:       no GPU, 0 cores, 0 GiB RAM, 0 GiB disk, 0 int8 TOPS, 0 SYNC/h per core\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if got, want := rec.EffectiveGOPS(), uint64(4_200_500); got != want {
		t.Fatalf("the ledger counts %d GOPS, the test expects %d", got, want)
	}

	var got apiwire.ProviderBody
	if err := json.Unmarshal([]byte(run("--output", "json")), &got); err != nil {
		t.Fatalf("--output json: %v", err)
	}
	if r := got.Record; r == nil || len(r.Inventory.GPUs) != 4 || r.Inventory.GPUs[1].Int8GOPS != 1_400_000 || r.DeviceRuling(1) != (ledger.DeviceProof{Proven: true, ProvenGOPS: 1_500_000}) || r.EffectiveGOPS() != 4_200_500 {
		t.Fatalf("--output json record: %+v", got.Record)
	}
}

// TestProviderRegion: provider start never puts a machine in a region
// nobody chose (issue 33: --region defaulted to "eu" silently). A new
// provider must give --region, told which regions the network's
// providers use; a registered one keeps its region, and says so; a
// --region given wins.
func TestProviderRegion(t *testing.T) {
	s := newStory(t)
	r := s.run("provider", "start", "--from", "bob")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--region is required for a new provider") || !strings.Contains(r.stderr, "providers are in eu") {
		t.Errorf("provider start --from bob (new, no --region): exit %d, %q", r.code, r.stderr)
	}
	var stderr bytes.Buffer
	e := &env{stderr: &stderr, stdout: io.Discard, home: s.home, node: s.url}
	cl, err := e.client()
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.providerRegion(t.Context(), cl, s.prov.Addr, "p1", "")
	if err != nil || got != "eu" || !strings.Contains(stderr.String(), "region: eu, as p1 registered it") {
		t.Errorf("a registered provider without --region: %q, %v, said %q; want its registered eu", got, err, stderr.String())
	}
	if got, err := e.providerRegion(t.Context(), cl, s.prov.Addr, "p1", "us-east"); err != nil || got != "us-east" {
		t.Errorf("--region us-east: %q, %v", got, err)
	}
}

// TestProviderLabel: provider start declares --label (issue 33), and
// without it keeps the label the provider registered with, saying so, as
// it keeps the region; --label "" removes it; a label the ledger would
// refuse is refused before anything is sent.
func TestProviderLabel(t *testing.T) {
	s := newStory(t)
	for _, bad := range []string{"Acme\u202e", "Acme  GPUs", strings.Repeat("x", 41), "<b>x</b>"} {
		r := s.run("provider", "start", "--from", "bob", "--region", "eu", "--label", bad)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "--label ") {
			t.Errorf("--label %q: exit %d, %q; want a usage error naming --label", bad, r.code, r.stderr)
		}
	}
	var stderr bytes.Buffer
	e := &env{stderr: &stderr, stdout: io.Discard, home: s.home, node: s.url}
	cl, err := e.client()
	if err != nil {
		t.Fatal(err)
	}
	// Not registered, or registered without one: no label.
	if got, err := e.providerLabel(t.Context(), cl, s.bob.Address, "bob", "", false); err != nil || got != "" {
		t.Errorf("a new provider without --label: %q, %v", got, err)
	}
	if got, err := e.providerLabel(t.Context(), cl, s.prov.Addr, "p1", "", false); err != nil || got != "" || stderr.Len() != 0 {
		t.Errorf("an unlabelled provider without --label: %q, %v, said %q", got, err, stderr.String())
	}
	pi := lt.ProviderInfo("", 0, 3_600_000)
	pi.EncryptionKey = s.provID.Recipient().String()
	pi.Label = "Acme GPUs #2"
	s.chain.Send(s.prov, &ledger.MsgUpdateProvider{ProviderInfo: pi})
	got, err := e.providerLabel(t.Context(), cl, s.prov.Addr, "p1", "", false)
	if err != nil || got != "Acme GPUs #2" || !strings.Contains(stderr.String(), `label: "Acme GPUs #2", as p1 registered it`) {
		t.Errorf("a labelled provider without --label: %q, %v, said %q; want its registered label", got, err, stderr.String())
	}
	if got, err := e.providerLabel(t.Context(), cl, s.prov.Addr, "p1", "Acme GPUs #3", true); err != nil || got != "Acme GPUs #3" {
		t.Errorf("--label: %q, %v", got, err)
	}
	if got, err := e.providerLabel(t.Context(), cl, s.prov.Addr, "p1", "", true); err != nil || got != "" {
		t.Errorf(`--label "": %q, %v; want the label removed`, got, err)
	}
	// A registration that cannot be read is not taken for "no label".
	down := &env{stderr: io.Discard, stdout: io.Discard, home: s.home, node: "http://127.0.0.1:1"}
	dcl, err := down.client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := down.providerLabel(t.Context(), dcl, s.prov.Addr, "p1", "", false); err == nil || !strings.Contains(err.Error(), "pass --label") {
		t.Errorf("node unreachable, no --label: %v; want an error", err)
	}
}

// TestHardwareShowsBusyGPU: busy rulings (a GPU challenge its provider's
// GPU work left no room for) are counted apart from misses, and the GPU's
// line says why it is checked again.
func TestHardwareShowsBusyGPU(t *testing.T) {
	rec := &ledger.Provider{}
	rec.Inventory.CPUCores = 8
	rec.Inventory.GPUs = []ledger.GPUSpec{{Class: "T4", UUID: "GPU-cccc", Int8GOPS: 130_000}}
	rec.Challenges = ledger.ChallengeRecord{Passed: 1, Busy: 2,
		GPUs: []ledger.DeviceProof{{Proven: true, ProvenGOPS: 130_000, Recheck: true, Busy: 2}}}
	var b strings.Builder
	printHardware(&b, rec)
	for _, want := range []string{
		"hardware:    challenges 1 passed, 0 late (measured), 0 missed, 0 failed (slashed), 2 busy (a GPU job held the GPU: not a miss); effective 130 TOPS\n",
		"  gpus[0] T4 GPU-cccc  claims 130 TOPS, proven 130 TOPS (2 busy in a row: rechecked when its GPU work ends); counts 130 TOPS\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "missed in a row") {
		t.Errorf("busy rulings shown as misses:\n%s", b.String())
	}
}

// TestQueryProviderShowsAttestation: query provider prints what the
// provider's TEE evidence proved, or that it is expired or not attested,
// as the API reports it (issue 31).
func TestQueryProviderShowsAttestation(t *testing.T) {
	rec := &ledger.Provider{Address: address.Address{8}}
	body := apiwire.ProviderBody{Record: rec}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(body)
	}))
	defer srv.Close()
	run := func() string {
		t.Helper()
		var out, errOut bytes.Buffer
		args := []string{"query", "provider", rec.Address.String(), "--node", srv.URL, "--home", t.TempDir()}
		if code := Run(t.Context(), args, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		return out.String()
	}
	body.Attestation = apiwire.ProviderAttestation{State: apiwire.AttestNone}
	if text := run(); !strings.Contains(text, "tee:         not attested") {
		t.Errorf("unattested provider:\n%s", text)
	}
	body.Attestation = apiwire.ProviderAttestation{State: apiwire.AttestValid, Kind: "tdx", Measurement: "ab12", TCBStatus: "UpToDate",
		Key: "age1xyz", Height: 42, Expiry: 1_700_000_000, AsOf: 1_699_999_000}
	text := run()
	for _, want := range []string{
		"tee:         attested tdx, valid until 2023-11-14T22:13:20Z (accepted at height 42)\n",
		"  measurement:  ab12\n", "  tcb status:   UpToDate\n", "  attested key: age1xyz\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("attested provider: want %q in\n%s", want, text)
		}
	}
	body.Attestation.State = apiwire.AttestExpired
	if text := run(); !strings.Contains(text, "tee:         expired: tdx evidence of height 42 counted until 2023-11-14T22:13:20Z") {
		t.Errorf("expired attestation:\n%s", text)
	}
	// GPUs attested without a CPU TEE.
	body.Attestation = apiwire.ProviderAttestation{State: apiwire.AttestNone, GPUs: []apiwire.AttestedGPU{
		{AttestedGPU: ledger.AttestedGPU{UUID: "GPU-1", ID: "41431D480FE5E87274", Height: 9, Expiry: 1_700_000_000}, State: apiwire.AttestValid}}}
	if text := run(); !strings.Contains(text, "gpu attested: 41431D480FE5E87274 as GPU-1 (height 9), until 2023-11-14T22:13:20Z") || !strings.Contains(text, "tee:         not attested") {
		t.Errorf("attested GPU:\n%s", text)
	}
}
