package apiwire

import "github.com/gpunet/gpunet/internal/ledger"

// ValidatorList is GET /v1/validators: every validator the ledger knows,
// the set first (by power), then the others by bond.
type ValidatorList struct {
	Validators []ledger.ValidatorInfo `json:"validators"`
	// Managed is false on a chain whose genesis listed no ledger
	// validators: its set is CometBFT's genesis set, fixed, and the list
	// is empty.
	Managed bool `json:"managed"`
	// TotalPower is the set's voting power; Window the downtime window
	// that missed blocks count over (params.downtime_window).
	TotalPower uint64 `json:"total_power"`
	Window     uint64 `json:"window"`
	Height     uint64 `json:"height"`
}
