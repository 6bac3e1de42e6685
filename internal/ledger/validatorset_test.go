package ledger

import (
	"bytes"
	"crypto/ed25519"
	"slices"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// The rules of validatorset.go, step by step on a genesis state: which
// bonds make the set and with what power, how the stored set follows them
// (and when it does not), what evidence is ignored, how a slash follows
// the stake, and how fees are shared. validators_test.go runs the same
// through whole blocks.

// valState is a genesis with validators "a", "b", … bonded bonds[i] power
// units each (PowerUnit 1000, MinValidatorStake 2000), operated by
// addresses {0x10+i}, and tune applied to the params.
func valState(t *testing.T, tune func(*Params), bonds ...uint64) (*MemKV, Params) {
	t.Helper()
	g := Genesis{Params: DefaultParams(), Treasury: 1_000_000}
	g.Params.PowerUnit = 1_000
	g.Params.MinValidatorStake = 2_000
	g.Params.DowntimeWindow, g.Params.DowntimeMaxMissed = 10, 3
	g.Params.EvidenceMaxAgeBlocks, g.Params.ValidatorUnbondingBlocks = 20, 30
	if tune != nil {
		tune(&g.Params)
	}
	for i, b := range bonds {
		op := address.Address{0x10 + byte(i)}
		g.Accounts = append(g.Accounts, GenesisAccount{Address: op, Balance: 1})
		g.Validators = append(g.Validators, genesisValidator(string(rune('a'+i)), op, b*g.Params.PowerUnit))
	}
	return genesisState(t, g), g.Params.withLaterDefaults()
}

// consOf is the consensus address of validator name.
func consOf(name string) ConsAddress {
	return ConsAddressOf(consPriv(name).Public().(ed25519.PublicKey))
}

// powers is a set as name → power, over the names given.
func powers(set []ValidatorPower, names ...string) map[string]uint64 {
	out := map[string]uint64{}
	for _, vp := range set {
		for _, n := range names {
			if vp.Address == consOf(n) {
				out[n] = vp.Power
			}
		}
	}
	return out
}

func sameSet(got, want map[string]uint64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if w, ok := got[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func mustValidator(t *testing.T, kv KV, name string) *Validator {
	t.Helper()
	v, ok, err := GetValidator(kv, consOf(name))
	if err != nil || !ok {
		t.Fatalf("validator %s: %v (found %v)", name, err, ok)
	}
	return v
}

// TestDesiredSet: the max_validators largest bonds of at least
// min_validator_stake, power bond / power_unit rounded down, equal bonds
// ordered by consensus address, in consensus address order; jailed and
// tombstoned validators have no place.
func TestDesiredSet(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	kv, p := valState(t, nil, 5, 4, 4, 3, 2)
	// Half a power unit more is no more power.
	o := NewOverlay(kv)
	d := mustValidator(t, o, "d")
	old := *d
	d.Bond += p.PowerUnit / 2
	setValidator(o, &old, d)

	set := desiredSet(o, p)
	if !slices.IsSortedFunc(set, func(x, y ValidatorPower) int { return bytes.Compare(x.Address[:], y.Address[:]) }) {
		t.Errorf("set %v not in consensus address order", set)
	}
	if got, want := powers(set, names...), map[string]uint64{"a": 5, "b": 4, "c": 4, "d": 3, "e": 2}; !sameSet(got, want) {
		t.Errorf("all qualify: %v, want %v", got, want)
	}

	// b and c tie at 4: the cap of 2 keeps a and the lower address.
	tieWinner, tieLoser := "b", "c"
	if cb, cc := consOf("b"), consOf("c"); bytes.Compare(cc[:], cb[:]) < 0 {
		tieWinner, tieLoser = "c", "b"
	}
	q := p
	q.MaxValidators = 2
	if got, want := powers(desiredSet(o, q), names...), map[string]uint64{"a": 5, tieWinner: 4}; !sameSet(got, want) {
		t.Errorf("max 2: %v, want %v (%s loses the tie on its address)", got, want, tieLoser)
	}

	// The minimum stake cuts off from the bottom, at the bound included.
	q = p
	q.MinValidatorStake = 4 * p.PowerUnit
	if got, want := powers(desiredSet(o, q), names...), map[string]uint64{"a": 5, "b": 4, "c": 4}; !sameSet(got, want) {
		t.Errorf("min stake 4 units: %v, want %v", got, want)
	}
	q.PowerUnit = 2 * p.PowerUnit
	if got, want := powers(desiredSet(o, q), names...), map[string]uint64{"a": 2, "b": 2, "c": 2}; !sameSet(got, want) {
		t.Errorf("power unit doubled: %v, want %v (5/2 rounds down)", got, want)
	}

	// Jailed and tombstoned validators leave the index, and the set.
	for _, n := range []string{"a", "e"} {
		v := mustValidator(t, o, n)
		old := *v
		if n == "a" {
			v.Jailed = true
		} else {
			v.Tombstoned = true
		}
		setValidator(o, &old, v)
	}
	if got, want := powers(desiredSet(o, p), names...), map[string]uint64{"b": 4, "c": 4, "d": 3}; !sameSet(got, want) {
		t.Errorf("a jailed, e tombstoned: %v, want %v", got, want)
	}
}

// TestUpdateValidatorSet: the stored set becomes the desired one, and the
// changes (joins, leaves at power 0, new powers; nothing for the
// unchanged) come back in consensus address order; a validator that
// leaves forgets its missed blocks; a set no validator qualifies for stays
// as it was.
func TestUpdateValidatorSet(t *testing.T) {
	names := []string{"a", "b", "c"}
	kv, p := valState(t, func(p *Params) { p.MaxValidators = 2 }, 5, 4, 3)
	if got, want := powers(activeSet(kv), names...), map[string]uint64{"a": 5, "b": 4}; !sameSet(got, want) {
		t.Fatalf("genesis set %v, want %v", got, want)
	}
	o := NewOverlay(kv)
	if ups, err := updateValidatorSet(o, p); err != nil || len(ups) != 0 {
		t.Fatalf("nothing changed: updates %v, %v", ups, err)
	}

	// b misses a block, then c outbids it and a's power changes.
	b := mustValidator(t, o, "b")
	old := *b
	o.Set(valMissedKey(consOf("b"), 3), []byte{1})
	b.Missed = 1
	setValidator(o, &old, b)
	for n, bond := range map[string]uint64{"c": 6, "a": 7} {
		v := mustValidator(t, o, n)
		old := *v
		setUint(o, keyValBonded, ValidatorBonded(o)-v.Bond+bond*p.PowerUnit)
		setUint(o, keySupply, Supply(o)-v.Bond+bond*p.PowerUnit)
		setUint(o, keyGenesisSupply, getUint(o, keyGenesisSupply)-v.Bond+bond*p.PowerUnit)
		v.Bond = bond * p.PowerUnit
		setValidator(o, &old, v)
	}
	ups, err := updateValidatorSet(o, p)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	var order []ConsAddress
	for _, u := range ups {
		c := ConsAddressOf(u.PubKey)
		order = append(order, c)
		for _, n := range names {
			if c == consOf(n) {
				got[n] = u.Power
			}
		}
	}
	if want := map[string]uint64{"a": 7, "b": 0, "c": 6}; !sameSet(got, want) || len(ups) != 3 {
		t.Fatalf("updates %v, want %v", got, want)
	}
	if !slices.IsSortedFunc(order, func(x, y ConsAddress) int { return bytes.Compare(x[:], y[:]) }) {
		t.Errorf("updates not in consensus address order")
	}
	if got, want := powers(activeSet(o), names...), map[string]uint64{"a": 7, "c": 6}; !sameSet(got, want) {
		t.Errorf("stored set %v, want %v", got, want)
	}
	if b := mustValidator(t, o, "b"); b.Missed != 0 || o.Get(valMissedKey(consOf("b"), 3)) != nil {
		t.Errorf("b left the set still counting %d missed blocks", b.Missed)
	}
	mustHold(t, "after the update", o)

	// No one qualifies: the set stays, with no updates (CometBFT halts on
	// an empty set).
	q := p
	q.MinValidatorStake = 100 * p.PowerUnit
	before := activeSet(o)
	if ups, err := updateValidatorSet(o, q); err != nil || len(ups) != 0 || !slices.Equal(activeSet(o), before) {
		t.Errorf("no validator qualifies: updates %v (%v), set %v, want the set %v kept", ups, err, activeSet(o), before)
	}
}

// TestMisbehaviorIgnored: evidence that is too old, from the future or of
// height 0, against an unknown key or an already tombstoned validator
// changes nothing and says why.
func TestMisbehaviorIgnored(t *testing.T) {
	kv, p := valState(t, nil, 5, 4)
	info := BlockInfo{Height: 100}
	for _, tc := range []struct {
		name   string
		m      Misbehavior
		reason string
	}{
		{"height 0", Misbehavior{Address: consOf("a"), Height: 0}, "older than params.evidence_max_age_blocks 20"},
		{"from the future", Misbehavior{Address: consOf("a"), Height: 101}, "older than params.evidence_max_age_blocks"},
		{"one block too old", Misbehavior{Address: consOf("a"), Height: 100 - 21}, "older than params.evidence_max_age_blocks"},
		{"unknown key", Misbehavior{Address: consOf("z"), Height: 99}, "no such validator"},
	} {
		o := NewOverlay(kv)
		evs, err := handleMisbehavior(o, p, info, tc.m)
		if err != nil || len(evs) != 1 || evs[0].Type != "evidence_ignored" || !strings.Contains(attrOf(evs[0], "reason"), tc.reason) {
			t.Errorf("%s: events %v (%v), want evidence_ignored saying %q", tc.name, evs, err, tc.reason)
		}
		if o.Len() != 0 {
			t.Errorf("%s: ignored evidence wrote %d keys", tc.name, o.Len())
		}
	}
	// At the edge of the window it counts; a second time it is ignored.
	o := NewOverlay(kv)
	m := Misbehavior{Kind: MisbehaviorDuplicateVote, Address: consOf("a"), Height: 100 - 20}
	if evs, err := handleMisbehavior(o, p, info, m); err != nil || len(evs) != 1 || evs[0].Type != "validator_tombstoned" {
		t.Fatalf("evidence at the window's edge: %v %v", evs, err)
	}
	if evs, err := handleMisbehavior(o, p, info, m); err != nil || len(evs) != 1 || attrOf(evs[0], "reason") != "already tombstoned" {
		t.Fatalf("second evidence: %v %v", evs, err)
	}
}

func attrOf(e Event, key string) string {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

// TestSlashFollowsTheStake: double signing at height H slashes the bond and
// the unbonding entries started at or after H, not those started before;
// it all goes to the treasury and the totals follow.
func TestSlashFollowsTheStake(t *testing.T) {
	kv, p := valState(t, nil, 100, 50)
	o := NewOverlay(kv)
	a := mustValidator(t, o, "a")
	c := consOf("a")
	old := *a
	// Two withdrawals of 10 units, started at heights 40 and 60.
	for _, start := range []uint64{40, 60} {
		amt := 10 * p.PowerUnit
		a.Bond -= amt
		setUint(o, keyValBonded, ValidatorBonded(o)-amt)
		setUint(o, keyValUnbonding, ValidatorUnbonding(o)+amt)
		setValUnbond(o, ValidatorUnbondingEntry{Address: c, Amount: amt, StartHeight: start, CompletionHeight: start + p.ValidatorUnbondingBlocks})
	}
	setValidator(o, &old, a)
	if _, err := updateValidatorSet(o, p); err != nil {
		t.Fatal(err)
	}
	mustHold(t, "before the slash", o)

	treasury := Treasury(o)
	p.DoubleSignSlashPPM = 100_000 // 10%
	evs, err := handleMisbehavior(o, p, BlockInfo{Height: 70}, Misbehavior{Kind: MisbehaviorDuplicateVote, Address: c, Height: 50})
	if err != nil || len(evs) != 1 || evs[0].Type != "validator_tombstoned" {
		t.Fatalf("events %v, %v", evs, err)
	}
	a = mustValidator(t, o, "a")
	wantSlash := 8*p.PowerUnit + 1*p.PowerUnit // 10% of the 80 bonded and of the 10 unbonding since 60
	if a.Bond != 72*p.PowerUnit || a.Slashed != wantSlash || !a.Tombstoned || !a.Jailed {
		t.Errorf("after the slash: bond %d slashed %d tombstoned %v jailed %v; want 72000, %d, true, true", a.Bond, a.Slashed, a.Tombstoned, a.Jailed, wantSlash)
	}
	for _, u := range validatorUnbondings(o) {
		want := 10 * p.PowerUnit
		if u.StartHeight >= 50 {
			want = 9 * p.PowerUnit
		}
		if u.Amount != want {
			t.Errorf("unbonding started at %d: %d left, want %d", u.StartHeight, u.Amount, want)
		}
	}
	if got := Treasury(o) - treasury; got != wantSlash || attrOf(evs[0], "slashed") != "9000" {
		t.Errorf("treasury got %d (event says %s), want %d", got, attrOf(evs[0], "slashed"), wantSlash)
	}
	if _, err := updateValidatorSet(o, p); err != nil {
		t.Fatal(err)
	}
	mustHold(t, "after the slash", o)
}

// TestCountVote: a validator's missed blocks are counted in the slots of
// its window (signing again frees a slot), it is jailed and slashed on
// the miss past downtime_max_missed, and votes of validators outside the
// set are not counted.
func TestCountVote(t *testing.T) {
	kv, p := valState(t, func(p *Params) { p.MaxValidators = 1 }, 5, 4)
	o := NewOverlay(kv)
	miss := func(h int64, name string, signed bool) []Event {
		t.Helper()
		evs, err := beginValidators(o, p, BlockInfo{Height: h, Votes: []VoteInfo{{Address: consOf(name), Signed: signed}}})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	miss(1, "b", false) // b is not in the set of 1
	if v := mustValidator(t, o, "b"); v.Missed != 0 {
		t.Fatalf("a vote of a validator outside the set was counted: %d", v.Missed)
	}
	miss(1, "a", false)
	miss(1, "a", false) // the same slot again
	miss(2, "a", false)
	miss(2, "a", true) // signed after all: the slot is freed
	if v := mustValidator(t, o, "a"); v.Missed != 1 {
		t.Fatalf("missed %d, want 1 (slot 1)", v.Missed)
	}
	miss(3, "a", false)
	if evs := miss(4, "a", false); len(evs) != 0 {
		t.Fatalf("jailed at %d missed, the limit is %d: %v", mustValidator(t, o, "a").Missed, p.DowntimeMaxMissed, evs)
	}
	bond := mustValidator(t, o, "a").Bond
	evs := miss(15, "a", false) // slot 5: the fourth miss in the window
	if len(evs) != 1 || evs[0].Type != "validator_jailed" || attrOf(evs[0], "missed") != "4" {
		t.Fatalf("the fourth miss: %v", evs)
	}
	v := mustValidator(t, o, "a")
	if !v.Jailed || v.JailedUntil != 15+p.JailBlocks || v.Missed != 0 || v.Bond != bond-bond*p.DowntimeSlashPPM/ppm {
		t.Errorf("jailed %v until %d, missed %d, bond %d; want jailed until %d, missed cleared, slashed %d ppm", v.Jailed, v.JailedUntil, v.Missed, v.Bond, 15+p.JailBlocks, p.DowntimeSlashPPM)
	}
	// The jailed validator leaves the set for b at the block's end.
	ups, _, err := endValidators(o, p, BlockInfo{Height: 15})
	if err != nil || len(ups) != 2 {
		t.Fatalf("end of block: updates %v, %v", ups, err)
	}
	if got, want := powers(activeSet(o), "a", "b"), map[string]uint64{"b": 4}; !sameSet(got, want) {
		t.Errorf("set %v, want %v", got, want)
	}
	mustHold(t, "after the jailing", o)
}

// TestPayFeeShare: the share goes by power to the set's validators that
// are not jailed, never more than the treasury holds; the rounding stays
// in the treasury; a chain that does not manage validators pays nothing
// and still forgets the block's fees.
func TestPayFeeShare(t *testing.T) {
	kv, p := valState(t, func(p *Params) { p.ValidatorFeeSharePPM = 500_000 }, 3, 3, 3)
	o := NewOverlay(kv)
	c := mustValidator(t, o, "c")
	old := *c
	c.Jailed = true // jailed in this block: still in the stored set
	setValidator(o, &old, c)
	treasury := Treasury(o)
	if _, err := payFeeShare(o, p, 1_001); err != nil {
		t.Fatal(err)
	}
	for i, n := range []string{"a", "b", "c"} {
		want := uint64(250) // 500 by power 3:3, c jailed
		if n == "c" {
			want = 0
		}
		if got := balanceOf(t, o, address.Address{0x10 + byte(i)}) - 1; got != want {
			t.Errorf("%s got %d, want %d", n, got, want)
		}
	}
	if got := treasury - Treasury(o); got != 500 {
		t.Errorf("treasury paid %d, want 500", got)
	}

	// The share is capped by the treasury.
	o = NewOverlay(kv)
	setUint(o, keySupply, Supply(o)-Treasury(o)+10)
	setUint(o, keyGenesisSupply, getUint(o, keyGenesisSupply)-Treasury(o)+10)
	setUint(o, keyTreasury, 10)
	if _, err := payFeeShare(o, p, 1_000_000); err != nil {
		t.Fatal(err)
	}
	if Treasury(o) != 1 || balanceOf(t, o, address.Address{0x10})-1 != 3 {
		t.Errorf("a treasury of 10: paid down to %d, a got %d; want 3 each and 1 left", Treasury(o), balanceOf(t, o, address.Address{0x10})-1)
	}
	mustHold(t, "after a capped share", o)

	// No validators managed: the block's fees are forgotten all the same.
	plain := genesisState(t, Genesis{Params: DefaultParams(), Accounts: []GenesisAccount{{Address: address.Address{1}, Balance: 1}}})
	o = NewOverlay(plain)
	setUint(o, keyBlockFees, 500)
	if ups, evs, err := endValidators(o, DefaultParams(), BlockInfo{Height: 1}); ups != nil || evs != nil || err != nil || o.Get(keyBlockFees) != nil {
		t.Errorf("unmanaged chain: %v %v %v, block fees left %x", ups, evs, err, o.Get(keyBlockFees))
	}
}
