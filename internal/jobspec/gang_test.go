package jobspec

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// gangOCI is minimalOCI as a 3-member gang (resources on lines 7-13).
const gangOCI = minimalOCI + `resources:
  nodes: 3
  cpu: 4
  memory: 64GiB
  shm: 16GiB
  gpu: {count: 8, interconnect: nvlink}
placement: {region: eu}
`

// TestGangSpec: the spec parses into a gang of 3 members of 8
// NVLinked GPUs with 16 GiB of /dev/shm each, in region eu as a hard
// constraint, verification none by default; the ledger accepts it.
func TestGangSpec(t *testing.T) {
	s, err := Parse([]byte(gangOCI), "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Verification != VerifyNone {
		t.Errorf("verification = %q, want none (a gang's default)", s.Verification)
	}
	ls := s.LedgerSpec("")
	want := struct {
		nodes, shm, gpus uint64
		ic, region       string
		required         bool
	}{3, 16 << 30, 8, ledger.InterconnectNVLink, "eu", true}
	got := want
	got.nodes, got.shm, got.gpus, got.ic, got.region, got.required = ls.Nodes, ls.Shm, ls.GPUCount, ls.Interconnect, ls.Region, ls.RegionRequired
	if got != want {
		t.Errorf("ledger spec = %+v, want %+v", got, want)
	}
	if err := ls.Validate(); err != nil {
		t.Errorf("ledger refuses the gang: %v", err)
	}
	// One node is the ledger's default: a spec that leaves nodes out, or
	// says 1, submits what it did before gangs.
	one, err := Parse([]byte(minimalOCI+"resources: {nodes: 1}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if ls := one.LedgerSpec(""); ls.Nodes != 0 || ls.Gang() {
		t.Errorf("nodes: 1 gives ledger nodes %d, want 0", ls.Nodes)
	}
}

// TestGangSpecErrors: each problem is reported at its field, with its line
// and what would be right.
func TestGangSpecErrors(t *testing.T) {
	tests := []struct {
		name, src, field string
		line             int
		want             []string
	}{
		{"nodes 0", minimalOCI + "resources: {nodes: 0}\n", "resources.nodes", 7, []string{"at least 1"}},
		{"too many nodes", minimalOCI + "resources:\n  nodes: 65\n", "resources.nodes", 8, []string{"65 members", "64"}},
		{"wasm gang", minimalWASM + "resources:\n  nodes: 2\n", "resources.nodes", 8, []string{"wasm", "executor: oci"}},
		{"spot gang", minimalOCI + "verification: spot\nresources:\n  nodes: 2\n", "verification", 7, []string{"whole replica gangs", "verification: full", "verification: none"}},
		{"full gang not deterministic", minimalOCI + "verification: full\nresources:\n  nodes: 2\n", "verification", 7, []string{"deterministic"}},
		{"full gang with checkpoint", minimalOCI + "verification: full\ndeterministic: true\ncheckpoint: {path: /ckpt, interval: 10m}\nresources:\n  nodes: 2\n", "checkpoint", 9, []string{"does not resume"}},
		{"tee gang", minimalOCI + "trust: tee\nresources:\n  nodes: 2\n", "trust", 7, []string{"enclave"}},
		{"shm over memory", minimalOCI + "resources:\n  memory: 1GiB\n  shm: 2GiB\n", "resources.shm", 9, []string{"more than resources.memory"}},
		{"shm on wasm", minimalWASM + "resources:\n  shm: 1MiB\n", "resources.shm", 8, []string{"no /dev/shm"}},
		{"bad interconnect", minimalOCI + "resources:\n  gpu: {count: 2, interconnect: infiniband}\n", "resources.gpu.interconnect", 8, []string{`"infiniband"`, "nvlink", "pcie"}},
		{"nvlink one gpu", minimalOCI + "resources:\n  gpu:\n    count: 1\n    interconnect: nvlink\n", "resources.gpu.interconnect", 10, []string{"at least 2"}},
		{"bad placement region", minimalOCI + "placement:\n  region: EU\n", "placement.region", 8, []string{`"EU" is not a region`}},
		{"placement and region", minimalOCI + "region: us\nplacement:\n  region: eu\n", "placement.region", 9, []string{"both set"}},
		{"unknown placement field", minimalOCI + "placement:\n  latency: 5ms\n", "placement.latency", 8, []string{`unknown field "latency"`, "region"}},
		{"nodes at top level", minimalOCI + "nodes: 3\n", "nodes", 7, []string{`did you mean "resources.nodes"?`}},
		{"nvlink alias", minimalOCI + "resources:\n  gpu: {count: 2, nvlink: true}\n", "resources.gpu.nvlink", 8, []string{`did you mean "interconnect"?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "")
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse error %v, want Errors", err)
			}
			e := es[0]
			if len(es) != 1 || e.Field != tt.field || e.Line != tt.line || (e.Line > 0 && e.Column < 1) {
				t.Fatalf("errors %v; want one at field %q line %d", err, tt.field, tt.line)
			}
			for _, w := range tt.want {
				if !strings.Contains(e.Msg, w) {
					t.Errorf("message %q does not say %q", e.Msg, w)
				}
			}
		})
	}
}

// TestGangDocExample: docs/jobspec.md's gang example parses to what the
// text under it says.
func TestGangDocExample(t *testing.T) {
	blocks, _ := yamlBlocks(t, filepath.Join("..", "..", "docs", "jobspec.md"))
	for _, b := range blocks {
		if !strings.HasPrefix(b, "name: llm-train") {
			continue
		}
		s, err := Parse([]byte(b), "")
		if err != nil {
			t.Fatal(err)
		}
		ls := s.LedgerSpec("")
		if ls.Nodes != 3 || ls.GPUCount != 8 || ls.Interconnect != ledger.InterconnectNVLink || ls.Shm != 16<<30 ||
			ls.Region != "eu" || !ls.RegionRequired || ls.Verification != ledger.VerifyNone || ls.MaxPricePerHour != 20_000_000 || ls.TimeoutSeconds != 48*3600 {
			t.Errorf("the doc's gang parses to %+v", ls)
		}
		if err := ls.Validate(); err != nil {
			t.Errorf("the ledger refuses the doc's gang: %v", err)
		}
		return
	}
	t.Fatal("docs/jobspec.md has no llm-train gang example")
}

// TestGangSpecFull: a deterministic gang may say verification: full; the
// ledger accepts what it parses to (2 replica gangs of its nodes).
func TestGangSpecFull(t *testing.T) {
	s, err := Parse([]byte(gangOCI+"verification: full\ndeterministic: true\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	ls := s.LedgerSpec("")
	if err := ls.Validate(); err != nil {
		t.Fatalf("ledger refuses the gang at full: %v", err)
	}
	if ls.Verification != ledger.VerifyFull || !ls.Deterministic || ls.PlannedReplicas() != 6 {
		t.Errorf("ledger spec: verification %s deterministic %v, %d planned members; want full, true, 6 (2 gangs of 3)", ls.Verification, ls.Deterministic, ls.PlannedReplicas())
	}
}
