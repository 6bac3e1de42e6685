package ledger

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestParamBoundsInclusive: every parameter is accepted at exactly its
// registered Min and Max (the bounds are inclusive), and refused one past
// either with an error naming it as params.<name>. (Validate's refusals are
// in TestValidateUsesRegistryBounds; here the bound itself.)
func TestParamBoundsInclusive(t *testing.T) {
	def := DefaultParams()
	for _, s := range paramRegistry {
		for _, v := range []uint64{s.Min, s.Max} {
			p := def
			*s.ptr(&p) = v
			if err := p.checkBounds(); err != nil {
				t.Errorf("%s=%d (bounds [%d, %d]): %v, want accepted", s.Name, v, s.Min, s.Max, err)
			}
		}
		for _, v := range []uint64{s.Min - 1, s.Max + 1} {
			if (v == s.Min-1 && s.Min == 0) || (v == s.Max+1 && s.Max+1 == 0) {
				continue
			}
			p := def
			*s.ptr(&p) = v
			if err := p.checkBounds(); err == nil || !strings.Contains(err.Error(), "params."+s.Name+" ") {
				t.Errorf("%s=%d (bounds [%d, %d]): %v, want an error naming params.%s", s.Name, v, s.Min, s.Max, err, s.Name)
			}
		}
	}
}

// TestParamCrossRules: each rule that ties parameters together refuses a
// combination every parameter's bounds allow, naming the parameters, and
// accepts the edge of what it allows.
func TestParamCrossRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *Params)
		want string // "" = valid
	}{
		{"min_validator_stake below power_unit", func(p *Params) { p.PowerUnit = 2_000; p.MinValidatorStake = 1_999 }, "params.min_validator_stake 1999 below power_unit 2000"},
		{"min_validator_stake at power_unit", func(p *Params) { p.PowerUnit = 2_000; p.MinValidatorStake = 2_000 }, ""},
		{"downtime_max_missed at the window", func(p *Params) { p.DowntimeWindow = 100; p.DowntimeMaxMissed = 100 }, "params.downtime_max_missed 100 out of range [1, downtime_window 100)"},
		{"downtime_max_missed just inside", func(p *Params) { p.DowntimeWindow = 100; p.DowntimeMaxMissed = 99 }, ""},
		{"validator unbonding as long as the evidence age", func(p *Params) { p.EvidenceMaxAgeBlocks = 50; p.ValidatorUnbondingBlocks = 50 }, "params.validator_unbonding_blocks 50 must be longer than evidence_max_age_blocks 50"},
		{"validator unbonding one block longer", func(p *Params) { p.EvidenceMaxAgeBlocks = 50; p.ValidatorUnbondingBlocks = 51 }, ""},
		{"market floor above ceiling", func(p *Params) { p.MarketFloor = 10; p.MarketCeiling = 9 }, "params.market_floor 10 above market_ceiling 9"},
		{"market floor at ceiling", func(p *Params) { p.MarketFloor = 10; p.MarketCeiling = 10 }, ""},
		{"market target of 100%", func(p *Params) { p.MarketTargetPPM = ppm }, "params.market_target_ppm 1000000 out of range"},
		{"spot above on-demand", func(p *Params) { p.TierSpotPPM, p.TierOnDemandPPM = 600_001, 600_000 }, "params.tier_*_ppm"},
		{"on-demand above priority", func(p *Params) { p.TierOnDemandPPM = p.TierPriorityPPM + 1 }, "want spot <= on-demand <= priority"},
		{"all tiers equal", func(p *Params) { p.TierSpotPPM, p.TierOnDemandPPM, p.TierPriorityPPM = ppm, ppm, ppm }, ""},
		{"fee split above the fees", func(p *Params) { p.FeeBurnPPM = 800_001; p.ValidatorFeeSharePPM = 200_000 }, "params.fee_burn_ppm 800001 + validator_fee_share_ppm 200000 above 1000000"},
		{"fee split exactly the fees", func(p *Params) { p.FeeBurnPPM = 800_000; p.ValidatorFeeSharePPM = 200_000 }, ""},
		{"heartbeat timeout equal to the interval", func(p *Params) { p.ServiceHeartbeatInterval = 60; p.ServiceHeartbeatTimeout = 60 }, "params.service_heartbeat_timeout 60 must be longer than service_heartbeat_interval 60"},
		{"heartbeat timeout one second longer", func(p *Params) { p.ServiceHeartbeatInterval = 60; p.ServiceHeartbeatTimeout = 61 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultParams()
			tc.edit(&p)
			if err := p.checkBounds(); err != nil {
				t.Fatalf("the case is not within every parameter's bounds: %v", err)
			}
			err := p.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error saying %q", err, tc.want)
			}
			// A proposal that would make it is refused as an invalid msg.
			if _, err := proposeFrom(DefaultParams(), p); !errors.Is(err, ErrInvalidMsg) {
				t.Errorf("a proposal making these params: %v, want ErrInvalidMsg", err)
			}
		})
	}
}

// proposeFrom returns ApplyParamChanges of the parameters where p differs
// from old, applied to p itself: every step is zero, so only Validate can
// refuse.
func proposeFrom(old, p Params) (Params, error) {
	var changes []ParamChange
	for _, s := range paramRegistry {
		if *s.ptr(&old) != *s.ptr(&p) {
			changes = append(changes, ParamChange{Key: s.Name, Value: *s.ptr(&p)})
		}
	}
	return ApplyParamChanges(p, changes)
}

// laterJSONKeys are the JSON keys of the later parameters.
func laterJSONKeys(t *testing.T) []string {
	t.Helper()
	var keys []string
	p := Params{}
	fields := laterParamFields(&p)
	rt := reflect.TypeOf(p)
	for i := range rt.NumField() {
		f := rt.Field(i)
		ptr := reflect.ValueOf(&p).Elem().Field(i).Addr().Interface().(*uint64)
		for _, lf := range fields {
			if lf[0] == ptr {
				keys = append(keys, strings.Split(f.Tag.Get("json"), ",")[0])
			}
		}
	}
	if len(keys) != len(fields) {
		t.Fatalf("found %d of the %d later parameters among Params' fields", len(keys), len(fields))
	}
	return keys
}

// TestLaterParamsAreTheOmitEmptyOnes: the later parameters are exactly
// the fields tagged omitempty (a field added later without omitempty
// would change every old chain's stored params; one tagged omitempty but
// not listed would read as 0 from an old state and fail its bounds), and
// DefaultParams holds their defaults.
func TestLaterParamsAreTheOmitEmptyOnes(t *testing.T) {
	later := laterJSONKeys(t)
	var omitempty []string
	rt := reflect.TypeOf(Params{})
	for i := range rt.NumField() {
		if tag := rt.Field(i).Tag.Get("json"); strings.HasSuffix(tag, ",omitempty") {
			omitempty = append(omitempty, strings.TrimSuffix(tag, ",omitempty"))
		}
	}
	slices.Sort(later)
	slices.Sort(omitempty)
	if !slices.Equal(later, omitempty) {
		t.Fatalf("later parameters %v, fields tagged omitempty %v: want the same", later, omitempty)
	}
	def := DefaultParams()
	for _, f := range laterParamFields(&def) {
		if *f[0] != *f[1] || *f[1] == 0 {
			t.Errorf("a later parameter's default is %d in DefaultParams and %d in defaultLaterParams (want equal, non-zero)", *f[0], *f[1])
		}
	}
}

// TestLaterParamsStoredOnlyWhenSet: the stored params leave out each later
// parameter at its default (so a chain from before them hashes as it
// did), keep one set to anything else, and read back as they were; a
// state that lacks them reads their defaults.
func TestLaterParamsStoredOnlyWhenSet(t *testing.T) {
	later := laterJSONKeys(t)
	stored := func(p Params) map[string]uint64 {
		t.Helper()
		b, err := encodeParams(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]uint64
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	readBack := func(p Params) Params {
		t.Helper()
		kv := NewMemKV()
		b, err := encodeParams(p)
		if err != nil {
			t.Fatal(err)
		}
		kv.Apply([]Change{{Key: keyParams, Value: b}})
		got, err := GetParams(kv)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	def := DefaultParams()
	m := stored(def)
	for _, k := range later {
		if _, ok := m[k]; ok {
			t.Errorf("params at their defaults store %s: a chain from before it would hash differently", k)
		}
	}
	if got := readBack(def); got != def {
		t.Errorf("defaults read back as %+v", got)
	}
	if got := stored(def); len(got) != len(paramRegistry)-len(later) {
		t.Errorf("stored %d params, want the %d that are not later ones", len(got), len(paramRegistry)-len(later))
	}

	// Each later parameter set to something else is stored and read back;
	// set back to its default, the stored form is the one before.
	before, _ := encodeParams(def)
	for _, k := range later {
		s, ok := LookupParam(k)
		if !ok {
			t.Fatalf("later parameter %s is not registered", k)
		}
		p := def
		v := *s.ptr(&p) + 1
		if v > s.Max {
			v = *s.ptr(&p) - 1
		}
		*s.ptr(&p) = v
		if got, ok := stored(p)[k]; !ok || got != v {
			t.Errorf("%s=%d stored as %d (present %v)", k, v, got, ok)
		}
		if got := readBack(p); got != p {
			t.Errorf("%s=%d: read back %d", k, v, *s.ptr(&got))
		}
		*s.ptr(&p) = *s.ptr(&def)
		if after, _ := encodeParams(p); string(after) != string(before) {
			t.Errorf("%s back at its default stores %s, want %s", k, after, before)
		}
	}

	// A genesis that leaves them unset (0) means their defaults.
	p := def
	for _, f := range laterParamFields(&p) {
		*f[0] = 0
	}
	if got := p.withLaterDefaults(); got != def {
		t.Errorf("unset later params with defaults: %+v, want DefaultParams", got)
	}
	kv := NewMemKV()
	if _, _, err := (&Ledger{}).InitGenesis(kv, "c", Genesis{Params: p}); err != nil {
		t.Fatalf("genesis with the later params unset: %v", err)
	}
}

// TestGetParamsRefusesABadState: a state without params, or with params
// that do not decode, is an internal error, not zero params.
func TestGetParamsRefusesABadState(t *testing.T) {
	kv := NewMemKV()
	if _, err := GetParams(kv); !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "no params") {
		t.Errorf("no params: %v, want ErrInternal saying so", err)
	}
	kv.Apply([]Change{{Key: keyParams, Value: []byte(`{"min_fee":-1}`)}})
	if _, err := GetParams(kv); !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "corrupt params") {
		t.Errorf("corrupt params: %v, want ErrInternal saying so", err)
	}
}

// TestParamChangeStoredAtItsHeight: a passed change of a later parameter
// is stored by the block that applies it (setParams) and read by the
// next; changing it back restores the stored form of the defaults.
func TestParamChangeStoredAtItsHeight(t *testing.T) {
	kv := NewMemKV()
	changes, _, err := (&Ledger{}).InitGenesis(kv, "c", Genesis{Params: DefaultParams()})
	if err != nil {
		t.Fatal(err)
	}
	kv.Apply(changes)
	genesisParams := slices.Clone(kv.Get(keyParams))

	p, err := GetParams(kv)
	if err != nil {
		t.Fatal(err)
	}
	np, err := ApplyParamChanges(p, []ParamChange{{Key: "service_max_failures", Value: 7}})
	if err != nil {
		t.Fatal(err)
	}
	o := NewOverlay(kv)
	if err := setParams(o, np); err != nil {
		t.Fatal(err)
	}
	kv.Apply(o.Changes())
	if got, _ := GetParams(kv); got.ServiceMaxFailures != 7 {
		t.Fatalf("service_max_failures = %d after the change, want 7", got.ServiceMaxFailures)
	}
	if err := CheckInvariants(kv); err != nil {
		t.Fatal(err)
	}
	back, err := ApplyParamChanges(np, []ParamChange{{Key: "service_max_failures", Value: defaultLaterParams.ServiceMaxFailures}})
	if err != nil {
		t.Fatal(err)
	}
	o = NewOverlay(kv)
	if err := setParams(o, back); err != nil {
		t.Fatal(err)
	}
	kv.Apply(o.Changes())
	if got := kv.Get(keyParams); string(got) != string(genesisParams) {
		t.Errorf("params changed back to the defaults store %s, want genesis' %s", got, genesisParams)
	}
}
