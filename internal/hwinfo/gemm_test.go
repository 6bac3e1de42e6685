package hwinfo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveGEMM is the definition GEMMInt8 must match.
func naiveGEMM(a, b []int8, n int) []int32 {
	c := make([]int32, n*n)
	for i := range n {
		for j := range n {
			var s int32
			for k := range n {
				s += int32(a[i*n+k]) * int32(b[k*n+j])
			}
			c[i*n+j] = s
		}
	}
	return c
}

func randomMatrix(r *rand.Rand, n int) []int8 {
	m := make([]int8, n*n)
	for i := range m {
		m[i] = int8(r.IntN(256) - 128)
	}
	return m
}

func filled(n int, v int8) []int8 {
	m := make([]int8, n*n)
	for i := range m {
		m[i] = v
	}
	return m
}

func TestGEMMInt8MatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// Sizes around the micro-kernel's 2 rows × 8 columns, odd sizes (half a
	// packed word), and some random ones.
	sizes := []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 100}
	for range 8 {
		sizes = append(sizes, 1+r.IntN(150))
	}
	for _, n := range sizes {
		a, b := randomMatrix(r, n), randomMatrix(r, n)
		want := naiveGEMM(a, b, n)
		got := make([]int32, n*n)
		GEMMInt8(a, b, got, n)
		if i := firstDiff(got, want); i >= 0 {
			t.Errorf("n=%d: C[%d][%d] = %d, want %d", n, i/n, i%n, got[i], want[i])
		}
	}
}

// TestGEMMInt8Extremes checks the values that stress the packed lanes: all
// -128 (the largest positive products) and mixed signs (borrows between lanes).
func TestGEMMInt8Extremes(t *testing.T) {
	const n = 300
	tests := []struct {
		name string
		a, b []int8
	}{
		{"-128×-128", filled(n, -128), filled(n, -128)},
		{"-128×127", filled(n, -128), filled(n, 127)},
		{"127×-128", filled(n, 127), filled(n, -128)},
		{"alternating", alternating(n), alternating(n)},
	}
	for _, tt := range tests {
		got := make([]int32, n*n)
		GEMMInt8(tt.a, tt.b, got, n)
		if i := firstDiff(got, naiveGEMM(tt.a, tt.b, n)); i >= 0 {
			t.Errorf("%s: C[%d][%d] = %d, want %d", tt.name, i/n, i%n, got[i], naiveGEMM(tt.a, tt.b, n)[i])
		}
	}
}

func alternating(n int) []int8 {
	m := make([]int8, n*n)
	for i := range m {
		if (i/n+i%n)%2 == 0 {
			m[i] = -128
		} else {
			m[i] = 127
		}
	}
	return m
}

// TestUnpack checks the two-lane trick at the int32 limits that sizes too
// large to test directly (n up to MaxGEMMSize) can reach.
func TestUnpack(t *testing.T) {
	vals := []int32{0, 1, -1, 2, -2, 16384, -16384, math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, math.MinInt32 + 1}
	for _, lo := range vals {
		for _, hi := range vals {
			s := int64(lo) + int64(hi)<<32 // wraps, as the accumulators do
			if gl, gh := unpack(s); gl != lo || gh != hi {
				t.Errorf("unpack(%d + %d·2³²) = %d, %d", lo, hi, gl, gh)
			}
		}
	}
}

func TestGEMMInt8ParallelEqualsSerial(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 5, 64, 129, 250} {
		a, b := randomMatrix(r, n), randomMatrix(r, n)
		serial := make([]int32, n*n)
		GEMMInt8(a, b, serial, n)
		for _, w := range []int{-1, 0, 2, 3, 7, 1000} {
			par := make([]int32, n*n)
			GEMMInt8Parallel(a, b, par, n, w)
			if !slices.Equal(par, serial) {
				t.Errorf("n=%d workers=%d: parallel result differs from serial", n, w)
			}
		}
	}
}

func TestGEMMInt8LeavesInputsAndTail(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 9
	a, b := randomMatrix(r, n), randomMatrix(r, n)
	a0, b0 := slices.Clone(a), slices.Clone(b)
	c := make([]int32, n*n+3)
	c[n*n], c[n*n+1], c[n*n+2] = 7, 8, 9
	GEMMInt8(a, b, c, n)
	if !slices.Equal(a, a0) || !slices.Equal(b, b0) {
		t.Error("inputs modified")
	}
	if got := c[n*n:]; !slices.Equal(got, []int32{7, 8, 9}) {
		t.Errorf("elements past n·n = %v, want untouched [7 8 9]", got)
	}
}

func TestGEMMInt8Panics(t *testing.T) {
	tests := map[string]func(){
		"negative n": func() { GEMMInt8(nil, nil, nil, -1) },
		"too large":  func() { GEMMInt8(nil, nil, nil, MaxGEMMSize+1) },
		"short a":    func() { GEMMInt8(make([]int8, 3), make([]int8, 4), make([]int32, 4), 2) },
		"short c":    func() { GEMMInt8(make([]int8, 4), make([]int8, 4), make([]int32, 3), 2) },
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

func firstDiff(got, want []int32) int {
	for i := range want {
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}

func BenchmarkGEMMInt8(b *testing.B) {
	for _, n := range []int{256, 512} {
		a, bm := MatrixFromSeed([32]byte{'A'}, n), MatrixFromSeed([32]byte{'B'}, n)
		c := make([]int32, n*n)
		ops := 2 * float64(n) * float64(n) * float64(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				GEMMInt8(a, bm, c, n)
			}
			b.ReportMetric(ops*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
		b.Run(fmt.Sprintf("n=%d/parallel", n), func(b *testing.B) {
			for b.Loop() {
				GEMMInt8Parallel(a, bm, c, n, 0)
			}
			b.ReportMetric(ops*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}
