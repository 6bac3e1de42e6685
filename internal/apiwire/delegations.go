package apiwire

import (
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// DelegatorBody is GET /v1/accounts/{addr}/delegations: what an account
// has delegated (each delegation's worth now and the rewards claim_rewards
// would pay for it), its unbonding entries and its redelegations: a page
// of the three lists walked in that order (limit counts their items), the
// totals over all of them.
type DelegatorBody struct {
	Delegator     address.Address                  `json:"delegator"`
	Delegations   []ledger.DelegationInfo          `json:"delegations"`
	Unbonding     []ledger.UnbondingDelegationInfo `json:"unbonding"`
	Redelegations []ledger.RedelegationInfo        `json:"redelegations"`
	// Delegated is the sum of the delegations' amounts, Unbonding the sum
	// of the unbonding entries' balances, PendingRewards the sum of the
	// delegations' pending rewards (usync).
	Delegated      uint64 `json:"delegated"`
	UnbondingTotal uint64 `json:"unbonding_total"`
	PendingRewards uint64 `json:"pending_rewards"`
	NextCursor     string `json:"next_cursor"`
	Height         uint64 `json:"height"`
}

// TargetDelegationsBody is GET /v1/providers/{addr}/delegations: a
// target's pool (its delegated tokens, shares, commission, what its
// delegators lost to slashes) and a page of its delegations by delegator.
type TargetDelegationsBody struct {
	ledger.TargetDelegations
	NextCursor string `json:"next_cursor"`
	Height     uint64 `json:"height"`
}

// ValidatorBody is GET /v1/validators/{addr}: one validator (by its
// operator's address or its consensus address), its delegation pool and
// a page of its delegations. Power follows Bond + Delegated; Total is that sum.
type ValidatorBody struct {
	ledger.ValidatorInfo
	Total       uint64                  `json:"total"`
	Pool        ledger.DelegationPool   `json:"pool"`
	Delegations []ledger.DelegationInfo `json:"delegations"`
	NextCursor  string                  `json:"next_cursor"`
	Height      uint64                  `json:"height"`
}
