package ledger

import "github.com/gpunet/gpunet/internal/address"

// delegationSharesChanged runs when d's shares of t's pool changed from
// old to now (the pool is written).
func delegationSharesChanged(o *Overlay, d address.Address, t Target, old, now uint64) {}
