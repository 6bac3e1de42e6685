package abciapp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestDefaultAttestRootsAreTheVendors': the roots a chain trusts without
// a genesis's attest_roots are the SHA-256 of the DER of the roots
// internal/attest embeds (the ledger pins them, importing no verifier).
func TestDefaultAttestRootsAreTheVendors(t *testing.T) {
	var got []string
	for _, b := range attest.DefaultRoots() {
		for rest := b; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			h := sha256.Sum256(blk.Bytes)
			got = append(got, hex.EncodeToString(h[:]))
		}
	}
	if !slices.Equal(got, ledger.DefaultAttestRoots) {
		t.Fatalf("attest.DefaultRoots hash to %q, ledger.DefaultAttestRoots are %q", got, ledger.DefaultAttestRoots)
	}
}
