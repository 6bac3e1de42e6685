package challenge

import (
	"encoding/binary"
	"fmt"
)

// Wire formats. All integers are little-endian; every value has exactly
// one encoding and a decoder rejects any other byte string.
//
// Commit, CommitBytes = 33 bytes:
//
//	version  1 byte   = 1
//	root     32 bytes
//
// Opening, 4 + count·(260 + 32·depth) bytes:
//
//	version  1 byte   = 1
//	count    uint16   leaves opened, 1 … MaxOpenings
//	depth    1 byte   siblings per proof, 0 … MaxDepth
//	count × {
//	    leaf     uint32             leaf index
//	    entries  64 × int32         the leaf's entries of C
//	    proof    depth × 32 bytes   siblings, leaf level first
//	}
//
// With the default 60 openings and the deepest tree (MaxDepth = 31) an
// opening is 75 124 bytes; MaxOpeningBytes (128 openings) is 160 260, under
// a 256 KiB tx.

const (
	formatVersion = 1
	// CommitBytes is the size of an encoded Commit.
	CommitBytes = 1 + 32
	// MaxDepth is the depth of the largest tree: ⌈log₂(MaxN·MaxM/64)⌉.
	MaxDepth = 31
	// MaxOpeningBytes bounds an encoded Opening.
	MaxOpeningBytes = openingHeader + MaxOpenings*(leafRecord+32*MaxDepth)

	openingHeader = 1 + 2 + 1
	leafRecord    = 4 + 4*LeafEntries // without the proof
)

// OpeningBytes is the encoded size of an opening of k leaves of a C of size
// s.
func OpeningBytes(s Size, k int) int { return openingHeader + k*(leafRecord+32*s.Depth()) }

// Commit is what a prover publishes before the deadline.
type Commit struct {
	Root [32]byte
}

// MarshalBinary encodes c.
func (c Commit) MarshalBinary() ([]byte, error) {
	return append([]byte{formatVersion}, c.Root[:]...), nil
}

// UnmarshalBinary decodes b, which must be exactly one encoded Commit.
func (c *Commit) UnmarshalBinary(b []byte) error {
	if len(b) != CommitBytes {
		return fmt.Errorf("commit of %d bytes, want %d: %w", len(b), CommitBytes, ErrEncoding)
	}
	if b[0] != formatVersion {
		return fmt.Errorf("commit version %d, want %d: %w", b[0], formatVersion, ErrEncoding)
	}
	copy(c.Root[:], b[1:])
	return nil
}

// DecodeCommit decodes an encoded Commit.
func DecodeCommit(b []byte) (Commit, error) {
	var c Commit
	err := c.UnmarshalBinary(b)
	return c, err
}

// LeafOpening reveals one leaf of C with its Merkle proof.
type LeafOpening struct {
	Leaf    uint32
	Entries [LeafEntries]int32
	Proof   [][32]byte // siblings, leaf level first
}

// Opening is what a prover publishes after the chain selects the entries:
// one LeafOpening per selected entry, in selection order.
type Opening struct {
	Leaves []LeafOpening
}

// MarshalBinary encodes o. It fails if o has no leaves or more than
// MaxOpenings, or if its proofs are not all of one length ≤ MaxDepth.
func (o *Opening) MarshalBinary() ([]byte, error) {
	if len(o.Leaves) == 0 || len(o.Leaves) > MaxOpenings {
		return nil, fmt.Errorf("opening of %d leaves: want 1 to %d", len(o.Leaves), MaxOpenings)
	}
	depth := len(o.Leaves[0].Proof)
	if depth > MaxDepth {
		return nil, fmt.Errorf("proof of %d siblings: at most %d", depth, MaxDepth)
	}
	b := make([]byte, 0, openingHeader+len(o.Leaves)*(leafRecord+32*depth))
	b = append(b, formatVersion)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(o.Leaves)))
	b = append(b, byte(depth))
	for x := range o.Leaves {
		lo := &o.Leaves[x]
		if len(lo.Proof) != depth {
			return nil, fmt.Errorf("leaf %d has a proof of %d siblings, leaf 0 one of %d", x, len(lo.Proof), depth)
		}
		b = binary.LittleEndian.AppendUint32(b, lo.Leaf)
		for _, v := range lo.Entries {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		for _, s := range lo.Proof {
			b = append(b, s[:]...)
		}
	}
	return b, nil
}

// UnmarshalBinary decodes b, which must be exactly one encoded Opening.
// It checks the format only; Verify checks the content against a
// challenge.
func (o *Opening) UnmarshalBinary(b []byte) error {
	if len(b) < openingHeader {
		return fmt.Errorf("opening of %d bytes, shorter than its %d-byte header: %w", len(b), openingHeader, ErrEncoding)
	}
	if b[0] != formatVersion {
		return fmt.Errorf("opening version %d, want %d: %w", b[0], formatVersion, ErrEncoding)
	}
	count := int(binary.LittleEndian.Uint16(b[1:]))
	depth := int(b[3])
	if count == 0 || count > MaxOpenings {
		return fmt.Errorf("opening of %d leaves, want 1 to %d: %w", count, MaxOpenings, ErrEncoding)
	}
	if depth > MaxDepth {
		return fmt.Errorf("opening with proofs of %d siblings, at most %d: %w", depth, MaxDepth, ErrEncoding)
	}
	rec := leafRecord + 32*depth
	if want := openingHeader + count*rec; len(b) != want {
		return fmt.Errorf("opening of %d leaves with %d-sibling proofs is %d bytes, got %d: %w", count, depth, want, len(b), ErrEncoding)
	}
	leaves := make([]LeafOpening, count)
	proofs := make([][32]byte, count*depth) // one allocation for all proofs
	for x := range leaves {
		r := b[openingHeader+x*rec : openingHeader+(x+1)*rec]
		lo := &leaves[x]
		lo.Leaf = binary.LittleEndian.Uint32(r)
		for e := range lo.Entries {
			lo.Entries[e] = int32(binary.LittleEndian.Uint32(r[4+4*e:]))
		}
		lo.Proof = proofs[x*depth : (x+1)*depth : (x+1)*depth]
		for s := range lo.Proof {
			copy(lo.Proof[s][:], r[leafRecord+32*s:])
		}
	}
	o.Leaves = leaves
	return nil
}

// DecodeOpening decodes an encoded Opening.
func DecodeOpening(b []byte) (*Opening, error) {
	o := new(Opening)
	if err := o.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return o, nil
}
