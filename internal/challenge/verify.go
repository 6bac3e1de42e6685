package challenge

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Errors. Verify's errors wrap exactly one of ErrCount, ErrLeaf, ErrProof
// and ErrEntry (or ErrSize when the challenge itself is malformed); every
// one of those, given the right challenge, root and randomness, is the
// prover's fault. Decoders' errors wrap ErrEncoding.
var (
	ErrSize     = errors.New("invalid challenge")
	ErrEncoding = errors.New("malformed encoding")
	ErrCount    = errors.New("wrong number of opened leaves")
	ErrLeaf     = errors.New("opened leaf is not the selected one")
	ErrProof    = errors.New("merkle proof does not lead to the committed root")
	ErrEntry    = errors.New("opened entry is not the product A·B")
)

// EntryError is a revealed entry that differs from the product: the
// objective evidence a slash rests on.
type EntryError struct {
	Opening  int // index in the opening
	Row, Col int // position in C
	Got      int32
	Want     int32 // row Row of A · column Col of B
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("opening %d: C[%d][%d] = %d, A·B gives %d: %v", e.Opening, e.Row, e.Col, e.Got, e.Want, ErrEntry)
}

// Unwrap returns ErrEntry.
func (e *EntryError) Unwrap() error { return ErrEntry }

// Challenge is one hardware challenge as the chain records it.
type Challenge struct {
	Seed     [32]byte
	Size     Size
	Openings int // K: leaves opened after the commit
}

// Validate reports whether c is well formed: a valid size and
// 1 ≤ Openings ≤ min(MaxOpenings, leaves).
func (c Challenge) Validate() error {
	if err := c.Size.Validate(); err != nil {
		return err
	}
	if c.Openings < 1 || c.Openings > MaxOpenings || uint64(c.Openings) > c.Size.Leaves() {
		return fmt.Errorf("%d openings: want 1 to %d, and at most the %d leaves of %s: %w",
			c.Openings, MaxOpenings, c.Size.Leaves(), c.Size, ErrSize)
	}
	return nil
}

// Entry is a position in C.
type Entry struct {
	Row, Col int
}

// Leaf returns the index of the Merkle leaf holding e in a C of size s.
func (e Entry) Leaf(s Size) uint64 {
	return uint64(e.Row)*uint64(s.M/LeafEntries) + uint64(e.Col/LeafEntries)
}

var tagOpen = []byte("gpunet/challenge/v1/open\x00")

// Select returns the entries the chain opens, in order. The draw is
//
//	base = SHA-256("gpunet/challenge/v1/open\x00" ‖ seed ‖ N ‖ K ‖ M ‖ root ‖ randomness)
//	word w = bytes 8(w mod 4) … +8 of SHA-256(base ‖ uint64(w/4)), uint64 little-endian
//
// Each word below the largest multiple of N·M that fits in 64 bits gives
// the entry e = word mod N·M (row e/M, column e mod M); others are
// skipped, so every entry is equally likely. An entry whose leaf an earlier
// one already took is skipped too: the K entries lie in K distinct leaves,
// each leaf is revealed once, and an opening is always K leaves. The
// randomness must be unknown to the prover when it commits (the hash of a
// block after the one holding the commit); root and the challenge are
// mixed in so a draw serves one commitment only.
func (c Challenge) Select(root, randomness [32]byte) ([]Entry, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write(tagOpen)
	h.Write(c.Seed[:])
	h.Write(c.Size.appendBinary(nil))
	h.Write(root[:])
	h.Write(randomness[:])
	var in [40]byte
	h.Sum(in[:0])

	total := uint64(c.Size.N) * uint64(c.Size.M)
	limit := math.MaxUint64 / total * total
	entries := make([]Entry, 0, c.Openings)
	leaves := make([]uint64, 0, c.Openings)
	var block [32]byte
	for w := uint64(0); len(entries) < c.Openings; w++ {
		if w%4 == 0 {
			binary.LittleEndian.PutUint64(in[32:], w/4)
			block = sha256.Sum256(in[:])
		}
		x := binary.LittleEndian.Uint64(block[8*(w%4):])
		if x >= limit {
			continue
		}
		e := Entry{Row: int(x % total / uint64(c.Size.M)), Col: int(x % total % uint64(c.Size.M))}
		leaf := e.Leaf(c.Size)
		if slices.Contains(leaves, leaf) {
			continue
		}
		entries, leaves = append(entries, e), append(leaves, leaf)
	}
	return entries, nil
}

// Verify checks an opening of the commitment root, for the entries that
// randomness selects, against the product A·B that the seed defines. For
// each selected entry (i, j), in order, the opening must reveal the leaf
// holding it, with a proof that the leaf is in the tree under root, and
// the revealed C[i][j] must equal row i of A · column j of B, which Verify
// recomputes from the seed in O(K) work. Only the selected entry of a leaf
// is checked; the others are bound by the root but not recomputed.
//
// The error names the first opening that fails and why, wrapping ErrCount,
// ErrLeaf, ErrProof or ErrEntry (an *EntryError).
func (c Challenge) Verify(root, randomness [32]byte, o *Opening) error {
	sel, err := c.Select(root, randomness)
	if err != nil {
		return err
	}
	if o == nil || len(o.Leaves) != len(sel) {
		n := 0
		if o != nil {
			n = len(o.Leaves)
		}
		return fmt.Errorf("opening has %d leaves, the challenge opens %d: %w", n, len(sel), ErrCount)
	}
	g, err := NewGenerator(c.Seed, c.Size)
	if err != nil {
		return err
	}
	leaves := c.Size.Leaves()
	rowBuf, colBuf := make([]byte, c.Size.K), make([]byte, c.Size.K)
	for x, e := range sel {
		lo := &o.Leaves[x]
		if want := e.Leaf(c.Size); uint64(lo.Leaf) != want {
			return fmt.Errorf("opening %d reveals leaf %d, the chain selected leaf %d (C[%d][%d]): %w",
				x, lo.Leaf, want, e.Row, e.Col, ErrLeaf)
		}
		if err := VerifyProof(root, leaves, uint64(lo.Leaf), HashLeaf(&lo.Entries), lo.Proof); err != nil {
			return fmt.Errorf("opening %d: %w", x, err)
		}
		want := dot(g.line(g.keyA, e.Row, rowBuf), g.line(g.keyB, e.Col, colBuf))
		if got := lo.Entries[e.Col%LeafEntries]; got != want {
			return &EntryError{Opening: x, Row: e.Row, Col: e.Col, Got: got, Want: want}
		}
	}
	return nil
}

// Verify is Challenge{seed, size, DefaultOpenings}.Verify(root,
// randomness, o): the check a validator runs on a revealed opening.
func Verify(seed [32]byte, size Size, root, randomness [32]byte, o *Opening) error {
	return Challenge{Seed: seed, Size: size, Openings: DefaultOpenings}.Verify(root, randomness, o)
}
