package ledger_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestEveryParamRegistered: every field of Params (its JSON key) has
// exactly one registry entry, and every entry is a field.
func TestEveryParamRegistered(t *testing.T) {
	b, err := json.Marshal(ledger.DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]uint64
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatalf("params are not all integers: %v", err)
	}
	seen := map[string]bool{}
	for _, s := range ledger.ParamRegistry() {
		if seen[s.Name] {
			t.Errorf("parameter %s is registered twice", s.Name)
		}
		seen[s.Name] = true
		if _, ok := fields[s.Name]; !ok {
			t.Errorf("registered parameter %s is no field of Params", s.Name)
		}
		if s.Desc == "" || s.Kind == "" || s.Min > s.Max || (s.MaxStep == 0 && s.MaxStepPPM == 0) {
			t.Errorf("parameter %s: incomplete entry %+v (needs a kind, a description, min ≤ max and a step)", s.Name, s)
		}
	}
	for name := range fields {
		if !seen[name] {
			t.Errorf("Params field %q has no entry in the parameter registry (internal/ledger/paramreg.go): give it bounds and a largest step", name)
		}
	}
}

// TestValidateUsesRegistryBounds: Validate refuses each parameter just
// outside its registered bounds, naming it, and DefaultParams is valid.
func TestValidateUsesRegistryBounds(t *testing.T) {
	def := ledger.DefaultParams()
	if err := def.Validate(); err != nil {
		t.Fatalf("DefaultParams: %v", err)
	}
	for _, s := range ledger.ParamRegistry() {
		for _, v := range []uint64{s.Min - 1, s.Max + 1} {
			if (v == s.Min-1 && s.Min == 0) || (v == s.Max+1 && s.Max == math.MaxUint64) {
				continue
			}
			p, err := setParam(def, s.Name, v)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(); err == nil || !strings.Contains(err.Error(), s.Name) {
				t.Errorf("Validate with %s=%d (bounds [%d, %d]) = %v, want an error naming it", s.Name, v, s.Min, s.Max, err)
			}
		}
	}
}

// setParam sets one parameter by its JSON key, bypassing the registry.
func setParam(p ledger.Params, name string, v uint64) (ledger.Params, error) {
	b, _ := json.Marshal(p)
	var m map[string]uint64
	json.Unmarshal(b, &m)
	m[name] = v
	b, _ = json.Marshal(m)
	var out ledger.Params
	return out, json.Unmarshal(b, &out)
}

func TestApplyParamChanges(t *testing.T) {
	def := ledger.DefaultParams()
	for _, tc := range []struct {
		name    string
		changes []ledger.ParamChange
		want    string // "" = accepted
	}{
		{"within step", []ledger.ParamChange{{"min_fee", 2_000}}, ""},
		{"two at once", []ledger.ParamChange{{"min_fee", 500}, {"max_validators", 120}}, ""},
		{"absolute step from zero", []ledger.ParamChange{{"protocol_fee_bps", 200}}, ""},
		{"none", nil, "1 to 16 parameters"},
		{"unknown", []ledger.ParamChange{{"min_fees", 1}}, `no parameter "min_fees"`},
		{"twice", []ledger.ParamChange{{"min_fee", 1}, {"min_fee", 2}}, "set twice"},
		{"above max", []ledger.ParamChange{{"protocol_fee_bps", 5_001}}, "out of bounds: protocol_fee_bps must be in [0, 5000]"},
		{"below min", []ledger.ParamChange{{"max_replicas", 2}}, "out of bounds: max_replicas must be in [3, 16]"},
		{"step too large", []ledger.ParamChange{{"min_fee", 12_000}}, "more than one proposal may (at most 10000 from 1000"},
		{"relative step", []ledger.ParamChange{{"max_validators", 151}}, "at most 50 from 100"},
		{"rate step", []ledger.ParamChange{{"protocol_fee_bps", 300}}, "at most 100 from 100"},
		{"cross rule", []ledger.ParamChange{{"downtime_max_missed", 10_000}}, "downtime_max_missed"},
		{"quorum floor", []ledger.ParamChange{{"gov_quorum_ppm", 0}}, "out of bounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ledger.ApplyParamChanges(def, tc.changes)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				for _, c := range tc.changes {
					if got, _ := p.Get(c.Key); got != c.Value {
						t.Errorf("%s = %d after the change, want %d", c.Key, got, c.Value)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if ledger.CodeOf(err) != ledger.ErrInvalidMsg.Code {
				t.Errorf("code %d, want ErrInvalidMsg's", ledger.CodeOf(err))
			}
		})
	}
}
