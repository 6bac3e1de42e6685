package challenge

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// The commitment to C is a binary Merkle tree with SHA-256:
//
//	leaf  = SHA-256(0x00 ‖ 64 entries as int32 little-endian)   (257 bytes in)
//	node  = SHA-256(0x01 ‖ left ‖ right)                         (65 bytes in)
//	empty = 32 zero bytes
//
// Leaf ℓ holds entries ℓ·64 … ℓ·64+63 of C in row-major order, that is
// C[i][64c … 64c+63] for ℓ = i·(M/64) + c. The L = N·M/64 leaves are padded
// to 2^d, d = ⌈log₂ L⌉, with empty subtrees: a subtree that holds no leaf
// hashes to 32 zero bytes without being hashed, so a node with an empty
// right half is SHA-256(0x01 ‖ left ‖ 0³²). The prefixes keep a leaf from
// ever being read as a node (second preimages), and every proof has
// exactly d siblings. Little-endian entries are the in-memory layout of an
// int32 row on every CPU and GPU that will run a prover, so it hashes C as
// it lies.

// LeafEntries is the number of entries of C in one Merkle leaf.
const LeafEntries = 64

const (
	leafPrefix = 0x00
	nodePrefix = 0x01
)

// HashLeaf returns the hash of a leaf holding entries.
func HashLeaf(entries *[LeafEntries]int32) [32]byte {
	var buf [1 + 4*LeafEntries]byte
	buf[0] = leafPrefix
	for x, v := range entries {
		binary.LittleEndian.PutUint32(buf[1+4*x:], uint32(v))
	}
	return sha256.Sum256(buf[:])
}

// HashNode returns the hash of an inner node.
func HashNode(left, right [32]byte) [32]byte {
	var buf [1 + 64]byte
	buf[0] = nodePrefix
	copy(buf[1:], left[:])
	copy(buf[33:], right[:])
	return sha256.Sum256(buf[:])
}

// treeDepth returns ⌈log₂ leaves⌉, 0 for a single leaf.
func treeDepth(leaves uint64) int {
	if leaves <= 1 {
		return 0
	}
	return bits.Len64(leaves - 1)
}

// levelWidth returns how many nodes of level l (0 = leaves) hold a leaf.
func levelWidth(leaves uint64, l int) uint64 { return (leaves-1)>>l + 1 }

// Tree is a Merkle tree with every level kept, so a prover can answer any
// opening. It is about as large as the leaves' entries divided by four
// (32 bytes per 256-byte leaf, twice over).
type Tree struct {
	levels [][][32]byte // levels[0] = leaf hashes, last = {root}
}

// NewTree builds the tree over leaf hashes (in leaf order). It fails on no
// leaves and keeps leaves, which the caller must not modify afterwards.
func NewTree(leaves [][32]byte) (*Tree, error) {
	if len(leaves) == 0 {
		return nil, fmt.Errorf("merkle tree of no leaves")
	}
	t := &Tree{levels: [][][32]byte{leaves}}
	for cur := leaves; len(cur) > 1; {
		next := make([][32]byte, (len(cur)+1)/2)
		for x := range next {
			var right [32]byte // empty
			if 2*x+1 < len(cur) {
				right = cur[2*x+1]
			}
			next[x] = HashNode(cur[2*x], right)
		}
		t.levels = append(t.levels, next)
		cur = next
	}
	return t, nil
}

// Root returns the tree's root.
func (t *Tree) Root() [32]byte { return t.levels[len(t.levels)-1][0] }

// Leaves returns the number of leaves.
func (t *Tree) Leaves() uint64 { return uint64(len(t.levels[0])) }

// Proof returns the siblings on the path from leaf to the root, leaf level
// first.
func (t *Tree) Proof(leaf uint64) ([][32]byte, error) {
	if leaf >= t.Leaves() {
		return nil, fmt.Errorf("leaf %d of a tree of %d leaves", leaf, t.Leaves())
	}
	proof := make([][32]byte, 0, len(t.levels)-1)
	for _, lvl := range t.levels[:len(t.levels)-1] {
		if s := leaf ^ 1; s < uint64(len(lvl)) {
			proof = append(proof, lvl[s])
		} else {
			proof = append(proof, [32]byte{})
		}
		leaf >>= 1
	}
	return proof, nil
}

// VerifyProof checks that the leaf with hash leafHash sits at index leaf
// of a tree of leaves leaves whose root is root. It is strict: the proof
// must have exactly ⌈log₂ leaves⌉ siblings, and a sibling that covers no
// leaf must be the empty hash. Errors wrap ErrProof.
func VerifyProof(root [32]byte, leaves, leaf uint64, leafHash [32]byte, proof [][32]byte) error {
	if leaves == 0 || leaf >= leaves {
		return fmt.Errorf("leaf %d of a tree of %d leaves: %w", leaf, leaves, ErrProof)
	}
	if d := treeDepth(leaves); len(proof) != d {
		return fmt.Errorf("proof of %d siblings, the tree of %d leaves has depth %d: %w", len(proof), leaves, d, ErrProof)
	}
	h := leafHash
	for l, sib := range proof {
		idx := leaf >> l
		if idx&1 == 1 {
			h = HashNode(sib, h)
			continue
		}
		if idx+1 >= levelWidth(leaves, l) && sib != ([32]byte{}) {
			return fmt.Errorf("sibling %d covers no leaf and must be empty: %w", l, ErrProof)
		}
		h = HashNode(h, sib)
	}
	if h != root {
		return fmt.Errorf("leaf %d's path leads to root %x, the commitment is %x: %w", leaf, h[:8], root[:8], ErrProof)
	}
	return nil
}
