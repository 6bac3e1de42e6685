package ledger_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestGovProperties drives random proposals, deposits and votes (many
// refused: out of bounds, too large a step, wrong period, no stake)
// through the ledger, on two chains, and checks after every block: the
// invariants (supply, deposits, proposals, every parameter within its
// bounds: ApplyBlock runs CheckInvariants), supply + burned = the genesis
// supply, each parameter moved only by passed proposals, each by at most
// its largest step, and the two chains' app hashes equal.
func TestGovProperties(t *testing.T) {
	totalApplied := 0
	defer func() {
		if totalApplied == 0 && !t.Failed() {
			t.Errorf("no parameter change passed in any run: the sequences test nothing about applying them")
		}
	}()
	for seed := uint64(1); seed <= 4; seed++ {
		g := govGenesis()
		g.Params.GovDepositBlocks = 3
		g.Params.GovVotingBlocks = 6
		g.Params.GovDepositFreeProposals = 2
		g.Params.GovDepositRisePPM = 300_000
		g.Params.GovDepositMaxMultiplier = 5
		g.Params.GovDepositDecayPPM = 50_000
		g.Params.GovInitialDepositPPM = 100_000
		a, b := newGovChain(t, g), newGovChain(t, g)
		genesisSupply := ledger.Supply(a.KV)
		rng := rand.New(rand.NewPCG(seed, 14))
		actors := []string{"alice", "bob", "v1", "v2", "v3", "v4"}
		registry := ledger.ParamRegistry()
		passed, applied := 0, 0
		for range 200 {
			before := a.params(t)
			var txs [][]byte
			used := map[string]bool{}
			for range rng.IntN(6) {
				who := actors[rng.IntN(len(actors))]
				if used[who] {
					continue // one tx per key per block: tx() reads the sequence from state
				}
				used[who] = true
				txs = append(txs, a.tx(who, randomGovMsg(rng, a, registry)))
			}
			ra := a.ApplyBlock(t, txs...)
			rb := b.ApplyBlock(t, txs...)
			if string(a.Hash) != string(b.Hash) {
				t.Fatalf("seed %d height %d: app hashes differ", seed, a.Height)
			}
			for i := range ra {
				if ledger.CodeOf(ra[i].Err) != ledger.CodeOf(rb[i].Err) {
					t.Fatalf("seed %d: results differ: %v / %v", seed, ra[i].Err, rb[i].Err)
				}
			}
			if s := ledger.Supply(a.KV) + ledger.Burned(a.KV); s != genesisSupply {
				t.Fatalf("seed %d height %d: supply %d + burned %d != genesis supply %d", seed, a.Height, ledger.Supply(a.KV), ledger.Burned(a.KV), genesisSupply)
			}
			// Replay the proposals this block passed, in the order they were
			// decided, from the parameters before it: each step allowed,
			// and the result exactly the parameters now.
			want := before
			for id := uint64(1); id <= ledger.LastProposalID(a.KV); id++ {
				p := a.proposal(t, id)
				if p.DecidedHeight != uint64(a.Height) || p.Status != ledger.ProposalPassed {
					continue
				}
				passed++
				if p.Kind != ledger.ProposalParam {
					continue
				}
				for _, c := range p.Changes {
					s, _ := ledger.LookupParam(c.Key)
					old, _ := want.Get(c.Key)
					if step := max(old, c.Value) - min(old, c.Value); step > s.StepFrom(old) {
						t.Fatalf("seed %d: proposal %d moved %s from %d to %d, more than its step %d", seed, id, c.Key, old, c.Value, s.StepFrom(old))
					}
				}
				var err error
				if want, err = ledger.ApplyParamChanges(want, p.Changes); err != nil {
					t.Fatalf("seed %d: passed proposal %d's changes are not valid: %v", seed, id, err)
				}
				applied++
				totalApplied++
			}
			if got := a.params(t); got != want {
				t.Fatalf("seed %d height %d: params changed to %+v, the passed proposals give %+v", seed, a.Height, got, want)
			}
		}
		t.Logf("seed %d: %d proposals, %d passed (%d parameter changes applied), %d usync burned", seed, ledger.LastProposalID(a.KV), passed, applied, ledger.Burned(a.KV))
	}
}

// randomGovMsg returns a random governance message: a proposal (a
// parameter change near or past its bounds and step, a spend, a text), a
// deposit or a vote on a random proposal (which may not exist).
func randomGovMsg(rng *rand.Rand, c *govChain, registry []ledger.ParamSpec) ledger.Msg {
	// Mostly a proposal in the right period; sometimes any id, even one
	// that does not exist.
	last := ledger.LastProposalID(c.KV)
	var depositing, voting []uint64
	for id := uint64(1); id <= last; id++ {
		switch p, _, _ := ledger.GetProposal(c.KV, id); p.Status {
		case ledger.ProposalDeposit:
			depositing = append(depositing, id)
		case ledger.ProposalVoting:
			voting = append(voting, id)
		}
	}
	pick := func(ids []uint64) uint64 {
		if len(ids) == 0 || rng.IntN(8) == 0 {
			return uint64(rng.IntN(int(last)+2)) + 1
		}
		return ids[rng.IntN(len(ids))]
	}
	switch rng.IntN(16) {
	case 0, 1:
		p, _ := ledger.GetParams(c.KV)
		var changes []ledger.ParamChange
		for range 1 + rng.IntN(2) {
			s := registry[rng.IntN(len(registry))]
			old, _ := p.Get(s.Name)
			step := s.StepFrom(old)
			d := rng.Uint64N(step*5/4 + 1) // a fifth of the time past the step
			v := old + d
			if rng.IntN(2) == 0 {
				v = old - min(old, d)
			}
			changes = append(changes, ledger.ParamChange{Key: s.Name, Value: v})
		}
		return paramProposal(rng.Uint64N(12*sync), changes...)
	case 2:
		to := lt.NewKey("carol").Addr
		return &ledger.MsgSubmitProposal{Kind: ledger.ProposalSpend, Title: "spend", To: &to, Amount: ledger.Amount(1 + rng.Uint64N(200*sync)), Deposit: ledger.Amount(rng.Uint64N(12 * sync))}
	case 3:
		return &ledger.MsgSubmitProposal{Kind: ledger.ProposalText, Title: "text", Deposit: ledger.Amount(rng.Uint64N(12 * sync))}
	case 4, 5, 6:
		return &ledger.MsgDeposit{ProposalID: pick(depositing), Amount: ledger.Amount(1 + rng.Uint64N(20*sync))}
	}
	opts := []string{ledger.VoteYes, ledger.VoteYes, ledger.VoteYes, ledger.VoteYes, ledger.VoteYes, ledger.VoteYes, ledger.VoteYes, ledger.VoteNo, ledger.VoteNo, ledger.VoteAbstain, ledger.VoteVeto}
	return vote(pick(voting), opts[rng.IntN(len(opts))])
}
