package ledger

import (
	"crypto/sha256"
	"crypto/sha3"
	"encoding/binary"
	"fmt"
)

// The app hash commits to the full state, not to its history: it is the
// SHA-256 of a lattice hash (LtHash, Bellare–Micciancio; the construction
// Solana uses for its accounts) of every (key, value) pair outside the meta
// area. A lattice hash is a sum of per-entry hashes in (Z/2^16)^1024, so a
// block updates it in time proportional to what the block changed, and two
// nodes with the same state have the same hash however they got there.

const ltLanes = 1024

// LtHash is the running lattice hash of a state.
type LtHash [ltLanes]uint16

func entryHash(key, value []byte) *LtHash {
	h := sha3.NewSHAKE128()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(key)))])
	h.Write(key)
	h.Write(value)
	var buf [2 * ltLanes]byte
	h.Read(buf[:])
	var e LtHash
	for i := range e {
		e[i] = binary.LittleEndian.Uint16(buf[2*i:])
	}
	return &e
}

// Add mixes the entry (key, value) into h.
func (h *LtHash) Add(key, value []byte) {
	e := entryHash(key, value)
	for i := range h {
		h[i] += e[i]
	}
}

// Remove takes the entry (key, value) out of h.
func (h *LtHash) Remove(key, value []byte) {
	e := entryHash(key, value)
	for i := range h {
		h[i] -= e[i]
	}
}

// Bytes returns the little-endian encoding of h.
func (h *LtHash) Bytes() []byte {
	out := make([]byte, 2*ltLanes)
	for i, v := range h {
		binary.LittleEndian.PutUint16(out[2*i:], v)
	}
	return out
}

// Sum returns the 32-byte app hash of h.
func (h *LtHash) Sum() []byte {
	s := sha256.Sum256(h.Bytes())
	return s[:]
}

func ltHashFromBytes(b []byte) (*LtHash, error) {
	var h LtHash
	if b == nil {
		return &h, nil
	}
	if len(b) != 2*ltLanes {
		return nil, fmt.Errorf("stored lattice hash has %d bytes, want %d", len(b), 2*ltLanes)
	}
	for i := range h {
		h[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return &h, nil
}
