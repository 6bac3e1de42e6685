package hwinfo

import (
	"slices"
	"testing"
)

func seq32() (s [32]byte) {
	for i := range s {
		s[i] = byte(i)
	}
	return s
}

func TestMatrixFromSeedGolden(t *testing.T) {
	// From an independent implementation: Python's hashlib,
	// sha256(bytes(range(32)) + counter.to_bytes(8, "big")).
	m := MatrixFromSeed(seq32(), 8) // 64 bytes: two hash blocks
	want := []int8{-87, -42, -27, 0, 41, 58, -120, -67, 56, -53, -30, 19, -48, 122, -73, 31}
	if got := m[:16]; !slices.Equal(got, want) {
		t.Errorf("first bytes = %v, want %v", got, want)
	}
	if got, want := m[32:36], []int8{96, 97, -60, 56}; !slices.Equal(got, want) {
		t.Errorf("bytes 32..35 (second block) = %v, want %v", got, want)
	}
	if got, want := MatrixFromSeed([32]byte{}, 3)[:8], []int8{44, 52, -50, 29, -14, 59, -125, -116}; !slices.Equal(got, want) {
		t.Errorf("zero seed: first bytes = %v, want %v", got, want)
	}
}

func TestMatrixFromSeedDeterministic(t *testing.T) {
	a, b := MatrixFromSeed(seq32(), 100), MatrixFromSeed(seq32(), 100)
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different matrices")
	}
	other := seq32()
	other[31] ^= 1
	if c := MatrixFromSeed(other, 100); slices.Equal(a, c) {
		t.Fatal("different seeds gave the same matrix")
	}
	if len(MatrixFromSeed(seq32(), 0)) != 0 {
		t.Fatal("n=0 should give an empty matrix")
	}
	// The matrix is a prefix of one keystream, whatever n.
	small := MatrixFromSeed(seq32(), 7)
	if !slices.Equal(small, a[:49]) {
		t.Error("7×7 matrix is not the first 49 bytes of the 100×100 one")
	}
}

func TestMatrixRowColumnFromSeed(t *testing.T) {
	seed := seq32()
	for _, n := range []int{1, 5, 33, 100} {
		m := MatrixFromSeed(seed, n)
		for _, i := range []int{0, n / 2, n - 1} {
			if got, want := MatrixRowFromSeed(seed, n, i), m[i*n:i*n+n]; !slices.Equal(got, want) {
				t.Errorf("n=%d row %d = %v, want %v", n, i, got, want)
			}
			col := make([]int8, n)
			for k := range col {
				col[k] = m[k*n+i]
			}
			if got := MatrixColumnFromSeed(seed, n, i); !slices.Equal(got, col) {
				t.Errorf("n=%d column %d = %v, want %v", n, i, got, col)
			}
		}
	}
}

// TestVerifyEntry is the challenge check end to end: an entry of C recomputed
// from one row of A and one column of B, each generated alone.
func TestVerifyEntry(t *testing.T) {
	const n = 97
	sa, sb := seq32(), [32]byte{1}
	a, b := MatrixFromSeed(sa, n), MatrixFromSeed(sb, n)
	c := make([]int32, n*n)
	GEMMInt8Parallel(a, b, c, n, 3)
	for _, ij := range [][2]int{{0, 0}, {3, 96}, {96, 5}, {50, 50}} {
		i, j := ij[0], ij[1]
		if got, want := DotInt8(MatrixRowFromSeed(sa, n, i), MatrixColumnFromSeed(sb, n, j)), c[i*n+j]; got != want {
			t.Errorf("C[%d][%d] recomputed = %d, GEMM gave %d", i, j, got, want)
		}
	}
}

func TestMatrixPanics(t *testing.T) {
	tests := map[string]func(){
		"negative n":       func() { MatrixFromSeed([32]byte{}, -1) },
		"row out of range": func() { MatrixRowFromSeed([32]byte{}, 4, 4) },
		"column negative":  func() { MatrixColumnFromSeed([32]byte{}, 4, -1) },
		"dot lengths":      func() { DotInt8(make([]int8, 2), make([]int8, 3)) },
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("did not panic")
				}
			}()
			f()
		})
	}
}
