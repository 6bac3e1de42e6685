package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// Delegators' votes, after the Cosmos SDK's x/gov tally: delegated stake
// votes as its delegator voted, and, where the delegator did not vote, as
// the target it backs voted (a validator's operator, or a provider), or
// not at all when neither did.
//
// Shares are what the running count keeps, because slashes move a pool's
// tokens, not its shares: govds/<id><target> → four 8-byte sums, the
// shares of the target's pool whose delegators voted yes, no, abstain,
// veto on proposal id. A vote moves each of its voter's delegations'
// shares to its option; a delegation's shares changing moves its voter's
// votes on the active proposals (delegationSharesChanged). At the period's
// end each pool's tokens are split by those sums, the rest going to its
// owner's vote: one read per pool (not per delegation). Derived state,
// left out of the app hash (keys.go), recounted by
// delegatedVotesMatchDelegations.

func govDelegatedKey(id uint64, t Target) []byte {
	return append(u64(slices.Clone(prefixGovDelegated), id), t.bytes()...)
}

func votedShares(kv KV, id uint64, t Target) [4]uint64 {
	var v [4]uint64
	readUints(kv.Get(govDelegatedKey(id, t)), &v[0], &v[1], &v[2], &v[3])
	return v
}

func setVotedShares(o *Overlay, id uint64, t Target, v [4]uint64) {
	k := govDelegatedKey(id, t)
	if v == ([4]uint64{}) {
		if o.Get(k) != nil {
			o.Delete(k)
		}
		return
	}
	o.Set(k, appendUints(nil, v[0], v[1], v[2], v[3]))
}

// hasDelegations reports whether d delegates to any target.
func hasDelegations(kv KV, d address.Address) bool {
	pre := append(slices.Clone(prefixDelegation), d[:]...)
	found := false
	kv.Iterate(pre, prefixEnd(pre), func(_, _ []byte) bool { found = true; return false })
	return found
}

// moveDelegatedVote moves d's delegations' shares on proposal id from
// option before (-1: no vote before) to option opt.
func moveDelegatedVote(o *Overlay, id uint64, d address.Address, before, opt int) error {
	pre := append(slices.Clone(prefixDelegation), d[:]...)
	type del struct {
		t      Target
		shares uint64
	}
	var ds []del
	var err error
	o.Iterate(pre, prefixEnd(pre), func(k, b []byte) bool {
		x := &Delegation{}
		if err = decodeRecord(b, x); err != nil {
			return false
		}
		ds = append(ds, del{targetFrom(k[len(pre):]), x.Shares})
		return true
	})
	if err != nil {
		return fmt.Errorf("delegation of %s: %w: %w", d, err, ErrInternal)
	}
	for _, x := range ds {
		v := votedShares(o, id, x.t)
		if before >= 0 {
			v[before] -= x.shares
		}
		v[opt] += x.shares
		setVotedShares(o, id, x.t, v)
	}
	return nil
}

// delegationSharesChanged runs when d's shares of t's pool changed from
// old to now: d's votes on the active proposals move with them.
func delegationSharesChanged(o *Overlay, d address.Address, t Target, old, now uint64) {
	if old == now {
		return
	}
	var ids []uint64
	o.Iterate(prefixGovQueue, prefixEnd(prefixGovQueue), func(k, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(k[len(prefixGovQueue)+8:]))
		return true
	})
	for _, id := range ids {
		b := o.Get(govVoteKey(id, d))
		if len(b) != 1 || int(b[0]) >= len(voteOptions) {
			continue
		}
		v := votedShares(o, id, t)
		v[b[0]] = v[b[0]] - old + now
		setVotedShares(o, id, t, v)
	}
}

// delegatedTally is how the delegated stake votes on proposal id: each
// pool's tokens split by its delegators' voted shares, the rest by its
// owner's vote. Its work is one read per pool.
func delegatedTally(kv KV, id uint64) ([4]uint64, error) {
	var out [4]uint64
	var err error
	kv.Iterate(prefixDelPool, prefixEnd(prefixDelPool), func(k, b []byte) bool {
		p := &DelegationPool{}
		if err = decodeRecord(b, p); err != nil {
			return false
		}
		if p.Tokens == 0 || p.Shares == 0 {
			return true
		}
		t := targetFrom(k[len(prefixDelPool):])
		v := votedShares(kv, id, t)
		var voted uint64
		for i, s := range v {
			out[i] += mulDiv(p.Tokens, s, p.Shares)
			voted += s
		}
		if ov := kv.Get(govVoteKey(id, t.Address)); len(ov) == 1 && int(ov[0]) < len(voteOptions) && voted < p.Shares {
			out[ov[0]] += mulDiv(p.Tokens, p.Shares-voted, p.Shares)
		}
		return true
	})
	return out, err
}

// clearDelegatedVotes drops a decided proposal's running share counts.
func clearDelegatedVotes(o *Overlay, id uint64) {
	pre := u64(slices.Clone(prefixGovDelegated), id)
	var keys [][]byte
	o.Iterate(pre, prefixEnd(pre), func(k, _ []byte) bool {
		keys = append(keys, slices.Clone(k))
		return true
	})
	for _, k := range keys {
		o.Delete(k)
	}
}

// delegatedVotesMatchDelegations: each voting proposal's share counts
// (govds/) are the recount of its voters' delegations, by their votes; no
// other proposal keeps any.
func delegatedVotesMatchDelegations(s *invariantState) error {
	want := map[string][4]uint64{}
	var err error
	s.kv.Iterate(prefixProposal, prefixEnd(prefixProposal), func(_, b []byte) bool {
		p, e := decodeProposal(b)
		if e != nil {
			err = fmt.Errorf("invariant: %w: %w", e, ErrInternal)
			return false
		}
		if p.Status != ProposalVoting {
			return true
		}
		pre := govVotePrefix(p.ID)
		s.kv.Iterate(pre, prefixEnd(pre), func(k, ov []byte) bool {
			var d address.Address
			copy(d[:], k[len(pre):])
			dp := append(slices.Clone(prefixDelegation), d[:]...)
			s.kv.Iterate(dp, prefixEnd(dp), func(dk, db []byte) bool {
				x := &Delegation{}
				if err = decodeRecord(db, x); err != nil {
					return false
				}
				key := string(govDelegatedKey(p.ID, targetFrom(dk[len(dp):])))
				v := want[key]
				v[ov[0]] += x.Shares
				want[key] = v
				return true
			})
			return err == nil
		})
		return err == nil
	})
	if err != nil {
		return err
	}
	n := 0
	s.kv.Iterate(prefixGovDelegated, prefixEnd(prefixGovDelegated), func(k, b []byte) bool {
		var v [4]uint64
		readUints(b, &v[0], &v[1], &v[2], &v[3])
		if w, ok := want[string(k)]; !ok || w != v {
			err = fmt.Errorf("invariant: delegated vote count %x is %v, the votes and delegations give %v: %w", k, v, w, ErrInternal)
			return false
		}
		n++
		return true
	})
	if err != nil {
		return err
	}
	nonzero := 0
	for _, v := range want {
		if v != ([4]uint64{}) {
			nonzero++
		}
	}
	if n != nonzero {
		return fmt.Errorf("invariant: %d delegated vote counts, the votes and delegations give %d: %w", n, nonzero, ErrInternal)
	}
	return nil
}
