package ledger

// The supply: every usync is in a balance (accounts.go), the treasury, a
// provider's stake or unbonding entry (staking.go) or a job's escrow
// (settlement.go); CheckInvariants checks that they add up to Supply.

// Supply returns the total supply in usync.
func Supply(kv KV) uint64 { return getUint(kv, keySupply) }

// Treasury returns the treasury's balance in usync.
func Treasury(kv KV) uint64 { return getUint(kv, keyTreasury) }

// Burned is all the usync ever burned (fees, forfeited deposits).
func Burned(kv KV) uint64 { return getUint(kv, keyBurned) }

// burn takes amount out of the supply for good; the caller has already
// taken it from where it was (a balance, the treasury, a deposit). why
// names the source, for the caller's event.
func burn(o *Overlay, amount uint64, why string) {
	_ = why
	if amount == 0 {
		return
	}
	setUint(o, keySupply, Supply(o)-amount)
	setUint(o, keyBurned, Burned(o)+amount)
}
