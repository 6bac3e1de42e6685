package ledger

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// The end of governance periods, the tally and the execution of passed
// proposals.
//
// Voting weight is bonded stake at the tally: a voter's validator bond
// (helper A's records; jailed or not, but not tombstoned) plus its
// provider stake. Both are stake the network can slash, and DESIGN.md
// section 6 gives governance weight to stake: providers carry most of it,
// and the parameters they would vote on are theirs as much as the
// validators'. Unbonding stake does not vote. The quorum's base is all
// bonded stake (chain/valbonded + chain/staked).
//
// The tally rule (after the Cosmos SDK's x/gov):
//   - no quorum (votes < gov_quorum_ppm of the bonded stake): rejected;
//   - veto > gov_veto_ppm of the votes: vetoed (deposits burned);
//   - only abstain: rejected;
//   - yes > gov_threshold_ppm of yes + no + veto: passed;
//   - otherwise rejected.
//
// A passed proposal is executed at once: a parameter change must still be
// within the registry's bounds and steps of the parameters as they are
// then (another proposal may have moved them), a spend must find the
// treasury holding its amount; otherwise it fails (deposits returned).

// BondedStake is all the stake that votes: validator bonds and provider
// stake.
func BondedStake(kv KV) uint64 { return ValidatorBonded(kv) + Staked(kv) + DelegatedTotal(kv) }

// VotingWeight is a's voting weight now: its validator's bond (unless
// tombstoned) plus its provider stake.
func VotingWeight(kv KV, a address.Address) (uint64, error) {
	var w uint64
	if c, ok := ValidatorOf(kv, a); ok {
		v, ok, err := GetValidator(kv, c)
		if err != nil {
			return 0, err
		}
		if ok && !v.Tombstoned {
			w += v.Bond
		}
	}
	p, ok, err := GetProvider(kv, a)
	if err != nil {
		return 0, err
	}
	if ok {
		w += p.Stake
	}
	return w, nil
}

// TallyVotes is proposal id's tally with each voter's weight now: its
// running tally (gov_running.go), one read whatever the number of voters.
func TallyVotes(kv KV, id uint64) (Tally, error) {
	r := runningTally(kv, id)
	d, err := delegatedTally(kv, id) // gov_delegated.go
	if err != nil {
		return Tally{}, err
	}
	return Tally{Yes: r[0] + d[0], No: r[1] + d[1], Abstain: r[2] + d[2], Veto: r[3] + d[3], Bonded: BondedStake(kv)}, nil
}

// mulGreater reports whether a×b > c×d, in 128 bits.
func mulGreater(a, b, c, d uint64) bool {
	h1, l1 := bits.Mul64(a, b)
	h2, l2 := bits.Mul64(c, d)
	return h1 > h2 || (h1 == h2 && l1 > l2)
}

// TallyResult applies the tally rule: the status a proposal with tally t
// ends in (passed, rejected or vetoed) and why (a Wait code and the
// threshold that decided it; the shares are t's).
func TallyResult(t Tally, p Params) (status string, why Wait) {
	voted := t.Voted()
	switch {
	case t.Bonded == 0 || mulGreater(p.GovQuorumPPM, t.Bonded, voted, ppm):
		return ProposalRejected, Wait{Code: WaitNoQuorum, PPM: p.GovQuorumPPM}
	case mulGreater(t.Veto, ppm, p.GovVetoPPM, voted):
		return ProposalVetoed, Wait{Code: WaitVetoed, PPM: p.GovVetoPPM}
	case t.Yes+t.No+t.Veto == 0:
		return ProposalRejected, Wait{Code: WaitAllAbstained}
	case mulGreater(t.Yes, ppm, p.GovThresholdPPM, t.Yes+t.No+t.Veto):
		return ProposalPassed, Wait{Code: WaitPassed, PPM: p.GovThresholdPPM}
	}
	return ProposalRejected, Wait{Code: WaitRejected, PPM: p.GovThresholdPPM}
}

// beginGov runs first at the start of every block: it decides the
// proposals whose period ended at the last block (queue entries with an
// end below the height), executes those that pass, and lets the minimum
// deposit decay. It returns the parameters the block runs with (changed
// if a parameter proposal passed).
func beginGov(o *Overlay, p Params, info BlockInfo) ([]Event, Params, error) {
	h := uint64(info.Height)
	var ended []uint64
	o.Iterate(prefixGovQueue, govQueueKey(h, 0), func(k, _ []byte) bool {
		ended = append(ended, binary.BigEndian.Uint64(k[len(prefixGovQueue)+8:]))
		return true
	})
	var evs []Event
	for _, id := range ended {
		more, np, err := decideProposal(o, id, p, h)
		if err != nil {
			return nil, p, err
		}
		p = np
		evs = append(evs, more...)
	}
	decayMinDeposit(o, p)
	return evs, p, nil
}

// decideProposal ends proposal id's period at height h: an expired
// deposit period, or a tally.
func decideProposal(o *Overlay, id uint64, p Params, h uint64) ([]Event, Params, error) {
	prop, err := mustProposal(o, id)
	if err != nil {
		return nil, p, fmt.Errorf("queued proposal %d: %w: %w", id, err, ErrInternal)
	}
	old := *prop
	prop.DecidedHeight = h
	burnDeposits := false
	var evs []Event
	switch prop.Status {
	case ProposalDeposit:
		prop.Status = ProposalExpired
		prop.Wait = &Wait{Code: WaitDepositShort, Amount: prop.Deposit, Needed: prop.MinDeposit, Height: prop.DepositEnd}
		burnDeposits = true
	case ProposalVoting:
		t, err := TallyVotes(o, id)
		if err != nil {
			return nil, p, err
		}
		prop.Tally = &t
		setRunningTally(o, id, [4]uint64{}) // decided: the tally is kept in the record
		clearDelegatedVotes(o, id)
		status, why := TallyResult(t, p)
		prop.Status, prop.Wait = status, &why
		burnDeposits = prop.Status == ProposalVetoed
		if prop.Status == ProposalPassed {
			var more []Event
			more, p, err = executeProposal(o, prop, p, h)
			if err != nil {
				return nil, p, err
			}
			evs = append(evs, more...)
		}
	default:
		return nil, p, fmt.Errorf("queued proposal %d is %s: %w", id, prop.Status, ErrInternal)
	}
	setUint(o, keyGovActive, ActiveProposals(o)-1)
	more, err := settleDeposits(o, prop, burnDeposits)
	if err != nil {
		return nil, p, err
	}
	setProposal(o, &old, prop)
	attrs := []Attr{{"proposal", strconv.FormatUint(id, 10)}, {"kind", prop.Kind}, {"status", prop.Status}, {"reason", prop.Wait.Code}}
	if t := prop.Tally; t != nil {
		attrs = append(attrs, Attr{"yes", strconv.FormatUint(t.Yes, 10)}, Attr{"no", strconv.FormatUint(t.No, 10)},
			Attr{"abstain", strconv.FormatUint(t.Abstain, 10)}, Attr{"veto", strconv.FormatUint(t.Veto, 10)}, Attr{"bonded", strconv.FormatUint(t.Bonded, 10)})
	}
	evs = append([]Event{{Type: "proposal_decided", Attrs: attrs}}, evs...)
	return append(evs, more...), p, nil
}

// executeProposal carries out a passed proposal; one that cannot be
// carried out is marked failed (why: a NotExecuted* cause) and changes
// nothing. The error that refused its parameter changes, in words, is in
// the proposal_not_executed event only: events are not hashed.
func executeProposal(o *Overlay, prop *Proposal, p Params, h uint64) ([]Event, Params, error) {
	id := strconv.FormatUint(prop.ID, 10)
	fail := func(why Wait, detail string) ([]Event, Params, error) {
		prop.Status = ProposalFailed
		why.Code = WaitNotExecuted
		prop.Wait = &why
		return []Event{{Type: "proposal_not_executed", Attrs: []Attr{{"proposal", id}, {"cause", why.Cause}, {"error", truncate(detail, maxReason)}}}}, p, nil
	}
	switch prop.Kind {
	case ProposalParam:
		np, err := ApplyParamChanges(p, prop.Changes)
		if err != nil {
			return fail(Wait{Cause: NotExecutedParams}, err.Error())
		}
		if err := setParams(o, np); err != nil {
			return nil, p, err
		}
		var evs []Event
		for _, c := range prop.Changes {
			was, _ := p.Get(c.Key)
			evs = append(evs, Event{Type: "param_changed", Attrs: []Attr{{"proposal", id}, {"key", c.Key},
				{"old", strconv.FormatUint(was, 10)}, {"new", strconv.FormatUint(c.Value, 10)}, {"height", strconv.FormatUint(h, 10)}}})
		}
		return evs, np, nil
	case ProposalSpend:
		if tr := Treasury(o); tr < prop.Amount {
			return fail(Wait{Cause: NotExecutedTreasury, Amount: tr, Needed: prop.Amount}, "")
		}
		acct, err := GetAccount(o, *prop.To)
		if err != nil {
			return nil, p, err
		}
		if acct.Balance+prop.Amount < acct.Balance {
			return fail(Wait{Cause: NotExecutedOverflow, Providers: []address.Address{*prop.To}}, "")
		}
		acct.Balance += prop.Amount
		setAccount(o, &acct)
		setUint(o, keyTreasury, Treasury(o)-prop.Amount)
		return []Event{{Type: "treasury_spend", Attrs: []Attr{{"proposal", id}, {"to", prop.To.String()}, {"amount", strconv.FormatUint(prop.Amount, 10)}}}}, p, nil
	case ProposalAttestRoots:
		roots, err := applyRootChange(GetAttestRoots(o), prop.AddRoots, prop.RemoveRoots)
		if err != nil {
			return fail(Wait{Cause: NotExecutedRoots}, err.Error())
		}
		setAttestRoots(o, roots)
		var evs []Event
		for _, r := range prop.AddRoots {
			evs = append(evs, Event{Type: "attest_root_added", Attrs: []Attr{{"proposal", id}, {"root", r}, {"height", strconv.FormatUint(h, 10)}}})
		}
		for _, r := range prop.RemoveRoots {
			evs = append(evs, Event{Type: "attest_root_removed", Attrs: []Attr{{"proposal", id}, {"root", r}, {"height", strconv.FormatUint(h, 10)}}})
		}
		return evs, p, nil
	}
	return nil, p, nil // text: nothing to do
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
