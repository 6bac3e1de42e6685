package ledger_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// judgeBlob is a well-formed blob reference for a judge program.
const judgeBlob = "sha256:1111111111111111111111111111111111111111111111111111111111111111"

// A compare spec is checked field by field; a well-formed one is taken
// (its replicas' differing outputs go to a judging round, judgment.go).
func TestCompareSpecValidate(t *testing.T) {
	for _, c := range []struct {
		name   string
		verify string
		cmp    ledger.CompareSpec
		want   string
	}{
		{"rtol over 1", "full", ledger.CompareSpec{RTolE18: ledger.MaxToleranceE18 + 1}, "compare.rtol_e18"},
		{"atol over 1", "full", ledger.CompareSpec{ATolE18: ledger.MaxToleranceE18 + 1}, "compare.atol_e18"},
		{"unchecked", "none", ledger.CompareSpec{RTolE18: 1e13}, "must be checked"},
		{"program not a blob", "full", ledger.CompareSpec{Program: "./same.wasm"}, "compare.program"},
		{"program short hash", "full", ledger.CompareSpec{Program: "sha256:abc"}, "compare.program"},
		{"program and rtol", "full", ledger.CompareSpec{Program: judgeBlob, RTolE18: 1}, "exclusive"},
		{"program and atol", "full", ledger.CompareSpec{Program: judgeBlob, ATolE18: 1}, "exclusive"},
		{"program unchecked", "none", ledger.CompareSpec{Program: judgeBlob}, "must be checked"},
		{"fuel without program", "full", ledger.CompareSpec{RTolE18: 1, Fuel: 1000}, "compare.fuel"},
		{"fuel over the limit", "full", ledger.CompareSpec{Program: judgeBlob, Fuel: ledger.MaxJudgeFuelLimit + 1}, "compare.fuel"},
	} {
		s := lt.WasmJob("float", 1000, 60)
		s.Verification = c.verify
		s.Compare = &c.cmp
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ledger.ErrInvalidMsg) {
			t.Errorf("%s: Validate() = %v, want an invalid-message error naming %q", c.name, err, c.want)
		}
	}
	for _, v := range []string{"full", "spot"} {
		s := lt.WasmJob("float", 1000, 60)
		s.Verification = v
		s.Compare = &ledger.CompareSpec{RTolE18: 1e13, ATolE18: 1e10}
		if err := s.Validate(); err != nil {
			t.Errorf("a valid compare spec (%s): %v", v, err)
		}
		s.Compare = &ledger.CompareSpec{Program: judgeBlob}
		if err := s.Validate(); err != nil {
			t.Errorf("a valid compare program (%s): %v", v, err)
		}
	}
	s := lt.WasmJob("exact", 1000, 60)
	if err := s.Validate(); err != nil {
		t.Errorf("a spec without compare: %v", err)
	}
}

// TestJudgeFuelRecorded: a judge program's fuel is on chain with the job,
// so every judge runs it under the same budget: a spec that names none is
// recorded with params.max_judge_fuel, one that names less keeps it, and
// one over the parameter is refused, naming both.
func TestJudgeFuelRecorded(t *testing.T) {
	c := verifyChain(t, 3, func(p *ledger.Params) { p.MaxJudgeFuel = 20_000_000 })
	for i, tc := range []struct {
		fuel, want uint64
	}{
		{0, 20_000_000},
		{12_345, 12_345},
		{20_000_000, 20_000_000},
	} {
		s := lt.WasmJob("judged", 1_000_000, 600)
		s.Verification = ledger.VerifyFull
		s.Compare = &ledger.CompareSpec{Program: judgeBlob, Fuel: tc.fuel}
		must(t, []ledger.TxResult{submit(t, c, s)})
		id := uint64(i + 1)
		if got := job(t, c, id).Spec.Compare.Fuel; got != tc.want {
			t.Errorf("fuel %d: job %d recorded fuel %d, want %d", tc.fuel, id, got, tc.want)
		}
	}
	s := lt.WasmJob("judged", 1_000_000, 600)
	s.Verification = ledger.VerifyFull
	s.Compare = &ledger.CompareSpec{Program: judgeBlob, Fuel: 20_000_001}
	r := submit(t, c, s)
	if !errors.Is(r.Err, ledger.ErrInvalidMsg) || !strings.Contains(r.Err.Error(), "max_judge_fuel") {
		t.Errorf("fuel over params.max_judge_fuel: %v, want an invalid-message error naming it", r.Err)
	}
	// A spec without a judge program records no fuel.
	must(t, []ledger.TxResult{submit(t, c, floatSpec("float"))})
}
