package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// The running tally, govt/<id> → four 8-byte sums (yes, no, abstain,
// veto): each proposal in its voting period keeps the weight of its votes
// as they are now. A vote adds its voter's weight to its option (moving
// it when the vote changes); a change of a voter's weight (setGovWeight,
// the one place weights change) moves each of its votes on the active
// proposals by the difference. The tally at the period's end is then one
// read, whatever the number of voters, and the work is spread over the
// txs that cause it: a vote costs one read and write more, a stake change
// one read per active proposal. It is derived state, left out of the app
// hash (keys.go); runningTalliesMatchVotes recounts it from the votes and
// the weights on every checked block.

func runningTallyKey(id uint64) []byte { return u64(slices.Clone(prefixGovRunning), id) }

// runningTally reads proposal id's running tally.
func runningTally(kv KV, id uint64) [4]uint64 {
	var t [4]uint64
	if b := kv.Get(runningTallyKey(id)); len(b) == 32 {
		for i := range t {
			t[i] = binary.BigEndian.Uint64(b[8*i:])
		}
	}
	return t
}

func setRunningTally(o *Overlay, id uint64, t [4]uint64) {
	if t == ([4]uint64{}) {
		if k := runningTallyKey(id); o.Get(k) != nil {
			o.Delete(k)
		}
		return
	}
	b := make([]byte, 32)
	for i, v := range t {
		binary.BigEndian.PutUint64(b[8*i:], v)
	}
	o.Set(runningTallyKey(id), b)
}

// moveVote records in id's running tally that a vote of weight w moved
// from option from (-1: no vote before) to option to.
func moveVote(o *Overlay, id uint64, from, to int, w uint64) {
	t := runningTally(o, id)
	if from >= 0 {
		t[from] -= w
	}
	t[to] += w
	setRunningTally(o, id, t)
}

// reweighVotes moves a's votes on the active proposals from weight old to
// weight w.
func reweighVotes(o *Overlay, a address.Address, old, w uint64) {
	var ids []uint64
	o.Iterate(prefixGovQueue, prefixEnd(prefixGovQueue), func(k, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(k[len(prefixGovQueue)+8:]))
		return true
	})
	for _, id := range ids {
		v := o.Get(govVoteKey(id, a))
		if len(v) != 1 || int(v[0]) >= len(voteOptions) {
			continue // no vote (a proposal in its deposit period has none)
		}
		t := runningTally(o, id)
		t[v[0]] = t[v[0]] - old + w
		setRunningTally(o, id, t)
	}
}

// recountVotes counts proposal id's votes from the votes and the weight
// index: what the running tally must hold.
func recountVotes(kv KV, id uint64) ([4]uint64, error) {
	var t [4]uint64
	var err error
	pre := govVotePrefix(id)
	wk := append(slices.Clone(prefixGovWeight), make([]byte, address.Len)...)
	kv.Iterate(pre, prefixEnd(pre), func(k, b []byte) bool {
		if len(b) != 1 || int(b[0]) >= len(voteOptions) {
			err = fmt.Errorf("vote %x: bad value %x: %w", k, b, ErrInternal)
			return false
		}
		copy(wk[len(prefixGovWeight):], k[len(pre):])
		t[b[0]] += getUint(kv, wk)
		return true
	})
	return t, err
}

// runningTalliesMatchVotes: each voting proposal's running tally is the
// recount of its votes at their voters' weights, and no other proposal
// keeps one.
func runningTalliesMatchVotes(s *invariantState) error {
	var err error
	s.kv.Iterate(prefixProposal, prefixEnd(prefixProposal), func(_, b []byte) bool {
		p, e := decodeProposal(b)
		if e != nil {
			err = fmt.Errorf("invariant: %w: %w", e, ErrInternal)
			return false
		}
		want := [4]uint64{}
		if p.Status == ProposalVoting {
			if want, e = recountVotes(s.kv, p.ID); e != nil {
				err = e
				return false
			}
		}
		if got := runningTally(s.kv, p.ID); got != want {
			err = fmt.Errorf("invariant: proposal %d (%s) keeps a running tally of %v, its votes count %v: %w", p.ID, p.Status, got, want, ErrInternal)
			return false
		}
		return true
	})
	return err
}
