package ledger_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// govGenesis: validators v1..v4 bonded 100 SYNC each (400 SYNC of voting
// stake), alice and bob with 1000 SYNC and no stake, a treasury of 500
// SYNC, periods of 5 blocks and a minimum deposit of 10 SYNC.
func govGenesis() ledger.Genesis {
	g := valGenesis(100, 100, 100, 100)
	g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: lt.NewKey("bob").Addr, Balance: 1000 * sync})
	g.Treasury = 500 * sync
	g.Params.GovDepositBlocks = 5
	g.Params.GovVotingBlocks = 5
	g.Params.GovMinDeposit = 10 * sync
	return g
}

// govChain is a chain that signs governance txs by key name.
type govChain struct{ *lt.Chain }

func newGovChain(t *testing.T, g ledger.Genesis) *govChain { return &govChain{lt.NewChain(t, g)} }

// tx signs msg by key name with the sequence its account expects (one tx
// per key per block).
func (c *govChain) tx(name string, msg ledger.Msg) []byte {
	k := lt.NewKey(name)
	a, err := ledger.GetAccount(c.KV, k.Addr)
	if err != nil {
		panic(err)
	}
	return k.Tx(lt.ChainID, a.Sequence, 0, msg)
}

// do applies one tx in its own block and returns its result.
func (c *govChain) do(t *testing.T, name string, msg ledger.Msg) ledger.TxResult {
	t.Helper()
	return c.ApplyBlock(t, c.tx(name, msg))[0]
}

func (c *govChain) mustDo(t *testing.T, name string, msg ledger.Msg) ledger.TxResult {
	t.Helper()
	r := c.do(t, name, msg)
	if r.Err != nil {
		t.Fatalf("%s %T: %v", name, msg, r.Err)
	}
	return r
}

func (c *govChain) proposal(t *testing.T, id uint64) *ledger.Proposal {
	t.Helper()
	p, ok, err := ledger.GetProposal(c.KV, id)
	if err != nil || !ok {
		t.Fatalf("proposal %d: %v (found %v)", id, err, ok)
	}
	return p
}

func (c *govChain) params(t *testing.T) ledger.Params {
	t.Helper()
	p, err := ledger.GetParams(c.KV)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// until applies empty blocks until height h has been applied.
func (c *govChain) until(t *testing.T, h int64) {
	t.Helper()
	for c.Height < h {
		c.ApplyBlock(t)
	}
}

func paramProposal(deposit uint64, changes ...ledger.ParamChange) *ledger.MsgSubmitProposal {
	return &ledger.MsgSubmitProposal{Kind: ledger.ProposalParam, Title: "change params", Changes: changes, Deposit: ledger.Amount(deposit)}
}

func vote(id uint64, option string) *ledger.MsgVote {
	return &ledger.MsgVote{ProposalID: id, Option: option}
}

// TestGovParamChangeApplied: a parameter proposal with its full deposit
// votes at once; three of four validators vote yes; the change applies
// from the block after the voting period's end, not before, and the
// deposit comes back whole.
func TestGovParamChangeApplied(t *testing.T) {
	c := newGovChain(t, govGenesis())
	alice := lt.NewKey("alice").Addr
	before := c.Balance(t, alice)
	supply := ledger.Supply(c.KV)
	r := c.mustDo(t, "alice", paramProposal(10*sync, ledger.ParamChange{Key: "protocol_fee_bps", Value: 150}))
	p := c.proposal(t, 1)
	if p.Status != ledger.ProposalVoting || p.VotingEnd != uint64(c.Height)+5 || p.Deposit != 10*sync {
		t.Fatalf("after submit: %+v, want voting until %d with 10 SYNC", p, c.Height+5)
	}
	if !govHasEvent(r.Events, "proposal_voting") {
		t.Errorf("submit events %v: no proposal_voting", r.Events)
	}
	for _, v := range []string{"v1", "v2", "v3"} {
		c.mustDo(t, v, vote(1, ledger.VoteYes))
	}
	c.until(t, int64(p.VotingEnd))
	if got := c.params(t).ProtocolFeeBps; got != 100 {
		t.Fatalf("protocol_fee_bps is %d at the voting period's last height, want the old 100", got)
	}
	b := c.L.BeginBlock(c.KV, ledger.BlockInfo{Height: c.Height + 1, Time: lt.BlockTime(c.Height + 1), Seed: lt.BlockSeed(c.Height + 1)})
	var changed *ledger.Event
	for _, e := range b.Events() {
		if e.Type == "param_changed" {
			changed = &e
		}
	}
	if changed == nil || govAttr(*changed, "key") != "protocol_fee_bps" || govAttr(*changed, "old") != "100" || govAttr(*changed, "new") != "150" || govAttr(*changed, "height") != govItoa(c.Height+1) {
		t.Fatalf("block %d's events %v: want param_changed protocol_fee_bps 100 → 150 at height %d", c.Height+1, b.Events(), c.Height+1)
	}
	changes, hash, err := b.End()
	if err != nil {
		t.Fatal(err)
	}
	c.KV.Apply(changes)
	c.Height++
	c.Hash = hash
	if err := ledger.CheckInvariants(c.KV); err != nil {
		t.Fatal(err)
	}
	if got := c.params(t).ProtocolFeeBps; got != 150 {
		t.Fatalf("protocol_fee_bps = %d after the tally, want 150", got)
	}
	p = c.proposal(t, 1)
	if p.Status != ledger.ProposalPassed || p.DecidedHeight != uint64(c.Height) || p.Tally == nil || p.Tally.Yes != 300*sync || p.Tally.Bonded != 400*sync {
		t.Fatalf("after the tally: %+v (tally %+v)", p, p.Tally)
	}
	if got := c.Balance(t, alice); got != before {
		t.Errorf("alice has %d after her proposal passed, want her deposit back: %d", got, before)
	}
	if ledger.Supply(c.KV) != supply || ledger.Burned(c.KV) != 0 || ledger.GovDeposits(c.KV) != 0 {
		t.Errorf("supply %d (was %d), burned %d, deposits held %d", ledger.Supply(c.KV), supply, ledger.Burned(c.KV), ledger.GovDeposits(c.KV))
	}
}

// TestGovDepositsSettled: rejected (no quorum, or a no majority) returns
// every deposit to the usync; vetoed and expired burn them, and the
// supply falls by exactly that.
func TestGovDepositsSettled(t *testing.T) {
	for _, tc := range []struct {
		name   string
		votes  map[string]string // voter → option
		fill   bool              // bob deposits the rest so that it votes
		status string
		burned bool
	}{
		{"no quorum", map[string]string{"v1": ledger.VoteYes}, true, ledger.ProposalRejected, false},
		{"no majority", map[string]string{"v1": ledger.VoteYes, "v2": ledger.VoteNo, "v3": ledger.VoteNo}, true, ledger.ProposalRejected, false},
		{"all abstain", map[string]string{"v1": ledger.VoteAbstain, "v2": ledger.VoteAbstain}, true, ledger.ProposalRejected, false},
		{"vetoed", map[string]string{"v1": ledger.VoteYes, "v2": ledger.VoteYes, "v3": ledger.VoteVeto, "v4": ledger.VoteVeto}, true, ledger.ProposalVetoed, true},
		{"expired", nil, false, ledger.ProposalExpired, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newGovChain(t, govGenesis())
			alice, bob := lt.NewKey("alice").Addr, lt.NewKey("bob").Addr
			a0, b0, supply := c.Balance(t, alice), c.Balance(t, bob), ledger.Supply(c.KV)
			c.mustDo(t, "alice", &ledger.MsgSubmitProposal{Kind: ledger.ProposalText, Title: "a text", Body: "why", Deposit: 4 * sync})
			if tc.fill {
				c.mustDo(t, "bob", &ledger.MsgDeposit{ProposalID: 1, Amount: 7 * sync})
			}
			p := c.proposal(t, 1)
			if want := map[bool]string{true: ledger.ProposalVoting, false: ledger.ProposalDeposit}[tc.fill]; p.Status != want {
				t.Fatalf("status %s, want %s", p.Status, want)
			}
			for _, v := range []string{"v1", "v2", "v3", "v4"} {
				if o, ok := tc.votes[v]; ok {
					c.mustDo(t, v, vote(1, o))
				}
			}
			end := p.DepositEnd
			if tc.fill {
				end = p.VotingEnd
			}
			c.until(t, int64(end))
			if c.proposal(t, 1).Status != p.Status {
				t.Fatalf("decided before its period's end")
			}
			c.ApplyBlock(t)
			p = c.proposal(t, 1)
			if p.Status != tc.status {
				t.Fatalf("status %s (%s), want %s", p.Status, p.Reason, tc.status)
			}
			da, db := a0-c.Balance(t, alice), b0-c.Balance(t, bob)
			var lost uint64
			if tc.burned {
				lost = 4 * sync
				if tc.fill {
					if db != 7*sync {
						t.Errorf("bob lost %d, want his 7 SYNC deposit", db)
					}
					lost += 7 * sync
				}
				if da != 4*sync {
					t.Errorf("alice lost %d, want her 4 SYNC deposit", da)
				}
			} else if da != 0 || db != 0 {
				t.Errorf("alice lost %d and bob %d, want their deposits back whole", da, db)
			}
			if got := supply - ledger.Supply(c.KV); got != lost || ledger.Burned(c.KV) != lost {
				t.Errorf("supply fell by %d, burned %d; want %d", got, ledger.Burned(c.KV), lost)
			}
			if len(ledger.ProposalDeposits(c.KV, 1)) != 0 || ledger.GovDeposits(c.KV) != 0 || ledger.ActiveProposals(c.KV) != 0 {
				t.Errorf("deposits left after the decision: %v", ledger.ProposalDeposits(c.KV, 1))
			}
		})
	}
}

// TestGovTreasurySpend: a spend moves treasury funds to the recipient when
// it passes; one larger than the treasury is refused at submission.
func TestGovTreasurySpend(t *testing.T) {
	c := newGovChain(t, govGenesis())
	carol := lt.NewKey("carol").Addr
	r := c.do(t, "alice", &ledger.MsgSubmitProposal{Kind: ledger.ProposalSpend, Title: "too much", To: &carol, Amount: 501 * sync, Deposit: 10 * sync})
	if !errors.Is(r.Err, ledger.ErrInsufficientFunds) || !strings.Contains(r.Err.Error(), "treasury holds 500000000usync") {
		t.Fatalf("spend above the treasury: %v", r.Err)
	}
	c.mustDo(t, "alice", &ledger.MsgSubmitProposal{Kind: ledger.ProposalSpend, Title: "fund carol", To: &carol, Amount: 50 * sync, Deposit: 10 * sync})
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		c.mustDo(t, v, vote(1, ledger.VoteYes))
	}
	c.until(t, int64(c.proposal(t, 1).VotingEnd)+1)
	if p := c.proposal(t, 1); p.Status != ledger.ProposalPassed {
		t.Fatalf("status %s: %s", p.Status, p.Reason)
	}
	if got := c.Balance(t, carol); got != 50*sync {
		t.Errorf("carol has %d, want 50 SYNC", got)
	}
	if got := ledger.Treasury(c.KV); got != 450*sync {
		t.Errorf("treasury %d, want 450 SYNC", got)
	}
}

// TestGovRefusals: changes out of bounds or past the step are refused when
// proposed, with a message naming the bound; so are deposits and votes
// out of their periods and votes without stake. Nothing else changes.
func TestGovRefusals(t *testing.T) {
	c := newGovChain(t, govGenesis())
	for _, tc := range []struct {
		name string
		who  string
		msg  ledger.Msg
		want string
		code *ledger.Error
	}{
		{"above max", "alice", paramProposal(10*sync, ledger.ParamChange{Key: "protocol_fee_bps", Value: 5001}), "protocol_fee_bps must be in [0, 5000]", ledger.ErrInvalidMsg},
		{"below min", "alice", paramProposal(10*sync, ledger.ParamChange{Key: "gov_threshold_ppm", Value: 400_000}), "gov_threshold_ppm must be in [500000, 1000000]", ledger.ErrInvalidMsg},
		{"step too large", "alice", paramProposal(10*sync, ledger.ParamChange{Key: "protocol_fee_bps", Value: 300}), "more than one proposal may", ledger.ErrInvalidMsg},
		{"unknown", "alice", paramProposal(10*sync, ledger.ParamChange{Key: "nope", Value: 1}), `no parameter "nope"`, ledger.ErrInvalidMsg},
		{"cross rule", "alice", paramProposal(10*sync, ledger.ParamChange{Key: "downtime_max_missed", Value: 10}), "downtime_max_missed", ledger.ErrInvalidMsg},
		{"initial deposit", "alice", paramProposal(2*sync, ledger.ParamChange{Key: "protocol_fee_bps", Value: 150}), "below 2500000usync", ledger.ErrInsufficientFunds},
		{"no such proposal", "v1", vote(9, ledger.VoteYes), "no proposal 9", ledger.ErrInvalidMsg},
		{"bad option", "v1", vote(1, "maybe"), `vote "maybe"`, ledger.ErrInvalidMsg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			supply := ledger.Supply(c.KV)
			r := c.do(t, tc.who, tc.msg)
			if !errors.Is(r.Err, tc.code) || !strings.Contains(r.Err.Error(), tc.want) {
				t.Fatalf("error %v, want %s saying %q", r.Err, tc.code.Name, tc.want)
			}
			if ledger.LastProposalID(c.KV) != 0 || ledger.Supply(c.KV) != supply {
				t.Fatalf("a refused proposal left state behind")
			}
		})
	}
	// One in its deposit period: no votes yet; then in voting: no more
	// deposits, and no votes from accounts without stake.
	c.mustDo(t, "alice", &ledger.MsgSubmitProposal{Kind: ledger.ProposalText, Title: "t", Deposit: 3 * sync})
	if r := c.do(t, "v1", vote(1, ledger.VoteYes)); r.Err == nil || !strings.Contains(r.Err.Error(), "votes are taken only in its voting period") {
		t.Errorf("vote in the deposit period: %v", r.Err)
	}
	c.mustDo(t, "bob", &ledger.MsgDeposit{ProposalID: 1, Amount: 7 * sync})
	if r := c.do(t, "bob", &ledger.MsgDeposit{ProposalID: 1, Amount: sync}); r.Err == nil || !strings.Contains(r.Err.Error(), "deposits are taken only in its deposit period") {
		t.Errorf("deposit in the voting period: %v", r.Err)
	}
	if r := c.do(t, "bob", vote(1, ledger.VoteYes)); !errors.Is(r.Err, ledger.ErrInsufficientStake) {
		t.Errorf("vote without stake: %v", r.Err)
	}
	// A vote may change until the end; the last one counts, once.
	c.mustDo(t, "v1", vote(1, ledger.VoteYes))
	c.mustDo(t, "v1", vote(1, ledger.VoteNo))
	tally, err := ledger.TallyVotes(c.KV, 1)
	if err != nil || tally.Yes != 0 || tally.No != 100*sync || c.proposal(t, 1).Voters != 1 {
		t.Errorf("after a changed vote: tally %+v (%v), voters %d", tally, err, c.proposal(t, 1).Voters)
	}
}

// TestGovMinDepositRises: past the free count each submission raises the
// minimum deposit by the rise, up to the cap; with few proposals active
// it decays back to the base, never below.
func TestGovMinDepositRises(t *testing.T) {
	g := govGenesis()
	g.Params.GovDepositFreeProposals = 2
	g.Params.GovDepositRisePPM = 500_000 // +50%
	g.Params.GovDepositMaxMultiplier = 4
	g.Params.GovDepositDecayPPM = 100_000 // 10% of the excess a block
	g.Params.GovInitialDepositPPM = 0
	g.Params.GovDepositBlocks = 20
	c := newGovChain(t, g)
	base := uint64(10 * sync)
	want := []uint64{base, base, 15 * sync, 22_500_000, 33_750_000, 40 * sync, 40 * sync}
	for i, w := range want {
		c.mustDo(t, "alice", &ledger.MsgSubmitProposal{Kind: ledger.ProposalText, Title: "spam", Deposit: 1})
		if got := c.proposal(t, uint64(i+1)).MinDeposit; got != w {
			t.Errorf("proposal %d must reach %d, want %d", i+1, got, w)
		}
	}
	// All expire (their 1 usync deposits burned); then the rise decays.
	c.until(t, int64(c.proposal(t, uint64(len(want))).DepositEnd)+1)
	if n := ledger.ActiveProposals(c.KV); n != 0 {
		t.Fatalf("%d proposals still active", n)
	}
	if got := ledger.Burned(c.KV); got != uint64(len(want)) {
		t.Errorf("burned %d, want the %d expired deposits of 1 usync", got, len(want))
	}
	last := ledger.MinDeposit(c.KV, c.params(t))
	for i := 0; i < 300 && last > base; i++ {
		c.ApplyBlock(t)
		d := ledger.MinDeposit(c.KV, c.params(t))
		if d > last || d < base {
			t.Fatalf("minimum deposit went from %d to %d (base %d)", last, d, base)
		}
		last = d
	}
	if last != base {
		t.Errorf("minimum deposit %d after 300 idle blocks, want back at the base %d", last, base)
	}
}

// TestGovWeightAtTally: a voter's weight is its bonded stake when the
// tally runs: withdrawing the bond after voting takes its weight away.
func TestGovWeightAtTally(t *testing.T) {
	c := newGovChain(t, govGenesis())
	c.mustDo(t, "alice", paramProposal(10*sync, ledger.ParamChange{Key: "min_fee", Value: 500}))
	c.mustDo(t, "v1", vote(1, ledger.VoteYes))
	c.mustDo(t, "v2", vote(1, ledger.VoteNo))
	c.mustDo(t, "v3", vote(1, ledger.VoteNo))
	c.mustDo(t, "v2", &ledger.MsgValidatorUnbond{Amount: 90 * sync})
	c.mustDo(t, "v3", &ledger.MsgValidatorUnbond{Amount: 90 * sync})
	c.until(t, int64(c.proposal(t, 1).VotingEnd)+1)
	p := c.proposal(t, 1)
	if p.Status != ledger.ProposalPassed || p.Tally.No != 20*sync || p.Tally.Yes != 100*sync {
		t.Fatalf("status %s (%s), tally %+v: want passed with the no voters' remaining 10 SYNC each", p.Status, p.Reason, p.Tally)
	}
	if got := c.params(t).MinFee; got != 500 {
		t.Errorf("min_fee %d, want 500", got)
	}
}

// TestGovVoteChangeMovesWeight: a voter who changes its vote counts once,
// for its last option, in the running tally (gov_running.go) the tally
// reads.
func TestGovVoteChangeMovesWeight(t *testing.T) {
	c := newGovChain(t, govGenesis())
	c.mustDo(t, "alice", paramProposal(10*sync, ledger.ParamChange{Key: "min_fee", Value: 500}))
	c.mustDo(t, "v1", vote(1, ledger.VoteVeto))
	c.mustDo(t, "v1", vote(1, ledger.VoteYes))
	c.mustDo(t, "v2", vote(1, ledger.VoteNo))
	c.until(t, int64(c.proposal(t, 1).VotingEnd)+1)
	p := c.proposal(t, 1)
	if p.Tally == nil || p.Tally.Yes != 100*sync || p.Tally.No != 100*sync || p.Tally.Veto != 0 || p.Tally.Abstain != 0 {
		t.Fatalf("tally %+v (%s), want 100 SYNC yes and 100 no, no veto", p.Tally, p.Status)
	}
}

func govHasEvent(evs []ledger.Event, typ string) bool {
	for _, e := range evs {
		if e.Type == typ {
			return true
		}
	}
	return false
}

func govAttr(e ledger.Event, key string) string {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

func govItoa(v int64) string { return strconv.FormatInt(v, 10) }
