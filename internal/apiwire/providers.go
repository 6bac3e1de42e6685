package apiwire

import (
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
)

// ProviderBody is GET /v1/providers/{addr}: the provider's offer (the
// fields the offers query searches) and its full ledger record.
type ProviderBody struct {
	offers.Offer
	Schedulable   bool                      `json:"schedulable"`
	RequiredStake uint64                    `json:"required_stake"`
	Record        *ledger.Provider          `json:"record"`
	Unbonding     []ledger.Unbonding        `json:"unbonding"`
	Challenge     *ledger.LivenessChallenge `json:"challenge,omitempty"`
	Height        uint64                    `json:"height"`
}

// ProviderOffer is a provider in a list: its offer and what it earned.
type ProviderOffer struct {
	offers.Offer
	Earned uint64 `json:"earned"` // usync paid for its jobs
	// Schedulable: online and staked the minimum, so jobs may be placed
	// on it now.
	Schedulable bool `json:"schedulable"`
}

// ProviderList is GET /v1/providers.
type ProviderList struct {
	Providers  []ProviderOffer `json:"providers"`
	NextCursor string          `json:"next_cursor"`
	Height     uint64          `json:"height"`
}

// OfferList is GET /v1/offers.
type OfferList struct {
	Offers     []ProviderOffer `json:"offers"`
	NextCursor string          `json:"next_cursor"`
	// Total is how many providers match the query, on all pages.
	Total  int    `json:"total"`
	Height uint64 `json:"height"`
}
