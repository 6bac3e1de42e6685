package ledger_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// A compare spec is checked field by field, and then refused as a whole
// until the judging round is built: judged by hash, honest float replicas
// would be slashed.
func TestCompareSpecRefusedUntilSettled(t *testing.T) {
	for _, c := range []struct {
		name   string
		verify string
		cmp    ledger.CompareSpec
		want   string
	}{
		{"rtol over 1", "full", ledger.CompareSpec{RTolE18: ledger.MaxToleranceE18 + 1}, "compare.rtol_e18"},
		{"atol over 1", "full", ledger.CompareSpec{ATolE18: ledger.MaxToleranceE18 + 1}, "compare.atol_e18"},
		{"unchecked", "none", ledger.CompareSpec{RTolE18: 1e13}, "must be checked"},
		{"valid", "full", ledger.CompareSpec{RTolE18: 1e13, ATolE18: 1e10}, "not settled"},
	} {
		s := lt.WasmJob("float", 1000, 60)
		s.Verification = c.verify
		s.Compare = &c.cmp
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ledger.ErrInvalidMsg) {
			t.Errorf("%s: Validate() = %v, want an invalid-message error naming %q", c.name, err, c.want)
		}
		if c.name == "valid" && !errors.Is(err, ledger.ErrCompareNotSettled) {
			t.Errorf("%s: Validate() = %v, want ErrCompareNotSettled", c.name, err)
		}
	}
	s := lt.WasmJob("exact", 1000, 60)
	if err := s.Validate(); err != nil {
		t.Errorf("a spec without compare: %v", err)
	}
}
