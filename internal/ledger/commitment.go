package ledger

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
)

// The app hash commits to the full state, not to its history: it is the
// SHA-256 of a lattice hash (LtHash, Bellare–Micciancio; the construction
// Solana uses for its accounts) of every (key, value) pair outside the meta
// area. A lattice hash is a sum of per-entry hashes in (Z/2^16)^1024, so a
// block updates it in time proportional to what the block changed, and two
// nodes with the same state have the same hash however they got there.
//
// An entry's vector is 2 KiB of AES-256-CTR keystream (zero IV) under the
// key SHA-256(uvarint(len(key)) ‖ key ‖ value): a PRG seeded by a
// collision-resistant hash, which is what the construction asks of its
// per-entry function. It costs about 1 µs an entry on a machine with AES
// instructions; SHAKE128 took 7.

const (
	ltLanes = 1024
	ltWords = ltLanes / 4 // lanes are packed four to a uint64
	// ltHigh has the top bit of each lane of a word.
	ltHigh = 0x8000_8000_8000_8000
)

// LtHash is the running lattice hash of a state: 1024 lanes of 16 bits,
// packed four to a word with lane 4i+j in bits 16j of word i, so that the
// words' little-endian bytes are the lanes' little-endian bytes in order.
type LtHash [ltWords]uint64

// ltHasher expands entries into vectors. It keeps its buffer and digest
// between entries, so that a block's update does not allocate a 2 KiB
// vector for each entry it folds in.
type ltHasher struct {
	buf [2 * ltLanes]byte
	sha hash.Hash
}

// stream returns the entry's vector (valid until the next call).
func (x *ltHasher) stream(key, value []byte) *[2 * ltLanes]byte {
	if x.sha == nil {
		x.sha = sha256.New()
	}
	x.sha.Reset()
	var n [binary.MaxVarintLen64]byte
	x.sha.Write(n[:binary.PutUvarint(n[:], uint64(len(key)))])
	x.sha.Write(key)
	x.sha.Write(value)
	var seed [sha256.Size]byte
	block, err := aes.NewCipher(x.sha.Sum(seed[:0]))
	if err != nil {
		panic(err) // unreachable: the key is 32 bytes
	}
	var iv [aes.BlockSize]byte
	clear(x.buf[:])
	cipher.NewCTR(block, iv[:]).XORKeyStream(x.buf[:], x.buf[:])
	return &x.buf
}

// Add mixes the entry (key, value) into h: lane-wise addition mod 2^16.
func (h *LtHash) Add(key, value []byte) { h.add(new(ltHasher), key, value) }

// Remove takes the entry (key, value) out of h: lane-wise subtraction.
func (h *LtHash) Remove(key, value []byte) { h.remove(new(ltHasher), key, value) }

func (h *LtHash) add(x *ltHasher, key, value []byte) {
	buf := x.stream(key, value)
	for i := range h {
		a, b := h[i], binary.LittleEndian.Uint64(buf[8*i:])
		h[i] = ((a &^ ltHigh) + (b &^ ltHigh)) ^ ((a ^ b) & ltHigh)
	}
}

func (h *LtHash) remove(x *ltHasher, key, value []byte) {
	buf := x.stream(key, value)
	for i := range h {
		a, b := h[i], binary.LittleEndian.Uint64(buf[8*i:])
		h[i] = ((a | ltHigh) - (b &^ ltHigh)) ^ ((a ^ ^b) & ltHigh)
	}
}

// Bytes returns the little-endian encoding of h's lanes.
func (h *LtHash) Bytes() []byte {
	out := make([]byte, 0, 2*ltLanes)
	for _, w := range h {
		out = binary.LittleEndian.AppendUint64(out, w)
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
		h[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return &h, nil
}
