package hwinfo

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// The matrices of a hardware challenge are a keystream: byte p of the stream
// is byte p mod 32 of SHA-256(seed ‖ uint64 big-endian(p / 32)), read as an
// int8, and an n×n matrix is the first n·n bytes in row-major order. Counter
// mode lets a verifier produce a single row or column of B in O(n) hashes
// without generating the whole matrix (see MatrixRowFromSeed and
// MatrixColumnFromSeed), and is the same on every platform.

// MatrixFromSeed fills an n×n int8 matrix deterministically from a 32-byte seed.
// It panics if n < 0.
func MatrixFromSeed(seed [32]byte, n int) []int8 {
	if n < 0 {
		panic(fmt.Sprintf("hwinfo: MatrixFromSeed size n=%d < 0", n))
	}
	out := make([]int8, n*n)
	var in [40]byte
	copy(in[:], seed[:])
	for blk := 0; blk*sha256.Size < len(out); blk++ {
		binary.BigEndian.PutUint64(in[32:], uint64(blk))
		sum := sha256.Sum256(in[:])
		dst := out[blk*sha256.Size:]
		for i := range min(len(dst), sha256.Size) {
			dst[i] = int8(sum[i])
		}
	}
	return out
}

// seedStream returns byte p of the keystream behind MatrixFromSeed, reusing
// the last block it hashed.
type seedStream struct {
	in   [40]byte
	blk  int
	sum  [32]byte
	have bool
}

func newSeedStream(seed [32]byte) *seedStream {
	s := &seedStream{}
	copy(s.in[:], seed[:])
	return s
}

func (s *seedStream) at(p int) int8 {
	if blk := p / sha256.Size; !s.have || blk != s.blk {
		binary.BigEndian.PutUint64(s.in[32:], uint64(blk))
		s.sum, s.blk, s.have = sha256.Sum256(s.in[:]), blk, true
	}
	return int8(s.sum[p%sha256.Size])
}

// MatrixRowFromSeed returns row i of MatrixFromSeed(seed, n) in O(n) work.
// It panics unless 0 ≤ i < n.
func MatrixRowFromSeed(seed [32]byte, n, i int) []int8 {
	if i < 0 || i >= n {
		panic(fmt.Sprintf("hwinfo: MatrixRowFromSeed row %d outside [0, %d)", i, n))
	}
	s, row := newSeedStream(seed), make([]int8, n)
	for j := range row {
		row[j] = s.at(i*n + j)
	}
	return row
}

// MatrixColumnFromSeed returns column j of MatrixFromSeed(seed, n) in O(n)
// work. It panics unless 0 ≤ j < n.
func MatrixColumnFromSeed(seed [32]byte, n, j int) []int8 {
	if j < 0 || j >= n {
		panic(fmt.Sprintf("hwinfo: MatrixColumnFromSeed column %d outside [0, %d)", j, n))
	}
	s, col := newSeedStream(seed), make([]int8, n)
	for k := range col {
		col[k] = s.at(k*n + j)
	}
	return col
}

// DotInt8 returns Σ int32(x[k])·int32(y[k]): entry (i, j) of GEMMInt8's C from
// row i of A and column j of B, which is how a verifier checks one entry.
// It panics if len(x) != len(y).
func DotInt8(x, y []int8) int32 {
	if len(x) != len(y) {
		panic(fmt.Sprintf("hwinfo: DotInt8 lengths %d and %d differ", len(x), len(y)))
	}
	var s int32
	for k, v := range x {
		s += int32(v) * int32(y[k])
	}
	return s
}
