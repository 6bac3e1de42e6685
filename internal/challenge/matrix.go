package challenge

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// A and B are two AES-256-CTR keystreams (NIST SP 800-38A: the counter
// block is the 128-bit big-endian block number, starting at 0), read as
// int8. Their keys are
//
//	keyA = SHA-256("gpunet/challenge/v1/A\x00" ‖ seed ‖ N ‖ K ‖ M)
//	keyB = SHA-256("gpunet/challenge/v1/B\x00" ‖ seed ‖ N ‖ K ‖ M)
//
// with N, K, M as uint32 little-endian. A is row-major: A[i][x] is byte
// i·K + x of stream A. B is column-major: B[x][j] is byte j·K + x of
// stream B, so a column of B, like a row of A, is K consecutive bytes
// starting on a block boundary (K is a multiple of 64). Either can be
// produced on its own in O(K) work, which is what a verifier needs, and the
// GEMM's inner loop reads both operands contiguously. AES-CTR runs at
// several GB/s on any CPU with AES instructions (ten times SHA-256 in
// counter mode), which keeps a verifier's cost low, and is just as easy
// on a GPU.

var (
	tagA = []byte("gpunet/challenge/v1/A\x00")
	tagB = []byte("gpunet/challenge/v1/B\x00")
)

// Generator expands a challenge's seed into rows of A and columns of B.
// It is safe for concurrent use.
type Generator struct {
	size       Size
	keyA, keyB [32]byte
}

// NewGenerator returns the generator of the challenge (seed, size).
func NewGenerator(seed [32]byte, size Size) (*Generator, error) {
	if err := size.Validate(); err != nil {
		return nil, err
	}
	return &Generator{size: size, keyA: deriveKey(tagA, seed, size), keyB: deriveKey(tagB, seed, size)}, nil
}

func deriveKey(tag []byte, seed [32]byte, size Size) [32]byte {
	h := sha256.New()
	h.Write(tag)
	h.Write(seed[:])
	h.Write(size.appendBinary(nil))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Size returns the challenge's size.
func (g *Generator) Size() Size { return g.size }

// Keys returns the AES-256 keys of streams A and B, for a prover that
// expands the matrices on its device (package gpu).
func (g *Generator) Keys() (keyA, keyB [32]byte) { return g.keyA, g.keyB }

// FillRowsA fills dst with rows first, first+1, … of A, K entries each.
// It panics unless len(dst) is a multiple of K and the rows exist.
func (g *Generator) FillRowsA(dst []int8, first int) {
	g.fill(g.keyA, "A", "row", g.size.N, dst, first)
}

// FillColsB fills dst with columns first, first+1, … of B, K entries
// each (that is, rows of Bᵀ). It panics unless len(dst) is a multiple of K
// and the columns exist.
func (g *Generator) FillColsB(dst []int8, first int) {
	g.fill(g.keyB, "B", "column", g.size.M, dst, first)
}

// RowA returns row i of A.
func (g *Generator) RowA(i int) []int8 {
	r := make([]int8, g.size.K)
	g.FillRowsA(r, i)
	return r
}

// ColB returns column j of B.
func (g *Generator) ColB(j int) []int8 {
	c := make([]int8, g.size.K)
	g.FillColsB(c, j)
	return c
}

func (g *Generator) fill(key [32]byte, matrix, line string, lines int, dst []int8, first int) {
	k := g.size.K
	if len(dst)%k != 0 || first < 0 || first+len(dst)/k > lines {
		panic(fmt.Sprintf("challenge: %d entries from %s %d of %s: want whole %ss of %d within %d",
			len(dst), line, first, matrix, line, k, lines))
	}
	var buf [4096]byte
	s := stream(key, first*k)
	for len(dst) > 0 {
		b := buf[:min(len(buf), len(dst))]
		clear(b)
		s.XORKeyStream(b, b)
		for i, v := range b {
			dst[i] = int8(v)
		}
		dst = dst[len(b):]
	}
}

// line returns line i (a row of A or a column of B) of length K as raw
// bytes in buf, for the verifier.
func (g *Generator) line(key [32]byte, i int, buf []byte) []byte {
	b := buf[:g.size.K]
	clear(b)
	stream(key, i*g.size.K).XORKeyStream(b, b)
	return b
}

// stream returns the keystream of key positioned at byte off, a multiple
// of aes.BlockSize.
func stream(key [32]byte, off int) cipher.Stream {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[8:], uint64(off)/aes.BlockSize)
	return cipher.NewCTR(block, iv[:])
}

// dot returns Σ int8(a[x])·int8(b[x]) over len(a) entries, exactly
// (len(a) ≤ MaxK).
func dot(a, b []byte) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	x := 0
	for ; x+4 <= len(a); x += 4 {
		s0 += int32(int8(a[x])) * int32(int8(b[x]))
		s1 += int32(int8(a[x+1])) * int32(int8(b[x+1]))
		s2 += int32(int8(a[x+2])) * int32(int8(b[x+2]))
		s3 += int32(int8(a[x+3])) * int32(int8(b[x+3]))
	}
	for ; x < len(a); x++ {
		s0 += int32(int8(a[x])) * int32(int8(b[x]))
	}
	return s0 + s1 + s2 + s3
}

// DotInt8 returns Σ a[x]·b[x] in exact int32 arithmetic: entry (i, j) of C
// from row i of A and column j of B. It panics if the lengths differ or
// exceed MaxK.
func DotInt8(a, b []int8) int32 {
	if len(a) != len(b) || len(a) > MaxK {
		panic(fmt.Sprintf("challenge: DotInt8 of lengths %d and %d (max %d)", len(a), len(b), MaxK))
	}
	var s int32
	for x, v := range a {
		s += int32(v) * int32(b[x])
	}
	return s
}
