package ledger

import (
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// TestDelegatorClaimsValidatorAndProviderRewards: a delegator to a
// validator and to a provider accrues, after each one's commission, its
// share of the validator's emission share and of the provider's epoch
// reward (split at the provider's settlement); the queries show exactly
// that pending, and claim_rewards pays exactly it and empties the pools.
func TestDelegatorClaimsValidatorAndProviderRewards(t *testing.T) {
	op, prov, del, owner := address.Address{0x11}, address.Address{1}, address.Address{0xDD}, address.Address{0xEE}
	g := Genesis{Params: DefaultParams()}
	g.Params.EmissionTarget = 1_000_000
	g.Params.RewardFeeCapPPM = 500_000
	g.Params.RewardValidatorPPM = 300_000
	g.Accounts = []GenesisAccount{{Address: op, Balance: 1}, {Address: prov, Balance: 100 * g.Params.PowerUnit}, {Address: del, Balance: 100 * g.Params.PowerUnit}}
	g.Validators = []GenesisValidator{genesisValidator("a", op, 10*g.Params.PowerUnit)}
	kv := genesisState(t, g)
	p := g.Params.withLaterDefaults()
	o := NewOverlay(kv)

	// The provider stakes 30 SYNC and takes 20% commission, the
	// validator's bond is 10 SYNC and it takes 10%; the delegator gives
	// each 10 SYNC: half the validator's stake, a quarter of the
	// provider's.
	setProvider(o, &Provider{Address: prov})
	if _, err := execStake(o, prov, &MsgStake{Amount: Amount(30 * p.PowerUnit)}); err != nil {
		t.Fatal(err)
	}
	for _, tg := range []Target{{TargetValidator, op}, {TargetProvider, prov}} {
		if _, err := execDelegate(o, del, &MsgDelegate{Kind: tg.Kind, Target: tg.Address, Amount: Amount(10 * p.PowerUnit)}, p); err != nil {
			t.Fatal(err)
		}
	}
	for tg, c := range map[Target]uint64{{TargetValidator, op}: 100_000, {TargetProvider, prov}: 200_000} {
		pool, err := GetDelegationPool(o, tg)
		if err != nil {
			t.Fatal(err)
		}
		pool.CommissionPPM = c
		if err := setPool(o, tg, pool); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := updateValidatorSet(o, p); err != nil { // as the block's end does
		t.Fatal(err)
	}

	// Fees 20,000: emission 10,000, 3,000 to the validator, 7,000 to the
	// providers' pool for the provider's work.
	notePayment(o, &Job{Owner: owner}, &Assignment{Provider: prov}, 1, 20_000)
	if err := recordWork(o, &Job{Owner: owner}, &Assignment{Provider: prov}, 1); err != nil {
		t.Fatal(err)
	}
	opBefore := balanceOf(t, o, op)
	if _, err := endRewardsEpoch(o, p, BlockInfo{Height: 600}, GetEpoch(o)); err != nil {
		t.Fatal(err)
	}
	setEpoch(o, Epoch{Number: 1, StartHeight: 600})
	// The validator's 3,000: 1,500 for its bond, 1,500 for its pool less
	// 150 commission.
	if got := balanceOf(t, o, op) - opBefore; got != 1_500+150 {
		t.Errorf("validator's operator got %d, want 1650 (its bond's half and 10%% of the pool's)", got)
	}
	// The provider's 7,000 reaches its pool when it settles: a quarter,
	// 1,750, less 350 commission.
	provBefore := balanceOf(t, o, prov)
	if _, err := execClaimRewards(o, prov, &MsgClaimRewards{}, p, BlockInfo{}); err != nil {
		t.Fatal(err)
	}
	if got := balanceOf(t, o, prov) - provBefore; got != 5_250+350 {
		t.Errorf("provider got %d, want 5600 (its stake's three quarters and 20%% of the pool's)", got)
	}

	const wantVal, wantProv = 1_350, 1_400
	st, _, err := DelegationsOf(o, del, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[TargetKind]uint64{}
	for _, d := range st.Delegations {
		got[d.Target.Kind] = d.PendingRewards
	}
	if got[TargetValidator] != wantVal || got[TargetProvider] != wantProv {
		t.Errorf("pending: validator %d, provider %d; want %d and %d", got[TargetValidator], got[TargetProvider], wantVal, wantProv)
	}
	if tot, err := DelegationTotalsOf(o, del); err != nil || tot.PendingRewards != wantVal+wantProv {
		t.Errorf("pending in all: %d (%v), want %d", tot.PendingRewards, err, wantVal+wantProv)
	}
	mustHold(t, "rewards accrued", o)

	before := balanceOf(t, o, del)
	if _, err := execClaimRewards(o, del, &MsgClaimRewards{}, p, BlockInfo{}); err != nil {
		t.Fatal(err)
	}
	if got := balanceOf(t, o, del) - before; got != wantVal+wantProv {
		t.Errorf("claim_rewards paid the delegator %d, want %d", got, wantVal+wantProv)
	}
	if got := DelegationRewards(o); got != 0 {
		t.Errorf("the pools still hold %d after the claim, want 0", got)
	}
	if tot, _ := DelegationTotalsOf(o, del); tot.PendingRewards != 0 {
		t.Errorf("pending after the claim: %d", tot.PendingRewards)
	}
	mustHold(t, "rewards claimed", o)
}
