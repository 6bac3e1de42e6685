package ledger_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

const sync = 1_000_000 // usync

// valGenesis is a chain with validators v1..vn bonded at stakes[i] SYNC,
// each operator holding 1000 SYNC, and a small downtime window.
func valGenesis(stakes ...uint64) ledger.Genesis {
	g := lt.Genesis(1000*sync, "alice")
	g.Params.DowntimeWindow = 10
	g.Params.DowntimeMaxMissed = 5
	g.Params.JailBlocks = 5
	g.Params.EvidenceMaxAgeBlocks = 20
	g.Params.ValidatorUnbondingBlocks = 30
	for i, s := range stakes {
		name := "v" + string(rune('1'+i))
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: lt.NewKey(name).Addr, Balance: 1000 * sync})
		g.Validators = append(g.Validators, lt.GenesisValidator(name, s*sync))
	}
	return g
}

func cons(name string) ledger.ConsAddress { return ledger.ConsAddressOf(lt.ConsKey(name)) }

// votes returns the last commit as CometBFT would report it for the set
// the ledger has, every validator signing but those named absent.
func votes(t *testing.T, c *lt.Chain, absent ...string) []ledger.VoteInfo {
	t.Helper()
	set, err := ledger.ActiveValidators(c.KV)
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.VoteInfo
	for _, v := range set {
		a := ledger.ConsAddressOf(v.PubKey)
		signed := true
		for _, n := range absent {
			if cons(n) == a {
				signed = false
			}
		}
		out = append(out, ledger.VoteInfo{Address: a, Signed: signed})
	}
	return out
}

func validator(t *testing.T, c *lt.Chain, name string) ledger.ValidatorInfo {
	t.Helper()
	vs, err := ledger.Validators(c.KV)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Address == cons(name) {
			return v
		}
	}
	t.Fatalf("no validator %s", name)
	return ledger.ValidatorInfo{}
}

// setOf returns the names (of candidates) in the set, sorted, with powers.
func setOf(t *testing.T, c *lt.Chain, candidates ...string) map[string]uint64 {
	t.Helper()
	set, err := ledger.ActiveValidators(c.KV)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, v := range set {
		for _, n := range candidates {
			if bytes.Equal(v.PubKey, lt.ConsKey(n)) {
				out[n] = v.Power
			}
		}
	}
	if len(out) != len(set) {
		t.Fatalf("set has %d validators, %d of them among %v", len(set), len(out), candidates)
	}
	return out
}

func updatesOf(ups []ledger.ValidatorUpdate, names ...string) map[string]uint64 {
	out := map[string]uint64{}
	for _, u := range ups {
		for _, n := range names {
			if bytes.Equal(u.PubKey, lt.ConsKey(n)) {
				out[n] = u.Power
			}
		}
	}
	return out
}

func equalMaps(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestGenesisValidatorSet(t *testing.T) {
	g := valGenesis(30, 20, 10)
	g.Params.MaxValidators = 2
	set, err := ledger.GenesisValidatorSet(lt.ChainID, g)
	if err != nil {
		t.Fatal(err)
	}
	c := lt.NewChain(t, g)
	if got, want := setOf(t, c, "v1", "v2", "v3"), map[string]uint64{"v1": 30, "v2": 20}; !equalMaps(got, want) {
		t.Fatalf("genesis set %v, want %v", got, want)
	}
	if len(set) != 2 {
		t.Fatalf("GenesisValidatorSet has %d validators, want 2", len(set))
	}
	// The stake is added to the supply, not taken from the balances.
	if got, want := ledger.Supply(c.KV), uint64(1000*sync*4+60*sync); got != want {
		t.Errorf("supply %d, want %d", got, want)
	}
	if got := c.Balance(t, lt.NewKey("v1").Addr); got != 1000*sync {
		t.Errorf("v1's balance %d, want 1000 SYNC", got)
	}
	if v := validator(t, c, "v3"); v.Status != ledger.StatusUnbonded || v.Power != 0 {
		t.Errorf("v3 (outbid): status %s power %d, want unbonded 0", v.Status, v.Power)
	}

	for _, tc := range []struct {
		name string
		edit func(*ledger.Genesis)
		want string
	}{
		{"one key twice", func(g *ledger.Genesis) {
			g.Validators[1].PubKey, g.Validators[1].PoP = g.Validators[0].PubKey, lt.PoP("v1", g.Validators[1].Operator)
		}, "already used"},
		{"one operator twice", func(g *ledger.Genesis) {
			g.Validators[1].Operator, g.Validators[1].PoP = g.Validators[0].Operator, lt.PoP("v2", g.Validators[0].Operator)
		}, "already has validator"},
		{"short key", func(g *ledger.Genesis) { g.Validators[0].PubKey = g.Validators[0].PubKey[:31] }, "31 bytes"},
		{"below minimum", func(g *ledger.Genesis) { g.Validators[2].Stake = g.Params.MinValidatorStake - 1 }, "min_validator_stake"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := valGenesis(30, 20, 10)
			tc.edit(&g)
			_, _, err := (&ledger.Ledger{}).InitGenesis(ledger.NewMemKV(), lt.ChainID, g)
			if !errors.Is(err, ledger.ErrInvalidGenesis) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want invalid genesis saying %q", err, tc.want)
			}
		})
	}
}

// TestValidatorSetSelection: the set is the max_validators largest bonds,
// ties broken by consensus address; End returns only the changes.
func TestValidatorSetSelection(t *testing.T) {
	g := valGenesis(30, 20, 10)
	g.Params.MaxValidators = 2
	c := lt.NewChain(t, g)
	c.ApplyBlockWith(t, votes(t, c), nil)
	if len(c.Updates) != 0 {
		t.Fatalf("a block that changes no bond returned updates %v", c.Updates)
	}
	// alice bonds 25 SYNC: she outbids v2, who leaves with power 0.
	alice := lt.NewKey("alice")
	r := c.ApplyBlockWith(t, votes(t, c), nil, alice.Tx(lt.ChainID, 0, 0, withMoniker(lt.CreateValidator(alice, "alice", 25*sync), "alice")))
	if r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if got, want := updatesOf(c.Updates, "alice", "v2"), map[string]uint64{"alice": 25, "v2": 0}; !equalMaps(got, want) || len(c.Updates) != 2 {
		t.Fatalf("updates %v, want %v", got, want)
	}
	// v3 bonds 15 more: 25 SYNC, a tie with alice, broken by the consensus
	// address.
	v3 := lt.NewKey("v3")
	if r := c.ApplyBlockWith(t, votes(t, c), nil, v3.Tx(lt.ChainID, 0, 0, &ledger.MsgValidatorBond{Amount: 15 * sync})); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	winner, loser := "alice", "v3"
	if bytes.Compare(func() []byte { a := cons("v3"); return a[:] }(), func() []byte { a := cons("alice"); return a[:] }()) < 0 {
		winner, loser = "v3", "alice"
	}
	if got, want := setOf(t, c, "v1", "v2", "v3", "alice"), map[string]uint64{"v1": 30, winner: 25}; !equalMaps(got, want) {
		t.Fatalf("set after a tie %v, want %v (%s loses on its consensus address)", got, want, loser)
	}
	// Power is bond / power_unit, rounded down.
	v1 := lt.NewKey("v1")
	if r := c.ApplyBlockWith(t, votes(t, c), nil, v1.Tx(lt.ChainID, 0, 0, &ledger.MsgValidatorBond{Amount: sync/2 + 1})); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if len(c.Updates) != 0 {
		t.Fatalf("half a power unit changed the set: %v", c.Updates)
	}
	if r := c.ApplyBlockWith(t, votes(t, c), nil, v1.Tx(lt.ChainID, 1, 0, &ledger.MsgValidatorBond{Amount: sync / 2})); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if got := updatesOf(c.Updates, "v1"); got["v1"] != 31 || len(c.Updates) != 1 {
		t.Fatalf("updates %v, want v1 at 31 only", c.Updates)
	}
}

// TestCreateValidatorRefusals: each refused create_validator names what is
// wrong and costs only its fee.
func TestCreateValidatorRefusals(t *testing.T) {
	g := valGenesis(30, 20)
	g.Params.MinFee = 1_000
	g.Params.ValidatorFeeSharePPM = 0 // alice is paid none of her own fees
	c := lt.NewChain(t, g)
	alice := lt.NewKey("alice")
	if r := c.ApplyBlock(t, alice.Tx(lt.ChainID, 0, 1_000, lt.CreateValidator(alice, "alice", 10*sync))); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	carol := lt.NewKey("carol")
	c.ApplyBlock(t, alice.Tx(lt.ChainID, 1, 1_000, &ledger.MsgSend{To: carol.Addr, Amount: 100 * sync}))
	for _, tc := range []struct {
		name string
		key  lt.Key
		msg  *ledger.MsgCreateValidator
		code error
		want string
	}{
		{"twice", alice, lt.CreateValidator(alice, "alice2", 10*sync), ledger.ErrInvalidMsg, "already has validator"},
		{"key in use", carol, lt.CreateValidator(carol, "v1", 10*sync), ledger.ErrInvalidMsg, "already used by another validator"},
		{"below minimum", carol, lt.CreateValidator(carol, "carol", 10*sync-1), ledger.ErrInsufficientStake, "below params.min_validator_stake 10000000usync"},
		{"short key", carol, func() *ledger.MsgCreateValidator {
			m := lt.CreateValidator(carol, "carol", 10*sync)
			m.PubKey = m.PubKey[:20]
			return m
		}(), ledger.ErrInvalidMsg, "20 bytes, want 32"},
		{"more than the balance", carol, lt.CreateValidator(carol, "carol", 200*sync), ledger.ErrInsufficientFunds, "cannot bond"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct, _ := ledger.GetAccount(c.KV, tc.key.Addr)
			supply, bonded := ledger.Supply(c.KV), ledger.ValidatorBonded(c.KV)
			r := c.ApplyBlock(t, tc.key.Tx(lt.ChainID, acct.Sequence, 1_000, tc.msg))
			if !errors.Is(r[0].Err, tc.code) || !strings.Contains(r[0].Err.Error(), tc.want) {
				t.Fatalf("got %v, want %v saying %q", r[0].Err, tc.code, tc.want)
			}
			fee := uint64(1_000)
			if tc.name == "short key" {
				fee = 0 // refused before the fee is charged (ValidateBasic)
			}
			if got := c.Balance(t, tc.key.Addr); got != acct.Balance-fee {
				t.Errorf("balance %d, want %d (only the fee)", got, acct.Balance-fee)
			}
			if ledger.Supply(c.KV) != supply || ledger.ValidatorBonded(c.KV) != bonded {
				t.Errorf("supply or bond changed")
			}
		})
	}
	// A chain whose genesis lists no validators keeps its set fixed.
	static := lt.NewChain(t, lt.Genesis(1000*sync, "alice"))
	r := static.ApplyBlock(t, alice.Tx(lt.ChainID, 0, 0, lt.CreateValidator(alice, "alice", 10*sync)))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) || !strings.Contains(r[0].Err.Error(), "fixed at genesis") {
		t.Fatalf("create_validator on a static chain: %v", r[0].Err)
	}
}

// TestDowntimeJails: a validator that misses more than
// downtime_max_missed of the last downtime_window blocks is jailed, loses
// downtime_slash_ppm of its bond and leaves the set; the chain's other
// validators are untouched.
func TestDowntimeJails(t *testing.T) {
	g := valGenesis(30, 20, 10)
	c := lt.NewChain(t, g)
	// Misses spread out: 5 in the window never jails.
	for i := range 20 {
		absent := []string{}
		if i%2 == 0 {
			absent = append(absent, "v3")
		}
		c.ApplyBlockWith(t, votes(t, c, absent...), nil)
		if v := validator(t, c, "v3"); v.Jailed {
			t.Fatalf("block %d: v3 jailed with %d missed, at most 5 of 10 allowed", c.Height, v.Missed)
		}
	}
	if v := validator(t, c, "v3"); v.Missed != 5 {
		t.Fatalf("v3 missed every other block: %d in the window, want 5", v.Missed)
	}
	treasury := ledger.Treasury(c.KV)
	for range 10 {
		c.ApplyBlockWith(t, votes(t, c, "v3"), nil)
		if validator(t, c, "v3").Jailed {
			break
		}
	}
	v := validator(t, c, "v3")
	slash := uint64(10*sync) * g.Params.DowntimeSlashPPM / 1_000_000
	if !v.Jailed || v.Status != ledger.StatusJailed || v.Bond != 10*sync-slash || v.Slashed != slash || v.Missed != 0 {
		t.Fatalf("v3 after 6 misses: %+v; want jailed, bond %d, missed cleared", v, 10*sync-slash)
	}
	if v.JailedUntil != uint64(c.Height)+g.Params.JailBlocks {
		t.Errorf("jailed until %d, want %d", v.JailedUntil, uint64(c.Height)+g.Params.JailBlocks)
	}
	if got := updatesOf(c.Updates, "v3"); len(c.Updates) != 1 || got["v3"] != 0 {
		t.Errorf("updates %v, want v3 removed", c.Updates)
	}
	if got := ledger.Treasury(c.KV) - treasury; got != slash {
		t.Errorf("treasury got %d, want the slash %d", got, slash)
	}
	// CometBFT keeps listing it (absent) for two more blocks: no effect.
	c.ApplyBlockWith(t, append(votes(t, c), ledger.VoteInfo{Address: cons("v3")}), nil)
	if v := validator(t, c, "v3"); v.Missed != 0 || v.Bond != 10*sync-slash {
		t.Fatalf("a jailed validator's absence counted: %+v", v)
	}
	for _, n := range []string{"v1", "v2"} {
		if v := validator(t, c, n); v.Status != ledger.StatusBonded || v.Slashed != 0 {
			t.Errorf("%s: %+v", n, v)
		}
	}
	// The slash left v3 below the minimum: it must bond more to unjail.
	for uint64(c.Height)+1 < v.JailedUntil {
		c.ApplyBlockWith(t, votes(t, c), nil)
	}
	v3 := lt.NewKey("v3")
	r := c.ApplyBlock(t, v3.Tx(lt.ChainID, 0, 0, &ledger.MsgUnjail{}))
	if !errors.Is(r[0].Err, ledger.ErrInsufficientStake) || !strings.Contains(r[0].Err.Error(), "bond more first") {
		t.Fatalf("unjail below the minimum stake: %v", r[0].Err)
	}
	r = c.ApplyBlock(t, v3.Tx(lt.ChainID, 1, 0, &ledger.MsgValidatorBond{Amount: sync}), v3.Tx(lt.ChainID, 2, 0, &ledger.MsgUnjail{}))
	if r[0].Err != nil || r[1].Err != nil {
		t.Fatalf("bond and unjail: %v, %v", r[0].Err, r[1].Err)
	}
	if got := updatesOf(c.Updates, "v3"); got["v3"] != 10 {
		t.Fatalf("updates %v, want v3 back at power 10", c.Updates)
	}
}

// TestUnjailRules: not before jail_blocks, not when not jailed, never when
// tombstoned; after it, the validator is back in the set.
func TestUnjailRules(t *testing.T) {
	g := valGenesis(30, 20, 12)
	c := lt.NewChain(t, g)
	v3, v2 := lt.NewKey("v3"), lt.NewKey("v2")
	r := c.ApplyBlock(t, v3.Tx(lt.ChainID, 0, 0, &ledger.MsgUnjail{}))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) || !strings.Contains(r[0].Err.Error(), "is not jailed") {
		t.Fatalf("unjail of a bonded validator: %v", r[0].Err)
	}
	for !validator(t, c, "v3").Jailed {
		c.ApplyBlockWith(t, votes(t, c, "v3"), nil)
	}
	until := validator(t, c, "v3").JailedUntil
	r = c.ApplyBlock(t, v3.Tx(lt.ChainID, 1, 0, &ledger.MsgUnjail{}))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) || !strings.Contains(r[0].Err.Error(), "jailed until height") {
		t.Fatalf("unjail in jail: %v", r[0].Err)
	}
	for uint64(c.Height)+1 < until {
		c.ApplyBlockWith(t, votes(t, c), nil)
	}
	r = c.ApplyBlockWith(t, votes(t, c), nil, v3.Tx(lt.ChainID, 2, 0, &ledger.MsgUnjail{}))
	if r[0].Err != nil {
		t.Fatalf("unjail at height %d (jailed until %d): %v", c.Height, until, r[0].Err)
	}
	if got := updatesOf(c.Updates, "v3"); got["v3"] != 11 {
		t.Fatalf("updates after unjail %v, want v3 back at power 11 (12 SYNC less 1%%)", c.Updates)
	}
	// A tombstoned validator can never unjail, even after jail_blocks.
	c.ApplyBlockWith(t, votes(t, c), []ledger.Misbehavior{{Kind: ledger.MisbehaviorDuplicateVote, Address: cons("v2"), Height: c.Height}})
	for range g.Params.JailBlocks + 1 {
		c.ApplyBlockWith(t, votes(t, c), nil)
	}
	r = c.ApplyBlock(t, v2.Tx(lt.ChainID, 0, 0, &ledger.MsgUnjail{}))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) || !strings.Contains(r[0].Err.Error(), "tombstoned") {
		t.Fatalf("unjail of a tombstoned validator: %v", r[0].Err)
	}
	// An operator with no validator.
	r = c.ApplyBlock(t, lt.NewKey("alice").Tx(lt.ChainID, 0, 0, &ledger.MsgUnjail{}))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) || !strings.Contains(r[0].Err.Error(), "operates no validator") {
		t.Fatalf("unjail by a non-operator: %v", r[0].Err)
	}
}

// TestDoubleSign: evidence slashes double_sign_slash_ppm of the bond and
// of what is unbonding since the offence, tombstones the validator and
// removes it from the set; evidence older than evidence_max_age_blocks,
// and a second piece of evidence, are ignored.
func TestDoubleSign(t *testing.T) {
	g := valGenesis(30, 20, 10)
	c := lt.NewChain(t, g)
	for range 30 {
		c.ApplyBlockWith(t, votes(t, c), nil)
	}
	// v1 withdraws 10 SYNC before the offence, 4 after: only the 4 are
	// slashed with the bond.
	v1 := lt.NewKey("v1")
	c.ApplyBlockWith(t, votes(t, c), nil, v1.Tx(lt.ChainID, 0, 0, &ledger.MsgValidatorUnbond{Amount: 10 * sync}))
	offence := c.Height + 1
	c.ApplyBlockWith(t, votes(t, c), nil)
	c.ApplyBlockWith(t, votes(t, c), nil, v1.Tx(lt.ChainID, 1, 0, &ledger.MsgValidatorUnbond{Amount: 4 * sync}))

	// Too old: ignored, nothing slashed.
	old := ledger.Misbehavior{Kind: ledger.MisbehaviorDuplicateVote, Address: cons("v2"), Height: c.Height + 1 - int64(g.Params.EvidenceMaxAgeBlocks) - 1}
	c.ApplyBlockWith(t, votes(t, c), []ledger.Misbehavior{old})
	if v := validator(t, c, "v2"); v.Tombstoned || v.Slashed != 0 {
		t.Fatalf("evidence older than the window slashed v2: %+v", v)
	}

	supply, treasury := ledger.Supply(c.KV), ledger.Treasury(c.KV)
	ev := ledger.Misbehavior{Kind: ledger.MisbehaviorDuplicateVote, Address: cons("v1"), Height: offence}
	c.ApplyBlockWith(t, votes(t, c), []ledger.Misbehavior{ev})
	v := validator(t, c, "v1")
	rate := g.Params.DoubleSignSlashPPM
	fromBond := 16 * sync * rate / 1_000_000
	fromUnbonding := 4 * sync * rate / 1_000_000
	if !v.Tombstoned || v.Status != ledger.StatusTombstoned || v.Power != 0 || v.Bond != 16*sync-fromBond || v.Slashed != fromBond+fromUnbonding {
		t.Fatalf("v1 after double signing: %+v; want tombstoned, bond %d, slashed %d", v, 16*sync-fromBond, fromBond+fromUnbonding)
	}
	if v.Unbonding != 14*sync-fromUnbonding {
		t.Errorf("v1 unbonding %d, want %d (the 10 SYNC withdrawn before the offence untouched)", v.Unbonding, 14*sync-fromUnbonding)
	}
	if got := updatesOf(c.Updates, "v1"); len(c.Updates) != 1 || got["v1"] != 0 {
		t.Errorf("updates %v, want v1 removed", c.Updates)
	}
	if ledger.Supply(c.KV) != supply || ledger.Treasury(c.KV)-treasury != fromBond+fromUnbonding {
		t.Errorf("slash went to the treasury %d, want %d; supply %d → %d", ledger.Treasury(c.KV)-treasury, fromBond+fromUnbonding, supply, ledger.Supply(c.KV))
	}
	// The same evidence again (another node's copy): ignored.
	c.ApplyBlockWith(t, votes(t, c), []ledger.Misbehavior{ev})
	if v2 := validator(t, c, "v1"); v2.Slashed != v.Slashed {
		t.Fatalf("slashed twice: %d then %d", v.Slashed, v2.Slashed)
	}
	// A tombstoned validator may still withdraw, but not bond again.
	r := c.ApplyBlock(t, v1.Tx(lt.ChainID, 2, 0, &ledger.MsgValidatorBond{Amount: sync}))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) {
		t.Fatalf("bond to a tombstoned validator: %v", r[0].Err)
	}
	bal := c.Balance(t, v1.Addr)
	r = c.ApplyBlock(t, v1.Tx(lt.ChainID, 3, 0, &ledger.MsgValidatorUnbond{Amount: ledger.Amount(v.Bond)}))
	if r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	for range g.Params.ValidatorUnbondingBlocks {
		c.ApplyBlockWith(t, votes(t, c), nil)
	}
	if got, want := c.Balance(t, v1.Addr)-bal, v.Bond+v.Unbonding; got != want {
		t.Errorf("v1 got back %d, want its bond and unbonding %d", got, want)
	}
}

// TestUnbondingOutlastsEvidence: params refuse an unbonding period not
// longer than the evidence window; withdrawn stake returns only after it.
func TestUnbondingOutlastsEvidence(t *testing.T) {
	p := ledger.DefaultParams()
	if p.ValidatorUnbondingBlocks <= p.EvidenceMaxAgeBlocks {
		t.Fatalf("default unbonding %d not longer than evidence window %d", p.ValidatorUnbondingBlocks, p.EvidenceMaxAgeBlocks)
	}
	p.ValidatorUnbondingBlocks = p.EvidenceMaxAgeBlocks
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "validator_unbonding_blocks") {
		t.Fatalf("unbonding = evidence window: %v", err)
	}
	g := valGenesis(30, 20)
	c := lt.NewChain(t, g)
	v2 := lt.NewKey("v2")
	bal := c.Balance(t, v2.Addr)
	c.ApplyBlock(t, v2.Tx(lt.ChainID, 0, 0, &ledger.MsgValidatorUnbond{Amount: 20 * sync}))
	if got := setOf(t, c, "v1", "v2"); len(got) != 1 {
		t.Fatalf("v2 withdrew its whole bond but is in the set %v", got)
	}
	start := c.Height
	for c.Height < start+int64(g.Params.ValidatorUnbondingBlocks)-1 {
		c.ApplyBlock(t)
		if c.Balance(t, v2.Addr) != bal {
			t.Fatalf("stake back at height %d, before the unbonding period (%d blocks from %d)", c.Height, g.Params.ValidatorUnbondingBlocks, start)
		}
	}
	// Evidence at the edge of the window still finds it.
	c.ApplyBlock(t)
	if got := c.Balance(t, v2.Addr) - bal; got != 20*sync {
		t.Fatalf("after the unbonding period v2 got %d, want 20 SYNC", got)
	}
}

// TestFeeShare: validator_fee_share_ppm of the block's fees goes to the
// set by power, rounded down; the rest stays in the treasury.
func TestFeeShare(t *testing.T) {
	g := valGenesis(10, 20, 40)
	g.Params.ValidatorFeeSharePPM = 333_333
	c := lt.NewChain(t, g)
	alice, bob := lt.NewKey("alice"), lt.NewKey("bob")
	before := map[string]uint64{}
	for _, n := range []string{"v1", "v2", "v3"} {
		before[n] = c.Balance(t, lt.NewKey(n).Addr)
	}
	treasury := ledger.Treasury(c.KV)
	fees := uint64(12_345 + 67_891)
	c.ApplyBlockWith(t, votes(t, c), nil,
		alice.Tx(lt.ChainID, 0, 12_345, &ledger.MsgSend{To: bob.Addr, Amount: 1}),
		alice.Tx(lt.ChainID, 1, 67_891, &ledger.MsgSend{To: bob.Addr, Amount: 1}))
	share := fees * 333_333 / 1_000_000
	var paid uint64
	for n, power := range map[string]uint64{"v1": 10, "v2": 20, "v3": 40} {
		want := share * power / 70
		paid += want
		if got := c.Balance(t, lt.NewKey(n).Addr) - before[n]; got != want {
			t.Errorf("%s (power %d) got %d, want %d", n, power, got, want)
		}
	}
	if got := ledger.Treasury(c.KV) - treasury; got != fees-paid {
		t.Errorf("treasury kept %d, want %d (fees %d, paid %d)", got, fees-paid, fees, paid)
	}
	// A block with no fees pays nothing, and a failed tx's fee counts.
	c.ApplyBlockWith(t, votes(t, c), nil)
	if got := c.Balance(t, lt.NewKey("v3").Addr) - before["v3"]; got != share*40/70 {
		t.Errorf("v3 paid again in a block without fees: %d", got)
	}
}

// TestValidatorSupplyProperty: random sequences of validator txs, votes
// and evidence keep every invariant (ApplyBlockWith checks them after
// each block), the supply included; and two runs give the same app hash.
func TestValidatorSupplyProperty(t *testing.T) {
	run := func(seed uint64) []byte {
		rng := rand.New(rand.NewPCG(seed, 1))
		names := []string{"v1", "v2", "v3", "v4", "alice", "bob"}
		g := valGenesis(30, 20, 10, 12)
		g.Params.MaxValidators = 3
		g.Params.ValidatorFeeSharePPM = 500_000
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: lt.NewKey("bob").Addr, Balance: 1000 * sync})
		c := lt.NewChain(t, g)
		seq := map[string]uint64{}
		supply := ledger.Supply(c.KV)
		for range 150 {
			var txs [][]byte
			for range rng.IntN(4) {
				n := names[rng.IntN(len(names))]
				k := lt.NewKey(n)
				var m ledger.Msg
				switch rng.IntN(5) {
				case 0:
					m = lt.CreateValidator(k, n, rng.Uint64N(40*sync)+1)
				case 1:
					m = &ledger.MsgValidatorBond{Amount: ledger.Amount(rng.Uint64N(20*sync) + 1)}
				case 2:
					m = &ledger.MsgValidatorUnbond{Amount: ledger.Amount(rng.Uint64N(20*sync) + 1)}
				case 3:
					m = &ledger.MsgUnjail{}
				default:
					m = &ledger.MsgSend{To: lt.NewKey(names[rng.IntN(len(names))]).Addr, Amount: ledger.Amount(rng.Uint64N(sync) + 1)}
				}
				txs = append(txs, k.Tx(lt.ChainID, seq[n], rng.Uint64N(5_000), m))
				seq[n]++
			}
			var absent []string
			for _, n := range names {
				if rng.IntN(3) == 0 {
					absent = append(absent, n)
				}
			}
			var ev []ledger.Misbehavior
			if rng.IntN(40) == 0 {
				ev = append(ev, ledger.Misbehavior{Kind: ledger.MisbehaviorLightClientAttack, Address: cons(names[rng.IntN(len(names))]), Height: max(1, c.Height-rng.Int64N(30))})
			}
			c.ApplyBlockWith(t, votes(t, c, absent...), ev, txs...)
			for _, n := range names {
				acct, _ := ledger.GetAccount(c.KV, lt.NewKey(n).Addr)
				seq[n] = acct.Sequence // a tx whose envelope failed used none
			}
			if ledger.Supply(c.KV) != supply {
				t.Fatalf("seed %d block %d: supply %d, want %d", seed, c.Height, ledger.Supply(c.KV), supply)
			}
			if len(c.Updates) > 0 && !slices.IsSortedFunc(c.Updates, func(a, b ledger.ValidatorUpdate) int {
				x, y := ledger.ConsAddressOf(a.PubKey), ledger.ConsAddressOf(b.PubKey)
				return bytes.Compare(x[:], y[:])
			}) {
				t.Fatalf("updates not in consensus address order")
			}
		}
		return c.Hash
	}
	for seed := range uint64(4) {
		if a, b := run(seed), run(seed); !bytes.Equal(a, b) {
			t.Fatalf("seed %d: app hashes differ", seed)
		}
	}
}
