package ledger

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// delegationsAddUp: each pool's shares are the sum of its delegations'
// (and a pool with no shares holds no tokens), each pool holds at least
// what its delegations' rewards come to, the totals chain/delbonded and
// chain/delrewards are the pools' sums, every delegation is indexed by
// its target and every index entry names a delegation, and each target's
// record carries its pool's tokens (Validator.Delegated,
// Provider.Delegated).
func delegationsAddUp(s *invariantState) error {
	type sums struct{ shares, owed uint64 }
	pools := map[string]*DelegationPool{}
	var order []string
	var err error
	s.kv.Iterate(prefixDelPool, prefixEnd(prefixDelPool), func(k, b []byte) bool {
		p := &DelegationPool{}
		if e := decodeRecord(b, p); e != nil || len(k) != len(prefixDelPool)+targetLen {
			err = fmt.Errorf("invariant: delegation pool %x unreadable (%v): %w", k, e, ErrInternal)
			return false
		}
		key := string(k[len(prefixDelPool):])
		pools[key] = p
		order = append(order, key)
		return true
	})
	if err != nil {
		return err
	}
	got := map[string]*sums{}
	n := 0
	s.kv.Iterate(prefixDelegation, prefixEnd(prefixDelegation), func(k, b []byte) bool {
		n++
		x := &Delegation{}
		if e := decodeRecord(b, x); e != nil || len(k) != len(prefixDelegation)+address.Len+targetLen || x.Shares == 0 {
			err = fmt.Errorf("invariant: delegation %x unreadable or empty (%v): %w", k, e, ErrInternal)
			return false
		}
		var d address.Address
		copy(d[:], k[len(prefixDelegation):])
		t := targetFrom(k[len(prefixDelegation)+address.Len:])
		p := pools[string(t.bytes())]
		if p == nil {
			err = fmt.Errorf("invariant: delegation of %s to %s, which has no pool: %w", d, t, ErrInternal)
			return false
		}
		if s.kv.Get(delByTargetKey(t, d)) == nil {
			err = fmt.Errorf("invariant: delegation of %s to %s is not indexed by target: %w", d, t, ErrInternal)
			return false
		}
		sm := got[string(t.bytes())]
		if sm == nil {
			sm = &sums{}
			got[string(t.bytes())] = sm
		}
		sm.shares += x.Shares
		sm.owed += p.pendingReward(x)
		return true
	})
	if err != nil {
		return err
	}
	idx := 0
	s.kv.Iterate(prefixDelByTarget, prefixEnd(prefixDelByTarget), func(_, _ []byte) bool { idx++; return true })
	if idx != n {
		return fmt.Errorf("invariant: %d delegations, %d entries in their index by target: %w", n, idx, ErrInternal)
	}
	var tokens, rewards uint64
	for _, key := range order {
		p, t := pools[key], targetFrom([]byte(key))
		sm := got[key]
		if sm == nil {
			sm = &sums{}
		}
		switch {
		case sm.shares != p.Shares:
			return fmt.Errorf("invariant: pool of %s has %d shares, its delegations %d: %w", t, p.Shares, sm.shares, ErrInternal)
		case p.Shares == 0 && p.Tokens != 0:
			return fmt.Errorf("invariant: pool of %s has %d tokens and no shares: %w", t, p.Tokens, ErrInternal)
		case sm.owed > p.Rewards:
			return fmt.Errorf("invariant: pool of %s holds %d rewards, its delegations are owed %d: %w", t, p.Rewards, sm.owed, ErrInternal)
		}
		tokens += p.Tokens
		rewards += p.Rewards
		if err := targetCarries(s, t, p.Tokens); err != nil {
			return err
		}
	}
	if b := DelegatedTotal(s.kv); b != tokens {
		return fmt.Errorf("invariant: chain/delbonded %d, the pools hold %d: %w", b, tokens, ErrInternal)
	}
	if r := DelegationRewards(s.kv); r != rewards {
		return fmt.Errorf("invariant: chain/delrewards %d, the pools hold %d: %w", r, rewards, ErrInternal)
	}
	// A target with delegated tokens has a pool saying so.
	for _, v := range s.vals {
		if v.Delegated != 0 && pools[string(Target{TargetValidator, v.Operator}.bytes())] == nil {
			return fmt.Errorf("invariant: validator %s has %d delegated and no pool: %w", v.ConsAddress(), v.Delegated, ErrInternal)
		}
	}
	for _, p := range s.providers {
		if p.Delegated != 0 && pools[string(Target{TargetProvider, p.Address}.bytes())] == nil {
			return fmt.Errorf("invariant: provider %s has %d delegated and no pool: %w", p.Address, p.Delegated, ErrInternal)
		}
	}
	return nil
}

// targetCarries checks that t's record carries its pool's tokens.
func targetCarries(s *invariantState, t Target, tokens uint64) error {
	switch t.Kind {
	case TargetValidator:
		for _, v := range s.vals {
			if v.Operator == t.Address {
				if v.Delegated != tokens {
					return fmt.Errorf("invariant: validator %s carries %d delegated, its pool holds %d: %w", v.ConsAddress(), v.Delegated, tokens, ErrInternal)
				}
				return nil
			}
		}
	case TargetProvider:
		i, ok := slices.BinarySearchFunc(s.providers, t.Address, func(p *Provider, a address.Address) int { return bytes.Compare(p.Address[:], a[:]) })
		if ok {
			if p := s.providers[i]; p.Delegated != tokens {
				return fmt.Errorf("invariant: provider %s carries %d delegated, its pool holds %d: %w", p.Address, p.Delegated, tokens, ErrInternal)
			}
			return nil
		}
	}
	return fmt.Errorf("invariant: a delegation pool for %s, which does not exist: %w", t, ErrInternal)
}

// delegationEntriesAddUp: chain/delunbonding is the sum of the unbonding
// entries' balances; every unbonding and redelegation record has entries,
// its index entry, and a queue entry at each of its completion heights;
// every queue and index entry names a record.
func delegationEntriesAddUp(s *invariantState) error {
	var total uint64
	var err error
	n := 0
	s.kv.Iterate(prefixDelUnbond, prefixEnd(prefixDelUnbond), func(k, b []byte) bool {
		n++
		u := &UnbondingDelegation{}
		if e := decodeRecord(b, u); e != nil || len(u.Entries) == 0 {
			err = fmt.Errorf("invariant: unbonding delegation %x unreadable or empty (%v): %w", k, e, ErrInternal)
			return false
		}
		var d address.Address
		copy(d[:], k[len(prefixDelUnbond):])
		t := targetFrom(k[len(prefixDelUnbond)+address.Len:])
		if s.kv.Get(delUnbondTKey(t, d)) == nil {
			err = fmt.Errorf("invariant: unbonding of %s from %s is not indexed by target: %w", d, t, ErrInternal)
			return false
		}
		for _, e := range u.Entries {
			total += e.Balance
			if s.kv.Get(delUnbondQKey(e.CompletionHeight, d, t)) == nil {
				err = fmt.Errorf("invariant: unbonding of %s from %s completing at %d is not queued: %w", d, t, e.CompletionHeight, ErrInternal)
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	if u := DelegationUnbonding(s.kv); u != total {
		return fmt.Errorf("invariant: chain/delunbonding %d, the entries hold %d: %w", u, total, ErrInternal)
	}
	idx := 0
	s.kv.Iterate(prefixDelUnbondT, prefixEnd(prefixDelUnbondT), func(_, _ []byte) bool { idx++; return true })
	if idx != n {
		return fmt.Errorf("invariant: %d unbonding delegations, %d index entries: %w", n, idx, ErrInternal)
	}
	s.kv.Iterate(prefixDelUnbondQ, prefixEnd(prefixDelUnbondQ), func(k, _ []byte) bool {
		rest := k[len(prefixDelUnbondQ)+8:]
		var d address.Address
		copy(d[:], rest)
		if s.kv.Get(delUnbondKey(d, targetFrom(rest[address.Len:]))) == nil {
			err = fmt.Errorf("invariant: unbonding queue entry %x names no record: %w", k, ErrInternal)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	n = 0
	s.kv.Iterate(prefixRedelegation, prefixEnd(prefixRedelegation), func(k, b []byte) bool {
		n++
		r := &Redelegation{}
		if e := decodeRecord(b, r); e != nil || len(r.Entries) == 0 {
			err = fmt.Errorf("invariant: redelegation %x unreadable or empty (%v): %w", k, e, ErrInternal)
			return false
		}
		rest := k[len(prefixRedelegation):]
		var d address.Address
		copy(d[:], rest)
		src, dst := targetFrom(rest[address.Len:]), targetFrom(rest[address.Len+targetLen:])
		if s.kv.Get(redelSourceKey(src, d, dst)) == nil {
			err = fmt.Errorf("invariant: redelegation of %s from %s is not indexed by source: %w", d, src, ErrInternal)
			return false
		}
		for _, e := range r.Entries {
			if s.kv.Get(redelQueueKey(e.CompletionHeight, d, src, dst)) == nil {
				err = fmt.Errorf("invariant: redelegation of %s from %s completing at %d is not queued: %w", d, src, e.CompletionHeight, ErrInternal)
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	idx = 0
	s.kv.Iterate(prefixRedelBySource, prefixEnd(prefixRedelBySource), func(_, _ []byte) bool { idx++; return true })
	if idx != n {
		return fmt.Errorf("invariant: %d redelegations, %d index entries: %w", n, idx, ErrInternal)
	}
	s.kv.Iterate(prefixRedelQueue, prefixEnd(prefixRedelQueue), func(k, _ []byte) bool {
		rest := k[len(prefixRedelQueue)+8:]
		var d address.Address
		copy(d[:], rest)
		if s.kv.Get(redelKey(d, targetFrom(rest[address.Len:]), targetFrom(rest[address.Len+targetLen:]))) == nil {
			err = fmt.Errorf("invariant: redelegation queue entry %x names no record: %w", k, ErrInternal)
			return false
		}
		return true
	})
	return err
}
