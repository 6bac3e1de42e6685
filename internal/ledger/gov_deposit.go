package ledger

import (
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Governance deposits and the minimum deposit.
//
// The minimum deposit D (gov/mindeposit) rises while many proposals are
// active, so that a burst of proposals gets expensive, and decays back:
//   - base = params.gov_min_deposit, cap = base × gov_deposit_max_multiplier;
//     D is always within [base, cap] (an absent D reads as base);
//   - a proposal submitted while, counting it, more than
//     gov_deposit_free_proposals are active raises D by gov_deposit_rise_ppm
//     of D (to at most cap), and must itself reach the raised D;
//   - each block that starts with at most gov_deposit_free_proposals active
//     lowers D by gov_deposit_decay_ppm of D − base (at least 1 usync), to no
//     less than base.
//
// So k proposals past the free count cost the k-th about
// base × (1 + rise)^k, and an idle chain forgets the burst geometrically
// (by default the rise halves in about 350 blocks).
//
// Deposits are taken from the depositor's balance into gov/d/<id><addr>
// (their total in chain/govdeposits, part of the supply). A decided
// proposal's deposits are returned, or burned when it expired or was
// vetoed (burn, supply.go).

// MinDeposit returns the current minimum deposit D, clamped to p's
// bounds (what a submission may raise: NextMinDeposit).
func MinDeposit(kv KV, p Params) uint64 { return clampDeposit(getUint(kv, keyGovMinDeposit), p) }

func clampDeposit(d uint64, p Params) uint64 {
	return min(max(d, p.GovMinDeposit), p.GovMinDeposit*p.GovDepositMaxMultiplier)
}

// NextMinDeposit returns the minimum deposit the next proposal submitted
// would have to reach: D, raised once if it would be past the free count.
func NextMinDeposit(kv KV, p Params) uint64 {
	d := MinDeposit(kv, p)
	if ActiveProposals(kv)+1 > p.GovDepositFreeProposals {
		d = clampDeposit(d+mulDiv(d, p.GovDepositRisePPM, ppm), p)
	}
	return d
}

// raiseMinDeposit runs at a submission: it stores and returns
// NextMinDeposit.
func raiseMinDeposit(o *Overlay, p Params) uint64 {
	d := NextMinDeposit(o, p)
	if d > p.GovMinDeposit {
		setUint(o, keyGovMinDeposit, d)
	}
	return d
}

// decayMinDeposit runs at the start of every block, after the proposals
// whose periods ended were decided: it lowers D toward base while few
// proposals are active, and clamps it to the bounds (which a parameter
// change may have moved).
func decayMinDeposit(o *Overlay, p Params) {
	stored := getUint(o, keyGovMinDeposit)
	if stored == 0 {
		return // never raised: base
	}
	d := clampDeposit(stored, p)
	if ActiveProposals(o) <= p.GovDepositFreeProposals && d > p.GovMinDeposit {
		d -= max(1, mulDiv(d-p.GovMinDeposit, p.GovDepositDecayPPM, ppm))
	}
	if d == p.GovMinDeposit {
		o.Delete(keyGovMinDeposit) // back at base: nothing to remember
		return
	}
	if d != stored {
		setUint(o, keyGovMinDeposit, d)
	}
}

// addDeposit moves amt from from's balance into proposal p's deposits.
func addDeposit(o *Overlay, p *Proposal, from address.Address, amt uint64) error {
	if p.Deposit+amt < p.Deposit {
		return invalid("deposit on proposal %d would overflow", p.ID)
	}
	if err := takeBalance(o, from, amt, "deposit"); err != nil {
		return err
	}
	k := govDepositKey(p.ID, from)
	setUint(o, k, getUint(o, k)+amt)
	setUint(o, keyGovDeposits, GovDeposits(o)+amt)
	p.Deposit += amt
	return nil
}

// settleDeposits empties p's deposits: back to their depositors, or
// burned. It returns the events.
func settleDeposits(o *Overlay, p *Proposal, burnThem bool) ([]Event, error) {
	deps := ProposalDeposits(o, p.ID)
	var total uint64
	for _, d := range deps {
		o.Delete(govDepositKey(p.ID, d.Depositor))
		total += d.Amount
		if burnThem {
			continue
		}
		acct, err := GetAccount(o, d.Depositor)
		if err != nil {
			return nil, err
		}
		acct.Balance += d.Amount
		setAccount(o, &acct)
	}
	setUint(o, keyGovDeposits, GovDeposits(o)-total)
	if total == 0 {
		return nil, nil
	}
	id := strconv.FormatUint(p.ID, 10)
	if burnThem {
		burn(o, total, "proposal deposits")
		return []Event{{Type: "proposal_deposits_burned", Attrs: []Attr{{"proposal", id}, {"amount", strconv.FormatUint(total, 10)}, {"depositors", strconv.Itoa(len(deps))}}}}, nil
	}
	return []Event{{Type: "proposal_deposits_returned", Attrs: []Attr{{"proposal", id}, {"amount", strconv.FormatUint(total, 10)}, {"depositors", strconv.Itoa(len(deps))}}}}, nil
}
