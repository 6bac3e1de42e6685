package ledger

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// GPU identity from the silicon (issue 31, docs/confidential.md). An
// NVIDIA GPU in confidential-computing mode signs an SPDM measurement
// report with a key NVIDIA certified for that GPU; a MsgAttest may carry
// such evidence for each of the provider's GPUs, over the same nonce and
// key as its CPU TEE's evidence (the SPDM nonce is the first 32 bytes of
// the report data), or alone (kind nvidia-gpu). Each GPU's attested
// identity is its DeviceID certificate's serial number, which the GPU
// cannot fake and another provider cannot copy. The ledger records, per
// GPU, that identity, the UUID the agent attested it under (the evidence
// does not sign the UUID), the measurement and the expiry
// (Attestation.GPUs), and binds both the identity and the UUID to the
// provider while it is online (gpubind.go):
//
//   - an identity is held by one provider: evidence of a GPU another
//     provider holds moves it (the fresh nonce proves the GPU answers to
//     this provider's agent now), and the other provider's record of it
//     is dropped;
//   - an attested UUID beats a self-reported one: the online provider that
//     declares the UUID without an unexpired attestation of it (a
//     squatter) is taken offline, which releases its GPUs; evidence for a
//     UUID another provider has an unexpired attestation of is refused;
//   - going offline releases the attested GPUs and drops their records,
//     like declared ones; the agent attests them again.
//
// GPU evidence alone does not make a provider attested for trust: tee:
// its CPU (where the job's key and data are decrypted) is not a TEE.

// TEEKindNVIDIAGPU is MsgAttest.Kind for GPU evidence alone.
const TEEKindNVIDIAGPU = "nvidia-gpu"

// gpuCertChainName is the collateral name the verifier takes an NVIDIA
// GPU's certificate chain under (attest.GPUCertChain).
const gpuCertChainName = "gpu_cert_chain.pem"

// Bounds of a MsgAttest's GPU evidence: NVML's buffers are 8 KiB for the
// report and 5 KiB for the chain (PEM).
const (
	maxAttestGPUs    = 8
	maxGPUReport     = 8 << 10
	maxGPUCertChain  = 16 << 10
	maxGPUIdentity   = 64
	maxGPUUUIDLength = 96
)

// AttestGPU is one GPU's evidence in a MsgAttest.
type AttestGPU struct {
	// UUID is the GPU's NVML UUID the evidence is for. The evidence does
	// not sign it: the chain binds it to the attested identity.
	UUID string `json:"uuid"`
	// Evidence is the SPDM GET_MEASUREMENTS request and response NVML
	// returned; CertChain the GPU's attestation chain (PEM).
	Evidence  []byte `json:"evidence"`
	CertChain []byte `json:"cert_chain"`
	// CC is the GPU's confidential-computing mode as NVML reported it to
	// the agent (GPUCCOn, GPUCCDevTools, GPUCCOff; "" not reported). Hopper's
	// signed report does not carry it, so it is recorded as the agent's
	// word, and shown as such.
	CC string `json:"cc,omitempty"`
}

// GPU confidential-computing modes an agent reports (AttestGPU.CC).
const (
	GPUCCOn       = "on"
	GPUCCDevTools = "devtools" // CC on with developer tools: memory readable by the host's tools
	GPUCCOff      = "off"
)

// AttestedGPU is a GPU whose evidence the chain verified.
type AttestedGPU struct {
	UUID string `json:"uuid"`
	// ID is the attested identity: the DeviceID certificate's serial
	// number, upper-case hex.
	ID string `json:"id"`
	// Measurement is SHA-384 of the signed measurement record (hex).
	Measurement string `json:"measurement"`
	// Mode is the multi-GPU mode the evidence shows (SPT, MPT, PPCIE), or
	// "" where it shows none.
	Mode string `json:"mode,omitempty"`
	// CC is the confidential-computing mode the agent reported with the
	// evidence (AttestGPU.CC): not signed by the GPU.
	CC     string `json:"cc,omitempty" rec:"since=8"`
	Height uint64 `json:"height"`
	Expiry int64  `json:"expiry"`
}

// attestedGPUs returns p's attested GPUs (nil for nil or none).
func attestedGPUs(p *Provider) []AttestedGPU {
	if p == nil || p.TEE == nil {
		return nil
	}
	return p.TEE.GPUs
}

// attestedKey is the binding key of an attested identity.
func attestedKey(id string) []byte {
	return append(slices.Clone(prefixGPUAttested), foldASCII(id)...)
}

// checkAttestGPUs is ValidateBasic's check of a MsgAttest's GPUs.
func checkAttestGPUs(gpus []AttestGPU) error {
	if len(gpus) > maxAttestGPUs {
		return invalid("%d GPUs' evidence, at most %d", len(gpus), maxAttestGPUs)
	}
	for i, g := range gpus {
		if g.UUID == "" || len(g.UUID) > maxGPUUUIDLength || strings.ContainsAny(g.UUID, "\x00/") {
			return invalid("gpus[%d].uuid %q: want the GPU's NVML UUID, 1 to %d bytes", i, g.UUID, maxGPUUUIDLength)
		}
		for j := range i {
			if foldASCII(gpus[j].UUID) == foldASCII(g.UUID) {
				return invalid("gpus[%d].uuid %q is gpus[%d]'s: each GPU once", i, g.UUID, j)
			}
		}
		if len(g.Evidence) == 0 || len(g.Evidence) > maxGPUReport {
			return invalid("gpus[%d].evidence of %d bytes: want 1 to %d", i, len(g.Evidence), maxGPUReport)
		}
		if len(g.CertChain) == 0 || len(g.CertChain) > maxGPUCertChain {
			return invalid("gpus[%d].cert_chain of %d bytes: want 1 to %d", i, len(g.CertChain), maxGPUCertChain)
		}
		switch g.CC {
		case "", GPUCCOn, GPUCCDevTools, GPUCCOff:
		default:
			return invalid("gpus[%d].cc %q: want on, devtools, off, or leave it out", i, g.CC)
		}
	}
	return nil
}

// attestGPUs verifies each GPU's evidence over nonce and p's key, then
// applies the identity rules above: it returns p's new attested GPUs
// (p itself is written by the caller) and writes the providers that lose
// a GPU or go offline.
func (l *Ledger) attestGPUs(o *Overlay, p *Provider, msgGPUs []AttestGPU, roots [][]byte, nonce []byte, params Params, info BlockInfo) ([]AttestedGPU, []Event, error) {
	if !p.Online {
		return nil, nil, fmt.Errorf("%s is offline: attested GPUs are bound to an online provider (go online, then attest its GPUs): %w", p.Address, ErrAttestation)
	}
	out := make([]AttestedGPU, 0, len(msgGPUs))
	for i, g := range msgGPUs {
		claims, err := l.Attest(AttestRequest{
			Kind: TEEKindNVIDIAGPU, Raw: g.Evidence, Collateral: map[string][]byte{gpuCertChainName: g.CertChain},
			Roots: roots, Now: info.Time, Nonce: nonce, Key: []byte(p.EncryptionKey),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("gpus[%d] (%s): nvidia-gpu evidence refused: %w: %w", i, g.UUID, err, ErrAttestation)
		}
		if claims.GPUID == "" || len(claims.GPUID) > maxGPUIdentity || len(claims.Measurement) == 0 || len(claims.Measurement) > maxMeasurementHex || len(claims.GPUMode) > 32 {
			return nil, nil, fmt.Errorf("verifier's GPU claims out of bounds (identity %q): %w", claims.GPUID, ErrInternal)
		}
		for j, prev := range out {
			if foldASCII(prev.ID) == foldASCII(claims.GPUID) {
				return nil, nil, fmt.Errorf("gpus[%d] and gpus[%d] are the same GPU (identity %s) under two UUIDs: %w", j, i, claims.GPUID, ErrAttestation)
			}
		}
		out = append(out, AttestedGPU{
			UUID: g.UUID, ID: claims.GPUID, Measurement: strings.ToLower(claims.Measurement), Mode: claims.GPUMode, CC: g.CC,
			Height: uint64(info.Height), Expiry: capExpiry(claims.Expiry, params, info),
		})
	}
	// Refusals first: a UUID another provider holds by its own unexpired
	// attestation under another identity.
	now := info.Time.Unix()
	for i, g := range out {
		h, err := gpuHolder(o, append(slices.Clone(prefixGPUUUID), foldASCII(g.UUID)...), p.Address)
		if err != nil || h == nil {
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		for _, hg := range attestedGPUs(h) {
			if foldASCII(hg.UUID) == foldASCII(g.UUID) && hg.Expiry > now && foldASCII(hg.ID) != foldASCII(g.ID) {
				return nil, nil, fmt.Errorf("gpus[%d]: UUID %s is attested by provider %s for GPU %s until %d; this evidence is of GPU %s: one UUID, one GPU: %w", i, g.UUID, h.Address, hg.ID, hg.Expiry, g.ID, ErrAttestation)
			}
		}
	}
	var events []Event
	for _, g := range out {
		// The identity moves from whoever holds it.
		h, err := gpuHolder(o, attestedKey(g.ID), p.Address)
		if err != nil {
			return nil, nil, err
		}
		if h != nil && h.TEE != nil {
			h.TEE.GPUs = slices.DeleteFunc(slices.Clone(h.TEE.GPUs), func(x AttestedGPU) bool { return foldASCII(x.ID) == foldASCII(g.ID) })
			setProvider(o, h)
			events = append(events, Event{Type: "gpu_identity_moved", Attrs: []Attr{{"gpu", g.ID}, {"from", h.Address.String()}, {"to", p.Address.String()}}})
		}
		// A self-reported holder of the UUID is a squatter.
		h, err = gpuHolder(o, append(slices.Clone(prefixGPUUUID), foldASCII(g.UUID)...), p.Address)
		if err != nil {
			return nil, nil, err
		}
		if h != nil {
			if err := setOffline(o, h); err != nil {
				return nil, nil, err
			}
			setProvider(o, h)
			events = append(events, Event{Type: "gpu_squatter_offline", Attrs: []Attr{{"provider", h.Address.String()}, {"uuid", g.UUID}, {"gpu", g.ID}, {"attested_by", p.Address.String()}}})
		}
		events = append(events, Event{Type: "gpu_attested", Attrs: []Attr{
			{"provider", p.Address.String()}, {"uuid", g.UUID}, {"gpu", g.ID}, {"measurement", g.Measurement}, {"expiry", fmt.Sprint(g.Expiry)},
		}})
	}
	return out, events, nil
}

// gpuHolder returns the provider other than self that holds binding key
// k, or nil.
func gpuHolder(o *Overlay, k []byte, self address.Address) (*Provider, error) {
	v := o.Get(k)
	if v == nil || bytes.Equal(v, self[:]) {
		return nil, nil
	}
	a, err := address.FromBytes(v)
	if err != nil {
		return nil, fmt.Errorf("gpu binding %q: %w: %w", k, err, ErrInternal)
	}
	return mustProvider(o, a)
}
