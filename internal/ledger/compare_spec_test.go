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
