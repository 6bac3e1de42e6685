package challenge_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gpunet/gpunet/internal/challenge"
)

// honestEncoded returns a small challenge, its root, randomness and the
// encoded honest opening. Small (1 360 bytes) so the fuzzers can minimise
// what they find: minimising a 6 KB opening, where a decode needs its
// exact length, takes the fuzzer minutes per input.
func honestEncoded(t testing.TB) (challenge.Challenge, [32]byte, [32]byte, []byte) {
	t.Helper()
	ch := challenge.Challenge{Seed: seedOf("encoding"), Size: challenge.Size{N: 64, K: 64, M: 64}, Openings: 3}
	p := newNaive(t, ch)
	r := sha256.Sum256([]byte("r"))
	b, err := p.open(t, r).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return ch, p.root(), r, b
}

func TestDecodeOpeningStrict(t *testing.T) {
	_, _, _, good := honestEncoded(t)
	if _, err := challenge.DecodeOpening(good); err != nil {
		t.Fatal(err)
	}
	for n := range len(good) {
		if _, err := challenge.DecodeOpening(good[:n]); !errors.Is(err, challenge.ErrEncoding) {
			t.Fatalf("truncated to %d of %d bytes: %v, want ErrEncoding", n, len(good), err)
		}
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"one byte extra", append(bytes.Clone(good), 0)},
		{"a sibling extra", append(bytes.Clone(good), make([]byte, 32)...)},
		{"version 0", edit(func(b []byte) []byte { b[0] = 0; return b })},
		{"version 2", edit(func(b []byte) []byte { b[0] = 2; return b })},
		{"count one less", edit(func(b []byte) []byte { b[1]--; return b })},
		{"count one more", edit(func(b []byte) []byte { b[1]++; return b })},
		{"count 0", edit(func(b []byte) []byte { b[1], b[2] = 0, 0; return b[:4] })},
		{"count over the maximum", edit(func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[1:], challenge.MaxOpenings+1)
			return b
		})},
		{"depth one less", edit(func(b []byte) []byte { b[3]--; return b })},
		{"depth over the maximum", edit(func(b []byte) []byte { b[3] = challenge.MaxDepth + 1; return b })},
		{"empty", nil},
	} {
		if _, err := challenge.DecodeOpening(tt.b); !errors.Is(err, challenge.ErrEncoding) {
			t.Errorf("%s: %v, want ErrEncoding", tt.name, err)
		}
	}
}

func TestOpeningMarshalRejects(t *testing.T) {
	_, _, _, good := honestEncoded(t)
	o, _ := challenge.DecodeOpening(good)
	o.Leaves[2].Proof = o.Leaves[2].Proof[1:]
	if _, err := o.MarshalBinary(); err == nil {
		t.Error("marshalled proofs of different lengths")
	}
	if _, err := (&challenge.Opening{}).MarshalBinary(); err == nil {
		t.Error("marshalled an empty opening")
	}
	if _, err := (&challenge.Opening{Leaves: make([]challenge.LeafOpening, challenge.MaxOpenings+1)}).MarshalBinary(); err == nil {
		t.Error("marshalled too many leaves")
	}
	deep := &challenge.Opening{Leaves: []challenge.LeafOpening{{Proof: make([][32]byte, challenge.MaxDepth+1)}}}
	if _, err := deep.MarshalBinary(); err == nil {
		t.Error("marshalled a proof deeper than MaxDepth")
	}
}

func TestCommitEncoding(t *testing.T) {
	c := challenge.Commit{Root: sha256.Sum256([]byte("root"))}
	b, err := c.MarshalBinary()
	if err != nil || len(b) != challenge.CommitBytes {
		t.Fatalf("MarshalBinary = %d bytes, %v; want %d", len(b), err, challenge.CommitBytes)
	}
	if got, err := challenge.DecodeCommit(b); err != nil || got != c {
		t.Fatalf("DecodeCommit = %x, %v", got.Root, err)
	}
	for _, bad := range [][]byte{nil, b[:32], append(bytes.Clone(b), 0), append([]byte{2}, b[1:]...)} {
		if _, err := challenge.DecodeCommit(bad); !errors.Is(err, challenge.ErrEncoding) {
			t.Errorf("DecodeCommit(%d bytes) = %v, want ErrEncoding", len(bad), err)
		}
	}
}
