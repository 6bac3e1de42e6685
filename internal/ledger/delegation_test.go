package ledger_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

func valTarget(name string) (ledger.TargetKind, lt.Key) {
	return ledger.TargetValidator, lt.NewKey(name)
}

func delegateTx(k lt.Key, seq uint64, to string, amt uint64) []byte {
	kind, op := valTarget(to)
	return k.Tx(lt.ChainID, seq, 0, &ledger.MsgDelegate{Kind: kind, Target: op.Addr, Amount: ledger.Amount(amt)})
}

func undelegateTx(k lt.Key, seq uint64, from string, amt uint64) []byte {
	kind, op := valTarget(from)
	return k.Tx(lt.ChainID, seq, 0, &ledger.MsgUndelegate{Kind: kind, Target: op.Addr, Amount: ledger.Amount(amt)})
}

func redelegateTx(k lt.Key, seq uint64, from, to string, amt uint64) []byte {
	return k.Tx(lt.ChainID, seq, 0, &ledger.MsgRedelegate{FromKind: ledger.TargetValidator, From: lt.NewKey(from).Addr,
		ToKind: ledger.TargetValidator, To: lt.NewKey(to).Addr, Amount: ledger.Amount(amt)})
}

// worth is what k's delegation to validator name is worth.
func worth(t *testing.T, c *lt.Chain, k lt.Key, name string) uint64 {
	t.Helper()
	st, _, err := ledger.DelegationsOf(c.KV, k.Addr, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range st.Delegations {
		if d.Target.Kind == ledger.TargetValidator && d.Target.Address == lt.NewKey(name).Addr {
			return d.Amount
		}
	}
	return 0
}

func mustOK(t *testing.T, rs []ledger.TxResult) {
	t.Helper()
	for i, r := range rs {
		if r.Err != nil {
			t.Fatalf("tx %d: %v", i, r.Err)
		}
	}
}

// TestDelegationPowerAndUnbonding: a delegation adds to its validator's
// power (and the update CometBFT gets); undelegated stake leaves the power
// at once and returns to the balance after validator_unbonding_blocks;
// the minimum, the entry cap and a remainder below the minimum are
// refused.
func TestDelegationPowerAndUnbonding(t *testing.T) {
	g := valGenesis(30, 20, 10)
	g.Params.DelegationMaxEntries = 2
	c := lt.NewChain(t, g)
	alice := lt.NewKey("alice")
	bal := c.Balance(t, alice.Addr)
	mustOK(t, c.ApplyBlockWith(t, votes(t, c), nil, delegateTx(alice, 0, "v3", 25*sync)))
	if v := validator(t, c, "v3"); v.Bond != 10*sync || v.Delegated != 25*sync || v.Power != 35 {
		t.Fatalf("v3 after a 25 SYNC delegation: bond %d delegated %d power %d, want 10, 25, 35 SYNC", v.Bond, v.Delegated, v.Power)
	}
	if got := updatesOf(c.Updates, "v3"); got["v3"] != 35 {
		t.Fatalf("updates %v, want v3 at power 35", c.Updates)
	}
	if got := c.Balance(t, alice.Addr); got != bal-25*sync {
		t.Fatalf("alice's balance %d, want %d", got, bal-25*sync)
	}

	r := c.ApplyBlockWith(t, votes(t, c), nil,
		delegateTx(alice, 1, "v3", g.Params.DelegationMin-1), // below the minimum
		undelegateTx(alice, 2, "v3", 24*sync+1),              // leaves less than the minimum
		undelegateTx(alice, 3, "v3", 26*sync),                // more than it has
		undelegateTx(alice, 4, "v3", 5*sync))
	if !errors.Is(r[0].Err, ledger.ErrInvalidAmount) || !errors.Is(r[1].Err, ledger.ErrInvalidAmount) || !errors.Is(r[2].Err, ledger.ErrInsufficientStake) || r[3].Err != nil {
		t.Fatalf("below min, remainder below min, too much, 5 SYNC: %v; %v; %v; %v", r[0].Err, r[1].Err, r[2].Err, r[3].Err)
	}
	done := uint64(c.Height) + g.Params.ValidatorUnbondingBlocks
	if v := validator(t, c, "v3"); v.Power != 30 {
		t.Fatalf("v3 power %d after undelegating 5 SYNC, want 30", v.Power)
	}
	mustOK(t, c.ApplyBlockWith(t, votes(t, c), nil, undelegateTx(alice, 5, "v3", 5*sync)))
	r = c.ApplyBlockWith(t, votes(t, c), nil, undelegateTx(alice, 6, "v3", 5*sync))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) {
		t.Fatalf("a third unbonding entry with delegation_max_entries 2: %v", r[0].Err)
	}
	if ledger.DelegationUnbonding(c.KV) != 10*sync {
		t.Fatalf("unbonding %d, want 10 SYNC", ledger.DelegationUnbonding(c.KV))
	}
	before := c.Balance(t, alice.Addr)
	for uint64(c.Height)+1 < done {
		c.ApplyBlockWith(t, votes(t, c), nil)
	}
	if got := c.Balance(t, alice.Addr); got != before {
		t.Fatalf("unbonding paid back early: %d", got-before)
	}
	c.ApplyBlockWith(t, votes(t, c), nil)
	if got := c.Balance(t, alice.Addr) - before; got != 5*sync {
		t.Fatalf("at the completion height alice got back %d, want the first entry's 5 SYNC", got)
	}
	c.ApplyBlockWith(t, votes(t, c), nil)
	if got := c.Balance(t, alice.Addr) - before; got != 10*sync || ledger.DelegationUnbonding(c.KV) != 0 {
		t.Fatalf("alice got back %d, want 10 SYNC; %d still unbonding", got, ledger.DelegationUnbonding(c.KV))
	}
	// Undelegating all leaves no delegation, and v3 its own bond.
	mustOK(t, c.ApplyBlockWith(t, votes(t, c), nil, undelegateTx(alice, 7, "v3", 15*sync)))
	if v := validator(t, c, "v3"); v.Delegated != 0 || v.Power != 10 || worth(t, c, alice, "v3") != 0 {
		t.Fatalf("v3 after alice left: %+v", v)
	}
}

// TestDelegationsSlashed: a double signing slash takes its rate of the
// pool, of the unbonding entries made at or after the offence and of the
// redelegations made since (from their destination), not of what left
// before; a downtime slash takes its rate of the pool.
func TestDelegationsSlashed(t *testing.T) {
	g := valGenesis(30, 20, 10)
	c := lt.NewChain(t, g)
	alice, bob := lt.NewKey("alice"), lt.NewKey("bob")
	mustOK(t, c.ApplyBlockWith(t, votes(t, c), nil, delegateTx(alice, 0, "v1", 40*sync), alice.Send(1, bob.Addr, 100*sync)))
	mustOK(t, c.ApplyBlockWith(t, votes(t, c), nil, delegateTx(bob, 0, "v2", 10*sync), undelegateTx(alice, 2, "v1", 2*sync)))
	offence := c.Height + 1
	c.ApplyBlockWith(t, votes(t, c), nil)
	mustOK(t, c.ApplyBlockWith(t, votes(t, c), nil, undelegateTx(alice, 3, "v1", 3*sync), redelegateTx(alice, 4, "v1", "v2", 5*sync)))
	// No hopping: what came to v2 by redelegation stays there for now.
	r := c.ApplyBlockWith(t, votes(t, c), nil, redelegateTx(alice, 5, "v2", "v3", 5*sync))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) {
		t.Fatalf("redelegating stake that arrived by a redelegation: %v", r[0].Err)
	}
	if w := worth(t, c, alice, "v1"); w != 30*sync {
		t.Fatalf("alice's delegation to v1 worth %d, want 30 SYNC", w)
	}
	treasury := ledger.Treasury(c.KV)
	ev := ledger.Misbehavior{Kind: ledger.MisbehaviorDuplicateVote, Address: cons("v1"), Height: offence}
	c.ApplyBlockWith(t, votes(t, c), []ledger.Misbehavior{ev})
	rate := g.Params.DoubleSignSlashPPM
	cut := func(x uint64) uint64 { return x * rate / 1_000_000 }
	if w := worth(t, c, alice, "v1"); w != 30*sync-cut(30*sync) {
		t.Errorf("alice's delegation to v1 worth %d after the slash, want %d", w, 30*sync-cut(30*sync))
	}
	if w := worth(t, c, alice, "v2"); w != 5*sync-cut(5*sync) {
		t.Errorf("alice's redelegated stake on v2 worth %d, want %d", w, 5*sync-cut(5*sync))
	}
	if w := worth(t, c, bob, "v2"); w != 10*sync {
		t.Errorf("bob's delegation to v2 (not redelegated) worth %d, want 10 SYNC", w)
	}
	st, _, err := ledger.DelegationsOf(c.KV, alice.Addr, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Unbonding) != 1 || len(st.Unbonding[0].Entries) != 2 {
		t.Fatalf("alice's unbonding: %+v", st.Unbonding)
	}
	if e := st.Unbonding[0].Entries; e[0].Balance != 2*sync || e[1].Balance != 3*sync-cut(3*sync) {
		t.Errorf("unbonding entries %+v: want the one before the offence whole, the one after slashed", e)
	}
	want := cut(30*sync) /* v1's own bond */ + cut(30*sync) + cut(3*sync) + cut(5*sync)
	if got := ledger.Treasury(c.KV) - treasury; got != want {
		t.Errorf("treasury got %d, want %d", got, want)
	}
	if v := validator(t, c, "v1"); v.Delegated != 30*sync-cut(30*sync) || v.Bond != 30*sync-cut(30*sync) {
		t.Errorf("v1 after the slash: bond %d delegated %d", v.Bond, v.Delegated)
	}

	// Downtime: v3 with bob's delegation loses downtime_slash_ppm of it.
	mustOK(t, c.ApplyBlockWith(t, votes(t, c), nil, delegateTx(bob, 1, "v3", 20*sync)))
	for range 10 {
		c.ApplyBlockWith(t, votes(t, c, "v3"), nil)
		if validator(t, c, "v3").Jailed {
			break
		}
	}
	d := g.Params.DowntimeSlashPPM
	if w := worth(t, c, bob, "v3"); !validator(t, c, "v3").Jailed || w != 20*sync-20*sync*d/1_000_000 {
		t.Errorf("bob's delegation to v3 after its downtime: %d, want %d", w, 20*sync-20*sync*d/1_000_000)
	}
}

// TestDelegationRewards: a validator's fee share is split between its own
// bond and its pool by stake; its commission comes off the pool's part;
// the delegator is paid the rest on claim_rewards; a commission change
// is bounded and at most daily.
func TestDelegationRewards(t *testing.T) {
	g := valGenesis(30)
	g.Params.ValidatorFeeSharePPM = 200_000
	c := lt.NewChain(t, g)
	alice, bob, v1 := lt.NewKey("alice"), lt.NewKey("bob"), lt.NewKey("v1")
	r := c.ApplyBlockWith(t, votes(t, c), nil,
		v1.Tx(lt.ChainID, 0, 0, &ledger.MsgSetCommission{Kind: ledger.TargetValidator, PPM: g.Params.CommissionMaxPPM + 1}),
		v1.Tx(lt.ChainID, 1, 0, &ledger.MsgSetCommission{Kind: ledger.TargetValidator, PPM: 100_000}),
		delegateTx(alice, 0, "v1", 30*sync))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) || r[1].Err != nil || r[2].Err != nil {
		t.Fatalf("commission above the max, 10%%, delegate: %v; %v; %v", r[0].Err, r[1].Err, r[2].Err)
	}
	// A change a day at most, and by at most commission_max_change_ppm.
	r = c.ApplyBlockWith(t, votes(t, c), nil, v1.Tx(lt.ChainID, 2, 0, &ledger.MsgSetCommission{Kind: ledger.TargetValidator, PPM: 105_000}))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) {
		t.Fatalf("a second change within the day: %v", r[0].Err)
	}
	opBefore, aliceBefore := c.Balance(t, v1.Addr), c.Balance(t, alice.Addr)
	c.ApplyBlockWith(t, votes(t, c), nil, alice.Tx(lt.ChainID, 1, 1_000_000, &ledger.MsgSend{To: bob.Addr, Amount: 1}))
	// share 200,000: half to the pool (equal stakes), 10% of that commission.
	if got := c.Balance(t, v1.Addr) - opBefore; got != 110_000 {
		t.Errorf("operator got %d, want 100,000 for its bond + 10,000 commission", got)
	}
	if got := ledger.DelegationRewards(c.KV); got != 90_000 {
		t.Errorf("the pool holds %d, want 90,000", got)
	}
	aliceBefore -= 1_000_001
	mustOK(t, c.ApplyBlockWith(t, votes(t, c), nil, alice.Tx(lt.ChainID, 2, 0, &ledger.MsgClaimRewards{})))
	if got := c.Balance(t, alice.Addr) - aliceBefore; got != 90_000 {
		t.Errorf("alice claimed %d, want 90,000", got)
	}
	r = c.ApplyBlockWith(t, votes(t, c), nil, alice.Tx(lt.ChainID, 3, 0, &ledger.MsgClaimRewards{}))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) {
		t.Errorf("a second claim with nothing owed: %v", r[0].Err)
	}
	c.Advance(86_400e9)
	r = c.ApplyBlockWith(t, votes(t, c), nil,
		v1.Tx(lt.ChainID, 3, 0, &ledger.MsgSetCommission{Kind: ledger.TargetValidator, PPM: 100_000 + g.Params.CommissionMaxChangePPM + 1}),
		v1.Tx(lt.ChainID, 4, 0, &ledger.MsgSetCommission{Kind: ledger.TargetValidator, PPM: 100_000 + g.Params.CommissionMaxChangePPM}))
	if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) || r[1].Err != nil {
		t.Fatalf("a day later: a change above the max step, at it: %v; %v", r[0].Err, r[1].Err)
	}
}

// TestProviderDelegationBacksStake: a provider without the stake it needs
// becomes schedulable with delegations; its slash takes its rate of them.
func TestProviderDelegationBacksStake(t *testing.T) {
	g := lt.Genesis(1000*sync, "alice", "p1")
	c := lt.NewChain(t, g)
	alice, p1 := lt.NewKey("alice"), lt.NewKey("p1")
	info := lt.ProviderInfo("RTX4090", 1, 1_000_000)
	mustOK(t, c.ApplyBlock(t, p1.Tx(lt.ChainID, 0, 0, &ledger.MsgRegisterProvider{ProviderInfo: info})))
	need := g.Params.MinStakePerGPU
	mustOK(t, c.ApplyBlock(t, p1.Tx(lt.ChainID, 1, 0, &ledger.MsgStake{Amount: ledger.Amount(need / 4)})))
	pr, _, _ := ledger.GetProvider(c.KV, p1.Addr)
	if pr.Schedulable(g.Params) {
		t.Fatal("schedulable with a quarter of its stake")
	}
	mustOK(t, c.ApplyBlock(t, alice.Tx(lt.ChainID, 0, 0, &ledger.MsgDelegate{Kind: ledger.TargetProvider, Target: p1.Addr, Amount: ledger.Amount(need - need/4)})))
	pr, _, _ = ledger.GetProvider(c.KV, p1.Addr)
	if !pr.Schedulable(g.Params) || pr.Delegated != need-need/4 {
		t.Fatalf("with delegations: delegated %d, schedulable %v", pr.Delegated, pr.Schedulable(g.Params))
	}
}

// TestDelegatorsVote: delegated stake votes as its delegator voted, or,
// where the delegator did not vote, as its validator did; a delegator's
// vote decides a proposal its validator's vote would have passed, and a
// delegation that shrinks in the voting period moves its vote with it.
func TestDelegatorsVote(t *testing.T) {
	g := govGenesis()
	c := newGovChain(t, g)
	c.mustDo(t, "bob", &ledger.MsgDelegate{Kind: ledger.TargetValidator, Target: lt.NewKey("v1").Addr, Amount: 300 * sync})
	c.mustDo(t, "alice", &ledger.MsgDelegate{Kind: ledger.TargetValidator, Target: lt.NewKey("v2").Addr, Amount: 200 * sync})
	for _, withBob := range []bool{false, true} {
		id := uint64(1)
		if withBob {
			id = 2
		}
		c.mustDo(t, "alice", &ledger.MsgSubmitProposal{Kind: ledger.ProposalText, Title: "a text", Body: "why", Deposit: 10 * sync})
		c.mustDo(t, "v1", vote(id, ledger.VoteYes))
		c.mustDo(t, "v2", vote(id, ledger.VoteNo))
		wantYes, wantNo := uint64(400*sync), uint64(300*sync) // bob's 300 with v1, alice's 200 with v2
		if withBob {
			c.mustDo(t, "bob", vote(id, ledger.VoteNo))
			c.mustDo(t, "bob", &ledger.MsgUndelegate{Kind: ledger.TargetValidator, Target: lt.NewKey("v1").Addr, Amount: 50 * sync})
			wantYes, wantNo = 100*sync, 550*sync
		}
		c.until(t, int64(c.proposal(t, id).VotingEnd)+1)
		p := c.proposal(t, id)
		if p.Tally == nil || p.Tally.Yes != wantYes || p.Tally.No != wantNo {
			t.Fatalf("bob votes %v: tally %+v, want yes %d no %d", withBob, p.Tally, wantYes, wantNo)
		}
		if want := map[bool]string{false: ledger.ProposalPassed, true: ledger.ProposalRejected}[withBob]; p.Status != want {
			t.Fatalf("bob votes %v: %s, want %s", withBob, p.Status, want)
		}
	}
}

// TestDelegationProperty: random delegations, undelegations,
// redelegations, commission changes, claims, votes on a text proposal,
// downtime and double-signing evidence keep every invariant (checked after
// each block: the supply, the pools' shares and totals, the entries and
// their queues, the running tally and the delegated vote counts), the
// supply constant but for burned deposits, and two runs end with the same app hash.
func TestDelegationProperty(t *testing.T) {
	run := func(seed uint64) []byte {
		rng := rand.New(rand.NewPCG(seed, 7))
		vals := []string{"v1", "v2", "v3", "v4"}
		names := append(slices.Clone(vals), "alice", "bob")
		g := govGenesis()
		g.Params.MaxValidators = 3
		g.Params.ValidatorFeeSharePPM = 500_000
		g.Params.DelegationMaxEntries = 3
		g.Params.GovVotingBlocks = 30
		c := lt.NewChain(t, g)
		seq := map[string]uint64{}
		supply := ledger.Supply(c.KV)
		target := func() address.Address { return lt.NewKey(vals[rng.IntN(len(vals))]).Addr }
		for b := range 200 {
			var txs [][]byte
			for range rng.IntN(5) {
				n := names[rng.IntN(len(names))]
				k := lt.NewKey(n)
				amt := ledger.Amount(rng.Uint64N(30*sync) + 1)
				var m ledger.Msg
				switch rng.IntN(8) {
				case 0, 1:
					m = &ledger.MsgDelegate{Kind: ledger.TargetValidator, Target: target(), Amount: amt}
				case 2:
					m = &ledger.MsgUndelegate{Kind: ledger.TargetValidator, Target: target(), Amount: amt}
				case 3:
					m = &ledger.MsgRedelegate{FromKind: ledger.TargetValidator, From: target(), ToKind: ledger.TargetValidator, To: target(), Amount: amt}
				case 4:
					m = &ledger.MsgSetCommission{Kind: ledger.TargetValidator, PPM: rng.Uint64N(600_000)}
				case 5:
					m = &ledger.MsgClaimRewards{}
				case 6:
					m = vote(uint64(1+b/40), []string{ledger.VoteYes, ledger.VoteNo, ledger.VoteAbstain, ledger.VoteVeto}[rng.IntN(4)])
				default:
					if b%40 == 0 {
						m = &ledger.MsgSubmitProposal{Kind: ledger.ProposalText, Title: "t", Body: "b", Deposit: 10 * sync}
					} else {
						m = &ledger.MsgValidatorUnbond{Amount: ledger.Amount(rng.Uint64N(5*sync) + 1)}
					}
				}
				txs = append(txs, k.Tx(lt.ChainID, seq[n], rng.Uint64N(5_000), m))
				seq[n]++
			}
			var absent []string
			for _, n := range vals {
				if rng.IntN(4) == 0 {
					absent = append(absent, n)
				}
			}
			var ev []ledger.Misbehavior
			if rng.IntN(50) == 0 {
				ev = append(ev, ledger.Misbehavior{Kind: ledger.MisbehaviorDuplicateVote, Address: cons(vals[rng.IntN(len(vals))]), Height: max(1, c.Height-rng.Int64N(15))})
			}
			c.ApplyBlockWith(t, votes(t, c, absent...), ev, txs...)
			for _, n := range names {
				acct, _ := ledger.GetAccount(c.KV, lt.NewKey(n).Addr)
				seq[n] = acct.Sequence
			}
			if got := ledger.Supply(c.KV) + ledger.Burned(c.KV); got != supply { // vetoed deposits burn
				t.Fatalf("seed %d block %d: supply + burned %d, want %d", seed, c.Height, got, supply)
			}
		}
		if ledger.DelegatedTotal(c.KV) == 0 && ledger.DelegationUnbonding(c.KV) == 0 {
			t.Fatalf("seed %d: no delegation survived: the test exercised nothing", seed)
		}
		return c.Hash
	}
	for seed := range uint64(3) {
		if a, b := run(seed), run(seed); !bytes.Equal(a, b) {
			t.Fatalf("seed %d: app hashes differ", seed)
		}
	}
}

// TestProviderSlashShrinksDelegations: a provider outvoted on a job is
// slashed params.slash_bps of its stake, and its delegators as much of
// their delegations and of their unbonding entries from it (every entry
// still in its period: a provider's fault has no known height); what the
// delegators lose goes to the treasury, and the provider's delegated
// stake follows its pool.
func TestProviderSlashShrinksDelegations(t *testing.T) {
	c := verifyChain(t, 3, nil)
	target := ledger.Target{Kind: ledger.TargetProvider, Address: prov1.Addr}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgDelegate{Kind: target.Kind, Target: target.Address, Amount: 6_000_000})})
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgUndelegate{Kind: target.Kind, Target: target.Address, Amount: 1_000_000})})
	must(t, []ledger.TxResult{submit(t, c, spotJob("cheat"))})
	cheater := runReplicas(t, c, 1, 100, map[address.Address]bool{prov1.Addr: true})[0]
	if cheater.Addr != prov1.Addr {
		t.Fatalf("the cheapest provider should be the primary, got %s", cheater.Addr)
	}
	auditor := runReplicas(t, c, 1, 100, nil)[0]
	must(t, []ledger.TxResult{reveal(t, c, 1, cheater, true)})
	must(t, []ledger.TxResult{reveal(t, c, 1, auditor, false)})
	treasury := ledger.Treasury(c.KV)
	third := runReplicas(t, c, 1, 100, nil)[0]
	must(t, []ledger.TxResult{reveal(t, c, 1, third, false)})
	if p := provider(t, c, cheater); p.Slashed == 0 {
		t.Fatalf("the cheater was not slashed: %+v", p)
	}

	rate := ledger.DefaultParams().SlashBps // of 10,000
	wantDelegated := 5_000_000 - 5_000_000*rate/10_000
	wantUnbonding := 1_000_000 - 1_000_000*rate/10_000
	st, _, err := ledger.DelegationsOf(c.KV, consumer.Addr, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Delegations) != 1 || st.Delegations[0].Amount != wantDelegated {
		t.Errorf("the delegation after the slash: %+v; want %d usync", st.Delegations, wantDelegated)
	}
	if len(st.Unbonding) != 1 || len(st.Unbonding[0].Entries) != 1 || st.Unbonding[0].Entries[0].Balance != wantUnbonding {
		t.Errorf("the unbonding entry after the slash: %+v; want %d usync", st.Unbonding, wantUnbonding)
	}
	if p := provider(t, c, cheater); p.Delegated != wantDelegated {
		t.Errorf("the provider's delegated stake %d, want %d", p.Delegated, wantDelegated)
	}
	pool, err := ledger.GetDelegationPool(c.KV, target)
	if err != nil {
		t.Fatal(err)
	}
	lost := 6_000_000 - wantDelegated - wantUnbonding
	if pool.Tokens != wantDelegated || pool.Slashed != lost {
		t.Errorf("pool %+v; want tokens %d, slashed %d", pool, wantDelegated, lost)
	}
	// The treasury gains the delegators' loss besides its share of the
	// provider's own slash.
	if got := ledger.Treasury(c.KV) - treasury; got < lost {
		t.Errorf("the treasury gained %d, less than the delegators lost (%d)", got, lost)
	}
}
