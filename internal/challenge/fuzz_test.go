package challenge_test

import (
	"bytes"
	"testing"

	"github.com/gpunet/gpunet/internal/challenge"
)

// FuzzDecodeOpening: decoding never panics, and whatever decodes encodes
// back to the same bytes (one encoding per value).
func FuzzDecodeOpening(f *testing.F) {
	_, _, _, good := honestEncoded(f)
	f.Add(good)
	f.Add(good[:4])
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := challenge.DecodeOpening(b)
		if err != nil {
			return
		}
		again, err := o.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded opening does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode/encode changed %d bytes into %d", len(b), len(again))
		}
	})
}

// FuzzVerifyOpening: decoding and verifying arbitrary bytes against a real
// commitment never panics, and the only opening that verifies is the
// honest one. A different accepted opening would mean a Merkle proof
// forged past SHA-256 or an entry check that lets a wrong value through.
func FuzzVerifyOpening(f *testing.F) {
	ch, root, r, good := honestEncoded(f)
	f.Add(good, false)
	f.Add(good, true)
	f.Add(good[:len(good)-1], false)
	f.Fuzz(func(t *testing.T, b []byte, otherRoot bool) {
		o, err := challenge.DecodeOpening(b)
		if err != nil {
			return
		}
		rt := root
		if otherRoot {
			rt[0] ^= 1
		}
		if err := ch.Verify(rt, r, o); err != nil {
			return
		}
		if otherRoot || !bytes.Equal(b, good) {
			t.Fatalf("accepted an opening that is not the honest one (other root: %v)", otherRoot)
		}
	})
}
