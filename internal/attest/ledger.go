package attest

import (
	"errors"

	"github.com/gpunet/gpunet/internal/ledger"
)

// LedgerVerifier is the ledger's AttestVerifier (ledger.Ledger.Attest):
// Verify on what a MsgAttest carries, the chain's nonce and the provider's
// key, at the block's time, with the chain's minimum TCB levels. It reads
// nothing else, so every validator gets the same answer.
func LedgerVerifier(r ledger.AttestRequest) (ledger.AttestClaims, error) {
	kind, err := ParseKind(r.Kind)
	if err != nil {
		return ledger.AttestClaims{}, refuse(ReasonUnsupported, "%v", err)
	}
	c, err := Verify(Evidence{Kind: kind, Raw: r.Raw, Collateral: r.Collateral}, Options{
		Now: r.Now, Nonce: r.Nonce, Key: r.Key, TrustedRoots: r.Roots,
		MinTCB: map[Kind]MinTCB{
			KindTDX:    {TCBEvaluationDataNumber: int(min(r.TDXMinTCBEval, 1<<31-1))},
			KindSEVSNP: SNPMinTCB(r.SNPMinTCB),
		},
	})
	if err != nil {
		return ledger.AttestClaims{}, err
	}
	if len(c.Measurements) == 0 {
		return ledger.AttestClaims{}, errors.New("verified evidence with no measurement")
	}
	out := ledger.AttestClaims{Measurement: c.Measurements[0].Hex, TCBStatus: c.TCBStatus, Expiry: c.Expiry}
	if c.GPU != nil {
		out.GPUID, out.GPUMode = c.GPU.ID, c.GPU.FeatureFlag
	}
	return out, nil
}

// SNPMinTCB unpacks a minimum SEV-SNP TCB in AMD's TCB_VERSION layout
// (Milan, Genoa): the bootloader SPL in byte 0, the TEE's in byte 1, the
// SNP firmware's in byte 6 and the microcode's in byte 7.
func SNPMinTCB(v uint64) MinTCB {
	return MinTCB{BootloaderSPL: uint8(v), TEESPL: uint8(v >> 8), SNPSPL: uint8(v >> 48), MicrocodeSPL: uint8(v >> 56)}
}
