package ledger

import (
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// Slashing delegations, by the Cosmos SDK's rules (x/staking's Slash): a
// slash of a validator or provider at rate r takes r of its pool's tokens
// (one write: every share is worth r less), r of the initial amount of
// each unbonding entry from it created at or after the infraction height
// (from what is left of it), and r of the initial amount of each
// redelegation from it created at or after that height, taken out of the
// shares the redelegation bought at its destination. What is taken goes
// to the treasury. Stake that left before the infraction is not touched:
// it was not bonded when the fault was done.

// slashPool slashes t's delegators at rate (ppm) for an infraction at
// height since, and returns the pool's tokens after it and the amount
// taken. The caller sets the target's Delegated to the tokens returned
// (it holds the target's record) and pays the treasury.
func slashPool(o *Overlay, t Target, rate, since uint64) (tokens, taken uint64, err error) {
	if o.Get(delPoolKey(t)) == nil {
		return 0, 0, nil // never delegated to: nothing to slash
	}
	pool, err := GetDelegationPool(o, t)
	if err != nil || rate == 0 {
		return pool.Tokens, 0, err
	}
	take := mulDiv(pool.Tokens, rate, ppm)
	pool.Tokens -= take
	pool.Slashed += take
	taken = take

	// Unbonding entries.
	pre := append(slices.Clone(prefixDelUnbondT), t.bytes()...)
	var ds []address.Address
	o.Iterate(pre, prefixEnd(pre), func(k, _ []byte) bool {
		var d address.Address
		copy(d[:], k[len(pre):])
		ds = append(ds, d)
		return true
	})
	for _, d := range ds {
		u, err := getUnbondingDelegation(o, d, t)
		if err != nil {
			return 0, 0, err
		}
		var cut uint64
		for i := range u.Entries {
			e := &u.Entries[i]
			if e.CreationHeight < since || e.Balance == 0 {
				continue
			}
			c := min(mulDiv(e.Initial, rate, ppm), e.Balance)
			e.Balance -= c
			cut += c
		}
		if cut > 0 {
			setUnbondingDelegation(o, d, t, u)
			setUint(o, keyDelUnbonding, DelegationUnbonding(o)-cut)
			pool.Slashed += cut
			taken += cut
		}
	}
	if err := setPool(o, t, pool); err != nil {
		return 0, 0, err
	}

	// Redelegations from t: taken from their destinations.
	pre = append(slices.Clone(prefixRedelBySource), t.bytes()...)
	type redel struct {
		d   address.Address
		dst Target
	}
	var rs []redel
	o.Iterate(pre, prefixEnd(pre), func(k, _ []byte) bool {
		var r redel
		copy(r.d[:], k[len(pre):])
		r.dst = targetFrom(k[len(pre)+address.Len:])
		rs = append(rs, r)
		return true
	})
	for _, r := range rs {
		red, err := getRedelegation(o, r.d, t, r.dst)
		if err != nil {
			return 0, 0, err
		}
		changed := false
		for i := range red.Entries {
			e := &red.Entries[i]
			if e.CreationHeight < since || e.Shares == 0 {
				continue
			}
			n, err := slashRedelegated(o, r.d, r.dst, mulDiv(e.Initial, rate, ppm), e.Shares)
			if err != nil {
				return 0, 0, err
			}
			e.Shares -= n.shares
			taken += n.tokens
			pool.Slashed += n.tokens
			changed = true
		}
		if changed {
			setRedelegation(o, r.d, t, r.dst, red)
		}
	}
	if len(rs) > 0 {
		if err := setPool(o, t, pool); err != nil { // Slashed
			return 0, 0, err
		}
	}
	return pool.Tokens, taken, nil
}

type slashed struct{ shares, tokens uint64 }

// slashRedelegated takes up to amt tokens' worth of d's delegation to dst,
// at most maxShares shares of it (what the redelegation bought), out of
// dst's pool: its shares are unbonded and their tokens burned into the
// treasury by the caller.
func slashRedelegated(o *Overlay, d address.Address, dst Target, amt, maxShares uint64) (slashed, error) {
	pool, err := GetDelegationPool(o, dst)
	if err != nil {
		return slashed{}, err
	}
	x, ok, err := GetDelegation(o, d, dst)
	if err != nil || !ok || amt == 0 || pool.Tokens == 0 {
		return slashed{}, err // undelegated since: nothing left to take there
	}
	shares := min(pool.sharesForCeil(amt), maxShares, x.Shares)
	tokens := pool.tokensFor(shares)
	if err := settleDelegation(o, d, pool, x); err != nil {
		return slashed{}, err
	}
	old := x.Shares
	pool.Tokens -= tokens
	pool.Shares -= shares
	x.Shares -= shares
	if err := setPool(o, dst, pool); err != nil {
		return slashed{}, err
	}
	setDelegation(o, d, dst, x)
	delegationSharesChanged(o, d, dst, old, x.Shares)
	return slashed{shares, tokens}, syncTarget(o, dst, pool.Tokens)
}
