package ledger

import (
	"fmt"
	"math/big"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// Delegation rewards, after the Cosmos SDK's x/distribution (F1), lazily:
// what a validator or provider earns (its fee share and emission share, a
// provider's epoch rewards when settled) is split between it and its pool
// by stake, own against delegated; its commission comes off the pool's
// part and goes to it; the rest raises the pool's reward per share and is
// held in the pool (chain/delrewards). A delegation is paid shares × the
// rise of the reward per share since it was last settled: when its shares
// change, and on claim_rewards. So distributing is one write per target,
// whatever its number of delegations, and an epoch's end does not grow
// with them. F1 keeps a ratio per period and a delegation's starting
// period, because its stake shrinks with slashes; here a delegation holds
// shares, which slashes do not touch, so one cumulative ratio and the
// value at the delegation's last settlement say the same.

// distributeToTarget splits amt earned by t, whose own stake is own,
// between t and its delegators, and returns t's part (its own share and
// its commission). The delegators' part moves into the pool; the caller
// pays t's part and accounts for amt leaving where it came from.
func distributeToTarget(o *Overlay, t Target, own, amt uint64) (uint64, error) {
	if amt == 0 {
		return 0, nil
	}
	pool, err := GetDelegationPool(o, t)
	if err != nil {
		return 0, err
	}
	if pool.Tokens == 0 || pool.Shares == 0 {
		return amt, nil
	}
	delegated := mulDiv(amt, pool.Tokens, own+pool.Tokens)
	commission := mulDiv(delegated, pool.CommissionPPM, ppm)
	toPool := delegated - commission
	if toPool == 0 {
		return amt, nil
	}
	rise := new(big.Int).Mul(new(big.Int).SetUint64(toPool), rewardScale)
	rise.Quo(rise, new(big.Int).SetUint64(pool.Shares))
	pool.RewardPerShare = rise.Add(rise, bigOf(pool.RewardPerShare)).Bytes()
	pool.Rewards += toPool
	if err := setPool(o, t, pool); err != nil {
		return 0, err
	}
	return amt - toPool, nil
}

// settleDelegation pays d what x earned in pool since it was last
// settled, and starts it anew at the pool's reward per share. The caller
// writes pool and x.
func settleDelegation(o *Overlay, d address.Address, pool *DelegationPool, x *Delegation) error {
	amt := pool.pendingReward(x)
	x.RewardStart = slices.Clone(pool.RewardPerShare)
	if amt == 0 {
		return nil
	}
	pool.Rewards -= amt
	acct, err := GetAccount(o, d)
	if err != nil {
		return err
	}
	acct.Balance += amt
	setAccount(o, &acct)
	return nil
}

// claimDelegationRewards settles each of d's delegations and returns what
// they paid.
func claimDelegationRewards(o *Overlay, d address.Address) (uint64, error) {
	pre := append(slices.Clone(prefixDelegation), d[:]...)
	var targets []Target
	o.Iterate(pre, prefixEnd(pre), func(k, _ []byte) bool {
		targets = append(targets, targetFrom(k[len(pre):]))
		return true
	})
	var total uint64
	for _, t := range targets {
		pool, err := GetDelegationPool(o, t)
		if err != nil {
			return 0, err
		}
		x, ok, err := GetDelegation(o, d, t)
		if err != nil || !ok {
			return 0, fmt.Errorf("delegation of %s to %s: %w", d, t, err)
		}
		before := pool.Rewards
		if err := settleDelegation(o, d, pool, x); err != nil {
			return 0, err
		}
		if before == pool.Rewards {
			continue
		}
		total += before - pool.Rewards
		if err := setPool(o, t, pool); err != nil {
			return 0, err
		}
		setDelegation(o, d, t, x)
	}
	return total, nil
}
