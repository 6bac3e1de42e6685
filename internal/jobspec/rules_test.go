package jobspec

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestLimitsWithinLedger: the bounds jobspec keeps tighter than the chain
// are within the ledger's, so that a spec that passes here is not refused
// on chain for its size.
func TestLimitsWithinLedger(t *testing.T) {
	for _, tt := range []struct {
		name       string
		got, limit uint64
	}{
		{"MaxMemory", uint64(MaxMemory), ledger.MaxJobMemory},
		{"MaxDisk", uint64(MaxDisk), ledger.MaxJobDisk},
		{"MaxOutputs", MaxOutputs, ledger.MaxJobItems},
		{"MaxPriceLimit", uint64(MaxPriceLimit), ledger.MaxJobPricePerHour},
		{"MaxTimeout", uint64(time.Duration(MaxTimeout) / time.Second), ledger.MaxJobTimeoutSeconds},
		{"MaxCPU", MaxCPU * 1000, ledger.MaxJobCPUMilli},
	} {
		if tt.got > tt.limit {
			t.Errorf("%s = %d, above the ledger's %d", tt.name, tt.got, tt.limit)
		}
	}
}

// TestLedgerSpec: a parsed spec's on-chain form is what the ledger checks
// and accepts.
func TestLedgerSpec(t *testing.T) {
	s, err := Parse([]byte(minimalOCI+"args: [a]\nenv: {LANG: C}\ninputs: [{path: /in, from: ./in}]\nresources: {cpu: 0.5, memory: 1GiB, gpu: {count: 2, models: [L4], min_vram: 16GiB, min_compute_cap: \"8.9\"}}\nverification: none\nregion: eu\nregion_required: true\nnetwork: true\n"), "/base")
	if err != nil {
		t.Fatal(err)
	}
	got := s.LedgerSpec("")
	want := ledger.JobSpec{
		Name: "hello", Executor: "oci", Image: s.Image, Args: []string{"a"}, Env: map[string]string{"LANG": "C"},
		Inputs: []string{"/in"}, Outputs: []string{"/out"}, CPUMilli: 500, Memory: 1 << 30, Disk: 1 << 30,
		GPUCount: 2, GPUModels: []string{"L4"}, MinVRAM: 16 << 30, MinComputeCap: "8.9",
		MaxPricePerHour: 100_000, TimeoutSeconds: 60, Verification: "none",
		Region: "eu", RegionRequired: true, Network: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("LedgerSpec:\n got %+v\nwant %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("the ledger refuses it: %v", err)
	}
	w, err := Parse([]byte(set(minimalWASM, "module", "./wc.wasm")), "/base")
	if err != nil {
		t.Fatal(err)
	}
	if ls := w.LedgerSpec(PlaceholderModule); ls.Module != PlaceholderModule || !ls.Deterministic || ls.Validate() != nil {
		t.Fatalf("wasm spec with the placeholder module: %+v, %v", ls, ls.Validate())
	}
	// The tier reaches the ledger; on-demand, the default, as "".
	for tier, want := range map[string]string{"": "", TierOnDemand: "", TierSpot: ledger.TierSpot, TierPriority: ledger.TierPriority} {
		w, err := Parse([]byte(minimalWASM+"tier: "+tier+"\n"), "")
		if err != nil {
			t.Fatal(err)
		}
		if got := w.LedgerSpec(PlaceholderModule).Tier; got != want {
			t.Errorf("tier %q: ledger tier %q, want %q", tier, got, want)
		}
	}
}

// TestOnChainAsksTheLedger: once jobspec's own checks pass, the ledger has
// the last word; a rule it has and jobspec lacks still refuses the spec.
func TestOnChainAsksTheLedger(t *testing.T) {
	s, err := Parse([]byte(minimalWASM), "")
	if err != nil {
		t.Fatal(err)
	}
	v := &validator{s: s}
	v.onChain()
	if len(v.errs) != 0 {
		t.Fatalf("valid spec: %v", v.errs)
	}
	// A rule jobspec does not check (a spec that skipped its checks): the
	// ledger's own bound on CPU.
	s.Resources.CPU = 2 * MaxCPU
	v = &validator{s: s}
	v.onChain()
	if len(v.errs) != 1 || !strings.Contains(v.errs[0].Msg, "the ledger would refuse this spec: resources.cpu out of range") {
		t.Fatalf("errors %v, want the ledger's refusal", v.errs)
	}
}
