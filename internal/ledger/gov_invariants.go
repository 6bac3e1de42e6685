package ledger

import (
	"encoding/binary"
	"fmt"
)

// Governance's invariants, registered in invariants.go.

// paramsWithinBounds: every parameter is within its registered bounds and
// the rules between parameters hold, whatever proposals passed.
func paramsWithinBounds(s *invariantState) error {
	if err := s.params.Validate(); err != nil {
		return fmt.Errorf("invariant: %w: %w", err, ErrInternal)
	}
	return nil
}

// proposalsMatchIndexes: each proposal record is its key's; the active
// ones (and only they) have one queue entry, at the end of their period;
// the active count and the last id match the records; a proposal's
// voters count its votes, which only proposals that reached voting have.
func proposalsMatchIndexes(s *invariantState) error {
	var err error
	bad := func(format string, args ...any) bool {
		err = fmt.Errorf("invariant: "+format+": %w", append(args, ErrInternal)...)
		return false
	}
	props := map[uint64]*Proposal{}
	var active, last uint64
	s.kv.Iterate(prefixProposal, prefixEnd(prefixProposal), func(k, b []byte) bool {
		p, e := decodeProposal(b)
		if e != nil || len(k) != len(prefixProposal)+8 || binary.BigEndian.Uint64(k[len(prefixProposal):]) != p.ID {
			return bad("proposal record %x unreadable or not its key's (%v)", k, e)
		}
		props[p.ID] = p
		last = max(last, p.ID)
		if p.Active() {
			active++
		}
		var voters uint64
		pre := govVotePrefix(p.ID)
		s.kv.Iterate(pre, prefixEnd(pre), func(_, _ []byte) bool { voters++; return true })
		if voters != p.Voters || (voters > 0 && p.VotingStart == 0) {
			return bad("proposal %d (%s) counts %d voters, has %d votes", p.ID, p.Status, p.Voters, voters)
		}
		return true
	})
	if err != nil {
		return err
	}
	if n := ActiveProposals(s.kv); n != active {
		return fmt.Errorf("invariant: %d active proposals recorded, the records have %d: %w", n, active, ErrInternal)
	}
	if n := LastProposalID(s.kv); n != last || uint64(len(props)) != last {
		return fmt.Errorf("invariant: last proposal id %d, the records have %d up to %d: %w", n, len(props), last, ErrInternal)
	}
	queued := 0
	s.kv.Iterate(prefixGovQueue, prefixEnd(prefixGovQueue), func(k, _ []byte) bool {
		queued++
		if len(k) != len(prefixGovQueue)+16 {
			return bad("queue entry %x is malformed", k)
		}
		end, id := binary.BigEndian.Uint64(k[len(prefixGovQueue):]), binary.BigEndian.Uint64(k[len(prefixGovQueue)+8:])
		if p := props[id]; p == nil || !p.Active() || p.periodEnd() != end {
			return bad("queue entry %x (end %d) does not match proposal %d", k, end, id)
		}
		return true
	})
	if err == nil && uint64(queued) != active {
		bad("%d queue entries for %d active proposals", queued, active)
	}
	return err
}

// govDepositsAddUp: each proposal's deposit is the sum of its deposit
// entries, only active proposals hold any, and chain/govdeposits is their
// total.
func govDepositsAddUp(s *invariantState) error {
	var total uint64
	var err error
	var cur *Proposal
	var sum uint64
	check := func() {
		if cur != nil && err == nil && sum != cur.Deposit {
			err = fmt.Errorf("invariant: proposal %d records a deposit of %d, its entries hold %d: %w", cur.ID, cur.Deposit, sum, ErrInternal)
		}
	}
	s.kv.Iterate(prefixGovDeposit, prefixEnd(prefixGovDeposit), func(k, b []byte) bool {
		id := binary.BigEndian.Uint64(k[len(prefixGovDeposit):])
		if cur == nil || cur.ID != id {
			check()
			p, ok, e := GetProposal(s.kv, id)
			if e != nil || !ok || !p.Active() {
				err = fmt.Errorf("invariant: deposit entry %x on proposal %d, which is not active (%v): %w", k, id, e, ErrInternal)
			}
			cur, sum = p, 0
		}
		if err != nil {
			return false
		}
		v := binary.BigEndian.Uint64(b)
		sum += v
		total += v
		return true
	})
	check()
	if err != nil {
		return err
	}
	// An active proposal without entries must record none.
	s.kv.Iterate(prefixProposal, prefixEnd(prefixProposal), func(_, b []byte) bool {
		p, _ := decodeProposal(b)
		pre := govDepositPrefix(p.ID)
		has := false
		s.kv.Iterate(pre, prefixEnd(pre), func(_, _ []byte) bool { has = true; return false })
		if !has && p.Deposit != 0 && p.Active() {
			err = fmt.Errorf("invariant: active proposal %d records a deposit of %d and has no entries: %w", p.ID, p.Deposit, ErrInternal)
			return false
		}
		return true
	})
	if err == nil && GovDeposits(s.kv) != total {
		err = fmt.Errorf("invariant: recorded proposal deposits %d, the entries hold %d: %w", GovDeposits(s.kv), total, ErrInternal)
	}
	return err
}

// minDepositWithinBounds: the raised minimum deposit, if any, is above
// gov_min_deposit and at most gov_min_deposit × gov_deposit_max_multiplier.
func minDepositWithinBounds(s *invariantState) error {
	b := s.kv.Get(keyGovMinDeposit)
	if b == nil {
		return nil
	}
	d := getUint(s.kv, keyGovMinDeposit)
	p := s.params
	if len(b) != 8 || d <= p.GovMinDeposit || d > p.GovMinDeposit*p.GovDepositMaxMultiplier {
		return fmt.Errorf("invariant: minimum deposit %d out of (%d, %d]: %w", d, p.GovMinDeposit, p.GovMinDeposit*p.GovDepositMaxMultiplier, ErrInternal)
	}
	return nil
}
