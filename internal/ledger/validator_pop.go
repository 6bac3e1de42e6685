package ledger

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// A validator's proof of possession (PoP): the consensus key's signature
// over the chain and the operator, carried by create_validator and by each
// genesis validator. Without it anyone could bond stake for another node's
// key (squatting it, or taking credit for what it signs) or for a key no
// one holds.
//
// The signed bytes are
//
//	"gpunet/validator-pop/v1\x00" ‖ uvarint(len(chain_id)) ‖ chain_id ‖ operator (20 bytes)
//
// The domain tag keeps a PoP from being anything else: a gpunet tx signs
// "gpunet/tx/v1\x00" first, and CometBFT's votes and proposals sign a
// length-prefixed protobuf whose second byte is a field tag, never 'p'.
// The chain id and the operator make it worthless on another chain or for
// another operator: one seen in a mempool cannot be replayed by a front
// runner. Verification is crypto/ed25519's (RFC 8032, canonical s), a pure
// function of its inputs, so every node agrees.

// validatorPoPDomain separates a PoP from every other use of a consensus key.
const validatorPoPDomain = "gpunet/validator-pop/v1\x00"

// ValidatorPoPBytes returns the bytes a validator's proof of possession
// signs, for operator on chainID.
func ValidatorPoPBytes(chainID string, operator address.Address) []byte {
	b := make([]byte, 0, len(validatorPoPDomain)+binary.MaxVarintLen64+len(chainID)+address.Len)
	b = append(b, validatorPoPDomain...)
	b = binary.AppendUvarint(b, uint64(len(chainID)))
	b = append(b, chainID...)
	return append(b, operator[:]...)
}

// SignValidatorPoP returns the proof that the holder of the consensus key
// priv lets operator bond stake for it on chainID.
func SignValidatorPoP(priv ed25519.PrivateKey, chainID string, operator address.Address) []byte {
	return ed25519.Sign(priv, ValidatorPoPBytes(chainID, operator))
}

// VerifyValidatorPoP reports whether pop is a proof of possession of the
// consensus key pub for operator on chainID. A key of small order proves
// nothing (anyone can sign for it) and never verifies.
func VerifyValidatorPoP(pub, pop []byte, chainID string, operator address.Address) bool {
	return len(pub) == ed25519.PublicKeySize && len(pop) == ed25519.SignatureSize && !smallOrderKey(pub) &&
		ed25519.Verify(ed25519.PublicKey(pub), ValidatorPoPBytes(chainID, operator), pop)
}

// smallOrderY are the y coordinates, little-endian with x's sign bit
// clear, of the eight points of small order on edwards25519 (the identity,
// one of order 2, two of order 4, four of order 8: y = 1, p−1, 0, ±y8),
// with the non-canonical encodings p and p+1 of 0 and 1 (p = 2^255−19; no
// other y ≥ p reduces to one of them).
var smallOrderY = [...]string{
	"0000000000000000000000000000000000000000000000000000000000000000",
	"0100000000000000000000000000000000000000000000000000000000000000",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
}

// smallOrderKey reports whether an ed25519 public key encodes a point of
// small order, in any encoding: with such a key a signature verifies for
// any message without a secret, so it proves no possession.
func smallOrderKey(pub []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	y := hex.EncodeToString(pub[:31]) + hex.EncodeToString([]byte{pub[31] &^ 0x80})
	return slices.Contains(smallOrderY[:], y)
}
