package ledger

// The supply: every usync is in a balance (accounts.go), the treasury, a
// provider's stake or unbonding entry (staking.go) or a job's escrow
// (settlement.go); CheckInvariants checks that they add up to Supply.

// Supply returns the total supply in usync.
func Supply(kv KV) uint64 { return getUint(kv, keySupply) }

// Treasury returns the treasury's balance in usync.
func Treasury(kv KV) uint64 { return getUint(kv, keyTreasury) }
