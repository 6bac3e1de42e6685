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
	// Attestation is its TEE attestation as of Height's block time.
	Attestation ProviderAttestation `json:"attestation"`
	Height      uint64              `json:"height"`
}

// The states of a provider's TEE attestation (ProviderAttestation.State).
const (
	// AttestNone: no TEE evidence accepted (perhaps a nonce pending).
	AttestNone = "none"
	// AttestValid: accepted, unexpired, over the key it declares now:
	// trust: tee jobs may be placed on it and granted their key.
	AttestValid = "attested"
	// AttestExpired: accepted evidence whose expiry has passed.
	AttestExpired = "expired"
	// AttestKeyChanged: accepted evidence over a key the provider no
	// longer declares.
	AttestKeyChanged = "key_changed"
)

// ProviderAttestation is what a provider's TEE evidence proved, as of a
// block time (AsOf): its State, and, unless none, the evidence's kind,
// launch measurement, TCB status, the key it bound, the height it was
// accepted at and its expiry (unix seconds).
type ProviderAttestation struct {
	State       string `json:"state"`
	Kind        string `json:"kind,omitempty"`
	Measurement string `json:"measurement,omitempty"`
	TCBStatus   string `json:"tcb_status,omitempty"`
	Key         string `json:"key,omitempty"`
	Height      uint64 `json:"height,omitempty"`
	Expiry      int64  `json:"expiry,omitempty"`
	AsOf        int64  `json:"as_of"`
	// GPUs are its GPUs whose NVIDIA evidence the chain verified, with
	// the identity their certificate gives (ledger.AttestedGPU), whatever
	// State says of its CPU TEE.
	GPUs []AttestedGPU `json:"gpus,omitempty"`
}

// AttestedGPU is one attested GPU as of a block time: State attested or
// expired.
type AttestedGPU struct {
	ledger.AttestedGPU
	State string `json:"state"`
}

// attestedGPUsOf is p's attested GPUs at unix time now.
func attestedGPUsOf(p *ledger.Provider, now int64) []AttestedGPU {
	if p.TEE == nil {
		return nil
	}
	var out []AttestedGPU
	for _, g := range p.TEE.GPUs {
		st := AttestValid
		if now >= g.Expiry {
			st = AttestExpired
		}
		out = append(out, AttestedGPU{AttestedGPU: g, State: st})
	}
	return out
}

// AttestationOf is p's attestation at unix time now.
func AttestationOf(p *ledger.Provider, now int64) ProviderAttestation {
	a := p.TEE
	if a == nil || a.Kind == "" {
		return ProviderAttestation{State: AttestNone, AsOf: now, GPUs: attestedGPUsOf(p, now)}
	}
	out := ProviderAttestation{State: AttestValid, Kind: a.Kind, Measurement: a.Measurement, TCBStatus: a.TCBStatus,
		Key: a.Key, Height: a.Height, Expiry: a.Expiry, AsOf: now, GPUs: attestedGPUsOf(p, now)}
	switch {
	case now >= a.Expiry:
		out.State = AttestExpired
	case a.Key != p.EncryptionKey:
		out.State = AttestKeyChanged
	}
	return out
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
