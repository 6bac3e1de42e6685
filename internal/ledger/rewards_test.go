package ledger

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// The rules of rewards.go, on a bare state: what an epoch mints and who
// gets it, the lazy settlement of the providers' share, and that rounding
// neither creates nor loses a usync. The market test (market_test.go)
// runs rewards end to end; here each step is checked on its own.

// genesisState returns the committed state of g on chain "c".
func genesisState(t *testing.T, g Genesis) *MemKV {
	t.Helper()
	kv := NewMemKV()
	changes, _, err := (&Ledger{}).InitGenesis(kv, "c", g)
	if err != nil {
		t.Fatalf("genesis: %v", err)
	}
	kv.Apply(changes)
	return kv
}

// consPriv is a deterministic consensus key.
func consPriv(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("ledger/cons/" + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// genesisValidator is a validator operated by op with the consensus key
// consPriv(name), bonded stake usync.
func genesisValidator(name string, op address.Address, stake uint64) GenesisValidator {
	priv := consPriv(name)
	return GenesisValidator{Operator: op, PubKey: priv.Public().(ed25519.PublicKey), Stake: stake, Moniker: name, PoP: SignValidatorPoP(priv, "c", op)}
}

// mustHold fails unless every invariant holds on kv (the supply, the
// reward pool against the epochs' rates, the open epoch's work).
func mustHold(t *testing.T, what string, kv KV) {
	t.Helper()
	if err := CheckInvariants(kv); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func balanceOf(t *testing.T, kv KV, a address.Address) uint64 {
	t.Helper()
	acct, err := GetAccount(kv, a)
	if err != nil {
		t.Fatal(err)
	}
	return acct.Balance
}

func TestEmission(t *testing.T) {
	p := DefaultParams()
	p.EmissionTarget = 1_000
	p.RewardFeeCapPPM = 500_000
	p.ValidatorFeeSharePPM = 200_000
	for _, tc := range []struct {
		name string
		d    EpochDemand
		want uint64
	}{
		{"no fees, nothing", EpochDemand{Fees: 0, Paid: 0}, 0},
		{"the fee cap binds", EpochDemand{Fees: 100, Paid: 10}, 50},
		{"target less paid", EpochDemand{Fees: 10_000, Paid: 400}, 600},
		{"paid reaches the target", EpochDemand{Fees: 10_000, Paid: 1_000}, 0},
		{"paid above the target", EpochDemand{Fees: 10_000, Paid: 5_000}, 0},
		{"cap rounds down", EpochDemand{Fees: 3, Paid: 0}, 1},
	} {
		if got := Emission(p, tc.d); got != tc.want {
			t.Errorf("%s: Emission(%+v) = %d, want %d", tc.name, tc.d, got, tc.want)
		}
	}
	// The fee cap stays below what the validators' share leaves of a fee.
	for _, tc := range []struct{ capPPM, sharePPM, want uint64 }{
		{500_000, 200_000, 500_000},
		{800_000, 200_000, 799_999},
		{900_000, 999_999, 0},
		{900_000, ppm, 0},
		{0, 0, 0},
	} {
		q := p
		q.RewardFeeCapPPM, q.ValidatorFeeSharePPM = tc.capPPM, tc.sharePPM
		if got := q.FeeCapPPM(); got != tc.want {
			t.Errorf("FeeCapPPM with cap %d and validator share %d = %d, want %d", tc.capPPM, tc.sharePPM, got, tc.want)
		}
	}
}

// TestRewardsSettleLazily: an epoch's end writes the same few keys
// whatever the number of providers with work; each provider's share is
// work × pool / total work, paid when it claims, records new work or
// forfeits; the last settlement sends the rounding to the treasury and
// the minted usync are all accounted for at every step.
func TestRewardsSettleLazily(t *testing.T) {
	owner := address.Address{0xEE}
	provs := []address.Address{{1}, {2}, {3}}
	g := Genesis{Params: DefaultParams(), Accounts: []GenesisAccount{{Address: owner, Balance: 1}}}
	g.Params.EmissionTarget = 1_000_000
	g.Params.RewardFeeCapPPM = 100_000
	for _, a := range provs {
		g.Accounts = append(g.Accounts, GenesisAccount{Address: a, Balance: 1})
	}
	kv := genesisState(t, g)
	p := g.Params.withLaterDefaults()
	o := NewOverlay(kv)
	job := &Job{Owner: owner}
	// Fees 1000 cap the emission at 100: 100 over 3 equal shares is 33
	// each and 1 of rounding.
	notePayment(o, job, &Assignment{Provider: provs[0]}, 10_000, 1_000)
	for _, a := range provs {
		if err := recordWork(o, job, &Assignment{Provider: a}, 7); err != nil {
			t.Fatal(err)
		}
	}
	// Self-dealt work and fees count for nothing.
	notePayment(o, &Job{Owner: provs[0]}, &Assignment{Provider: provs[0]}, 1_000_000, 100_000)
	if err := recordWork(o, &Job{Owner: provs[0]}, &Assignment{Provider: provs[0]}, 1_000_000); err != nil {
		t.Fatal(err)
	}
	if d := getEpochDemand(o); d != (EpochDemand{Fees: 1_000, Paid: 10_000, Work: 21, Providers: 3}) {
		t.Fatalf("open epoch's demand %+v", d)
	}
	mustHold(t, "work recorded", o)

	minted := Minted(o)
	end := NewOverlay(o)
	if _, err := endRewardsEpoch(end, p, BlockInfo{Height: 600}, GetEpoch(o)); err != nil {
		t.Fatal(err)
	}
	writes := end.Len()
	end.Flush(o)
	setEpoch(o, Epoch{Number: 1, StartHeight: 600})
	if got := Minted(o) - minted; got != 100 || RewardPool(o) != 100 {
		t.Fatalf("minted %d into a pool of %d, want 100 (the fee cap)", got, RewardPool(o))
	}
	mustHold(t, "epoch closed", o)
	for _, a := range provs {
		if got := PendingReward(o, a); got != 33 {
			t.Errorf("%s pending %d, want 33", a, got)
		}
	}

	// O(1): a hundred more providers with work cost the epoch's end no
	// more writes.
	o2 := NewOverlay(kv)
	notePayment(o2, job, &Assignment{Provider: provs[0]}, 10_000, 1_000)
	for i := range 100 {
		if err := recordWork(o2, job, &Assignment{Provider: address.Address{0x40, byte(i)}}, 7); err != nil {
			t.Fatal(err)
		}
	}
	end2 := NewOverlay(o2)
	if _, err := endRewardsEpoch(end2, p, BlockInfo{Height: 600}, GetEpoch(o2)); err != nil {
		t.Fatal(err)
	}
	if end2.Len() != writes {
		t.Errorf("the epoch's end wrote %d keys for 100 providers, %d for 3: want the same", end2.Len(), writes)
	}

	// provs[0] claims.
	treasury := Treasury(o)
	if _, err := execClaimRewards(o, provs[0], &MsgClaimRewards{}, p, BlockInfo{}); err != nil {
		t.Fatal(err)
	}
	if got := balanceOf(t, o, provs[0]) - 1; got != 33 || GetRewardWork(o, provs[0]).Rewarded != 33 || PendingReward(o, provs[0]) != 0 {
		t.Fatalf("claim paid %d (record %+v), want 33", got, GetRewardWork(o, provs[0]))
	}
	if _, err := execClaimRewards(o, provs[0], &MsgClaimRewards{}, p, BlockInfo{}); !errors.Is(err, ErrInvalidMsg) || !strings.Contains(err.Error(), "no rewards to claim") {
		t.Errorf("second claim: %v", err)
	}
	mustHold(t, "after a claim", o)

	// provs[1] records work in epoch 1: its epoch 0 share is settled first.
	if err := recordWork(o, job, &Assignment{Provider: provs[1]}, 5); err != nil {
		t.Fatal(err)
	}
	if got := balanceOf(t, o, provs[1]) - 1; got != 33 {
		t.Errorf("new work settled %d of the old epoch, want 33", got)
	}
	if w := GetRewardWork(o, provs[1]); w.Epoch != 1 || w.Work != 5 {
		t.Errorf("work record %+v, want epoch 1's 5", w)
	}
	if _, err := execClaimRewards(o, provs[1], &MsgClaimRewards{}, p, BlockInfo{}); !errors.Is(err, ErrInvalidMsg) || !strings.Contains(err.Error(), "the open epoch is 1") {
		t.Errorf("claim of the open epoch's work: %v", err)
	}
	mustHold(t, "after new work", o)

	// provs[2] is slashed: its share goes to the treasury, and as the
	// epoch's last it takes the rounding with it.
	if err := forfeitRewards(o, provs[2]); err != nil {
		t.Fatal(err)
	}
	if got := balanceOf(t, o, provs[2]); got != 1 {
		t.Errorf("a forfeiting provider got %d", got-1)
	}
	if got := Treasury(o) - treasury; got != 33+1 {
		t.Errorf("treasury got %d, want the forfeited 33 and 1 of rounding", got)
	}
	if _, ok := getEpochRate(o, 0); ok || RewardPool(o) != 0 {
		t.Errorf("after the epoch's last settlement: rate kept %v, pool %d", ok, RewardPool(o))
	}
	mustHold(t, "after the epoch settled", o)

	// Forfeiting open-epoch work takes it out of the epoch's demand.
	if err := forfeitRewards(o, provs[1]); err != nil {
		t.Fatal(err)
	}
	if d := getEpochDemand(o); d.Work != 0 || d.Providers != 0 {
		t.Errorf("demand %+v after the only worker forfeited", d)
	}
	mustHold(t, "after an open-epoch forfeit", o)
}

// TestRewardsValidatorShare: reward_validator_ppm of the emission is
// minted to the treasury and paid to the set by power, rounded down, the
// rounding kept by the treasury; with no verified work, nothing is minted
// for providers.
func TestRewardsValidatorShare(t *testing.T) {
	ops := []address.Address{{0x11}, {0x12}, {0x13}}
	g := Genesis{Params: DefaultParams()}
	g.Params.EmissionTarget = 1_000_000
	g.Params.RewardFeeCapPPM = 500_000
	g.Params.RewardValidatorPPM = 300_000
	for i, op := range ops {
		g.Accounts = append(g.Accounts, GenesisAccount{Address: op, Balance: 1})
		g.Validators = append(g.Validators, genesisValidator(string(rune('a'+i)), op, uint64(10+10*i)*g.Params.PowerUnit))
	}
	kv := genesisState(t, g)
	p := g.Params.withLaterDefaults()

	for _, withWork := range []bool{true, false} {
		o := NewOverlay(kv)
		notePayment(o, &Job{Owner: address.Address{0xEE}}, &Assignment{Provider: address.Address{1}}, 1, 20_000)
		if withWork {
			if err := recordWork(o, &Job{Owner: address.Address{0xEE}}, &Assignment{Provider: address.Address{1}}, 1); err != nil {
				t.Fatal(err)
			}
		}
		supply, treasury := Supply(o), Treasury(o)
		if _, err := endRewardsEpoch(o, p, BlockInfo{Height: 600}, GetEpoch(o)); err != nil {
			t.Fatal(err)
		}
		setEpoch(o, Epoch{Number: 1, StartHeight: 600}) // as endMarket does
		// Emission 10000 (half the fees); validators 3000 by power 10:20:30.
		var paid uint64
		for i, op := range ops {
			want := uint64(3_000 * (10 + 10*i) / 60)
			paid += want
			if got := balanceOf(t, o, op) - 1; got != want {
				t.Errorf("work %v: validator %d (power %d) got %d, want %d", withWork, i, 10+10*i, got, want)
			}
		}
		wantProviders := uint64(0)
		if withWork {
			wantProviders = 7_000
		}
		if got := RewardPool(o); got != wantProviders {
			t.Errorf("work %v: providers' pool %d, want %d", withWork, got, wantProviders)
		}
		if got := Supply(o) - supply; got != 3_000+wantProviders {
			t.Errorf("work %v: minted %d, want %d", withWork, got, 3_000+wantProviders)
		}
		if got := Treasury(o) - treasury; got != 3_000-paid {
			t.Errorf("work %v: treasury kept %d, want the rounding %d", withWork, got, 3_000-paid)
		}
		mustHold(t, "after the epoch", o)
	}
}

// TestBurnFees: fee_burn_ppm of the block's fees leaves the treasury and
// the supply, never more than the treasury holds.
func TestBurnFees(t *testing.T) {
	g := Genesis{Params: DefaultParams(), Treasury: 1_000, Accounts: []GenesisAccount{{Address: address.Address{1}, Balance: 1}}}
	g.Params.FeeBurnPPM = 250_000
	kv := genesisState(t, g)
	p := g.Params.withLaterDefaults()
	for _, tc := range []struct{ fees, want uint64 }{{0, 0}, {3, 0}, {400, 100}, {10_000, 1_000}} {
		o := NewOverlay(kv)
		setUint(o, keyBlockFees, tc.fees)
		burnFees(o, p)
		if got := 1_000 - Treasury(o); got != tc.want || Burned(o) != tc.want || Supply(kv)-Supply(o) != tc.want {
			t.Errorf("fees %d: treasury lost %d, burned %d, supply fell %d; want %d", tc.fees, got, Burned(o), Supply(kv)-Supply(o), tc.want)
		}
		o.Delete(keyBlockFees)
		mustHold(t, "after the burn", o)
	}
}

// TestRewardsInvariantCatches: the reward pool must be what the closed
// epochs owe, and the open epoch's totals the sum of its work records.
func TestRewardsInvariantCatches(t *testing.T) {
	g := Genesis{Params: DefaultParams(), Accounts: []GenesisAccount{{Address: address.Address{1}, Balance: 1}}}
	kv := genesisState(t, g)
	base := NewOverlay(kv)
	if err := recordWork(base, &Job{Owner: address.Address{0xEE}}, &Assignment{Provider: address.Address{1}}, 5); err != nil {
		t.Fatal(err)
	}
	mustHold(t, "valid", base)
	for _, tc := range []struct {
		name string
		edit func(o *Overlay)
		want string
	}{
		{"pool without a rate", func(o *Overlay) { mint(o, keyRewardPool, 10) }, "reward pool 10 != 0 the closed epochs owe"},
		{"rate without a pool", func(o *Overlay) { o.Set(rewardRateKey(0), appendUints(nil, 10, 5, 1, 0)) }, "reward pool 0 != 10"},
		{"work not counted", func(o *Overlay) {
			setRewardWork(o, address.Address{2}, RewardWork{Work: 3})
		}, "open epoch counts work 5 of 1 providers, the records 8 of 2"},
		{"demand without work", func(o *Overlay) { setEpochDemand(o, EpochDemand{Work: 6, Providers: 1}) }, "open epoch counts work 6"},
	} {
		o := NewOverlay(base)
		tc.edit(o)
		err := rewardsAddUp(&invariantState{kv: o})
		if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInternal saying %q", tc.name, err, tc.want)
		}
	}
}
