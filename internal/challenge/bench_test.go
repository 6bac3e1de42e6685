package challenge_test

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/gpunet/gpunet/internal/challenge"
)

// BenchmarkVerify is a validator's cost for one opening of 60 leaves, by
// K (the cost per leaf is two AES-CTR lines and a dot product of length K,
// plus the proof). N = M = 64 keeps the setup cheap, so proofs have depth
// 6; BenchmarkVerifyProof gives the cost of deeper ones.
func BenchmarkVerify(b *testing.B) {
	for _, k := range []int{1728, 7936, 21568, challenge.MaxK} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			ch := challenge.Challenge{Seed: seedOf("bench"), Size: challenge.Size{N: 64, K: k, M: 64}, Openings: challenge.DefaultOpenings}
			p := newNaive(b, ch)
			r := sha256.Sum256([]byte("r"))
			enc, err := p.open(b, r).MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			root := p.root()
			for b.Loop() {
				o, err := challenge.DecodeOpening(enc)
				if err != nil {
					b.Fatal(err)
				}
				if err := ch.Verify(root, r, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyProof is one Merkle proof check at the given depth (its
// root does not match, which is found only after every hash).
func BenchmarkVerifyProof(b *testing.B) {
	for _, d := range []int{6, 20, challenge.MaxDepth} {
		b.Run(fmt.Sprintf("depth=%d", d), func(b *testing.B) {
			proof := make([][32]byte, d)
			for l := range proof {
				proof[l] = sha256.Sum256([]byte{byte(l)})
			}
			for b.Loop() {
				if challenge.VerifyProof([32]byte{}, 1<<d, 0, [32]byte{1}, proof) == nil {
					b.Fatal("random proof accepted")
				}
			}
		})
	}
}
