package ledger

import (
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// The voting weight index, govw/<address> → weight: each account's
// provider stake plus its validator's bond (unless tombstoned), what
// VotingWeight computes from the records. setProviderFrom and
// setValidator keep it current whenever a stake or a bond changes, so
// that the tally reads one 8-byte entry per vote instead of a provider and
// a validator record. It is derived state, left out of the app hash
// (keys.go) and rebuilt by votingWeightsMatchRecords.

func govWeightKey(a address.Address) []byte { return append(slices.Clone(prefixGovWeight), a[:]...) }

// weightOf reads a's voting weight from the index.
func weightOf(kv KV, a address.Address) uint64 { return getUint(kv, govWeightKey(a)) }

func setGovWeight(o *Overlay, a address.Address, w uint64) {
	k := govWeightKey(a)
	if old := getUint(o, k); old != w {
		reweighVotes(o, a, old, w)
	}
	switch {
	case w != 0:
		setUint(o, k, w)
	case o.Get(k) != nil:
		o.Delete(k)
	}
}

// validatorWeightChanged runs when v's bond or tombstone changed (v is
// written; its operator entry may not be yet).
func validatorWeightChanged(o *Overlay, v *Validator) {
	w := validatorWeight(v)
	if p, ok, _ := GetProvider(o, v.Operator); ok {
		w += p.Stake
	}
	setGovWeight(o, v.Operator, w)
}

// providerWeightChanged runs when p's stake changed (p is written).
func providerWeightChanged(o *Overlay, p *Provider) {
	w := p.Stake
	if c, ok := ValidatorOf(o, p.Address); ok {
		if v, ok, _ := GetValidator(o, c); ok {
			w += validatorWeight(v)
		}
	}
	setGovWeight(o, p.Address, w)
}

func validatorWeight(v *Validator) uint64 {
	if v.Tombstoned {
		return 0
	}
	return v.Bond
}

// votingWeightsMatchRecords: the index holds exactly the nonzero weights
// the provider and validator records give.
func votingWeightsMatchRecords(s *invariantState) error {
	want := map[address.Address]uint64{}
	for _, p := range s.providers {
		want[p.Address] += p.Stake
	}
	for _, v := range s.vals {
		want[v.Operator] += validatorWeight(v)
	}
	n := 0
	var err error
	s.kv.Iterate(prefixGovWeight, prefixEnd(prefixGovWeight), func(k, b []byte) bool {
		n++
		var a address.Address
		copy(a[:], k[len(prefixGovWeight):])
		if w := getUint(s.kv, k); w == 0 || w != want[a] {
			err = fmt.Errorf("invariant: voting weight of %s is %d, its stake and bond are %d: %w", a, w, want[a], ErrInternal)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	nonzero := 0
	for _, w := range want {
		if w != 0 {
			nonzero++
		}
	}
	if n != nonzero {
		return fmt.Errorf("invariant: %d voting weight entries, the records give %d: %w", n, nonzero, ErrInternal)
	}
	return nil
}
