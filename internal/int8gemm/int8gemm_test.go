package int8gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// naive is the definition MulRows must match: A row-major (n×k), B
// column-major (m columns of k).
func naive(a, cols []int8, k, m int) []int32 {
	n := len(a) / k
	c := make([]int32, n*m)
	for i := range n {
		for j := range m {
			var s int32
			for x := range k {
				s += int32(a[i*k+x]) * int32(cols[j*k+x])
			}
			c[i*m+j] = s
		}
	}
	return c
}

// pack packs a whole column-major B.
func pack(cols []int8, k, m int) *PackedB {
	b := NewPackedB(k, m)
	for p := range b.Panels() {
		b.SetPanel(p, cols[p*PanelCols*k:min(m, (p+1)*PanelCols)*k])
	}
	return b
}

func random(r *rand.Rand, n int) []int8 {
	v := make([]int8, n)
	for i := range v {
		v[i] = int8(r.Uint32())
	}
	return v
}

func TestMulRowsMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// Edges of the micro-kernel (2 rows × 12 columns, 3 to a word) and of
	// the lane chunks (63 entries of A), a challenge's multiples of 64,
	// and random shapes.
	shapes := [][3]int{
		{1, 1, 1}, {2, 1, 3}, {3, 2, 4}, {1, 62, 11}, {2, 63, 12}, {5, 64, 13},
		{7, 126, 24}, {8, 127, 25}, {33, 189, 36}, {64, 64, 64}, {64, 128, 192}, {0, 5, 7}, {4, 9, 0},
	}
	for range 10 {
		shapes = append(shapes, [3]int{r.IntN(40), 1 + r.IntN(300), r.IntN(60)})
	}
	for _, s := range shapes {
		n, k, m := s[0], s[1], s[2]
		a, cols := random(r, n*k), random(r, k*m)
		got := make([]int32, n*m)
		pack(cols, k, m).MulRows(got, a)
		want := naive(a, cols, k, m)
		if i := firstDiff(got, want); i >= 0 {
			t.Errorf("%d×%d×%d: C[%d][%d] = %d, want %d", n, k, m, i/m, i%m, got[i], want[i])
		}
	}
}

// TestExtremes drives the lanes to their limits at K = MaxK: rows and
// columns of −128 and 127, so every chunk's lane sums reach the ends of
// their 21-bit range and the totals reach MaxK·2¹⁴, just under 2³¹, with
// borrows between lanes in both directions.
func TestExtremes(t *testing.T) {
	const k, m, n = MaxK, PanelCols + 5, 3
	a := make([]int8, n*k)
	cols := make([]int8, m*k)
	for x := range k {
		a[x], a[k+x], a[2*k+x] = -128, 127, int8(x*7)
	}
	for j := range m {
		for x := range k {
			switch j % 12 {
			case 0, 3, 5, 10:
				cols[j*k+x] = -128
			case 1, 6, 8, 11:
				cols[j*k+x] = 127
			default:
				cols[j*k+x] = int8(x*j + j)
			}
		}
	}
	c := make([]int32, n*m)
	pack(cols, k, m).MulRows(c, a)
	if i := firstDiff(c, naive(a, cols, k, m)); i >= 0 {
		t.Errorf("C[%d][%d] = %d, want %d", i/m, i%m, c[i], naive(a, cols, k, m)[i])
	}
	if got, want := int64(c[0]), int64(MaxK)<<14; got != want {
		t.Errorf("(−128)·(−128)·MaxK = %d, want %d", got, want)
	}
}

// TestMaxK is the bound itself: MaxK products of −128·−128 fit in an int32,
// one more does not.
func TestMaxK(t *testing.T) {
	if sum := int64(MaxK) * 128 * 128; sum > math.MaxInt32 {
		t.Errorf("MaxK·2¹⁴ = %d overflows an int32", sum)
	}
	if sum := int64(MaxK+1) * 128 * 128; sum <= math.MaxInt32 {
		t.Errorf("(MaxK+1)·2¹⁴ = %d fits an int32: MaxK is not the largest exact K", sum)
	}
}

// TestSplit checks the three-lane split at the ends of the lanes' range,
// which sizes too large to test directly reach.
func TestSplit(t *testing.T) {
	vals := []int32{0, 1, -1, 2, -2, 16384, -16256, 1<<20 - 1, -1 << 20, 1<<20 - 2, -1<<20 + 1}
	for _, s0 := range vals {
		for _, s1 := range vals {
			for _, s2 := range vals {
				w := int64(s0) + int64(s1)<<laneBits + int64(s2)<<(2*laneBits)
				if g0, g1, g2 := split(w); g0 != s0 || g1 != s1 || g2 != s2 {
					t.Errorf("split(%d + %d·2²¹ + %d·2⁴²) = %d, %d, %d", s0, s1, s2, g0, g1, g2)
				}
			}
		}
	}
}

// TestBlocksEqualWhole: C computed by blocks of rows, serially and on
// goroutines as the prover and hwinfo's benchmark run it, is C computed in
// one call.
func TestBlocksEqualWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, k, m = 101, 192, 77
	a, cols := random(r, n*k), random(r, k*m)
	b := pack(cols, k, m)
	whole := make([]int32, n*m)
	b.MulRows(whole, a)
	for _, rb := range []int{1, 2, 3, RowBlock, n} {
		serial, par := make([]int32, n*m), make([]int32, n*m)
		var wg sync.WaitGroup
		for i0 := 0; i0 < n; i0 += rb {
			i1 := min(i0+rb, n)
			b.MulRows(serial[i0*m:i1*m], a[i0*k:i1*k])
			wg.Go(func() { b.MulRows(par[i0*m:i1*m], a[i0*k:i1*k]) })
		}
		wg.Wait()
		if !slices.Equal(serial, whole) {
			t.Errorf("blocks of %d rows, serial: differs from one call", rb)
		}
		if !slices.Equal(par, whole) {
			t.Errorf("blocks of %d rows, on goroutines: differs from one call", rb)
		}
	}
}

func TestLeavesInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n, k, m = 9, 70, 14
	a, cols := random(r, n*k), random(r, k*m)
	a0, cols0 := slices.Clone(a), slices.Clone(cols)
	pack(cols, k, m).MulRows(make([]int32, n*m), a)
	if !slices.Equal(a, a0) || !slices.Equal(cols, cols0) {
		t.Error("inputs modified")
	}
}

// TestSetPanelOverwrites: packing a panel again replaces it.
func TestSetPanelOverwrites(t *testing.T) {
	const k, m = 5, 7
	b := NewPackedB(k, m)
	ones := slices.Repeat([]int8{1}, k*m)
	b.SetPanel(0, slices.Repeat([]int8{-128}, k*m))
	b.SetPanel(0, ones)
	c := make([]int32, m)
	b.MulRows(c, []int8{1, 1, 1, 1, 1})
	if want := slices.Repeat([]int32{k}, m); !slices.Equal(c, want) {
		t.Errorf("C = %v, want %v", c, want)
	}
}

func TestPanics(t *testing.T) {
	b := NewPackedB(4, 13) // two panels: 12 columns and 1
	tests := map[string]func(){
		"K = 0":            func() { NewPackedB(0, 4) },
		"K > MaxK":         func() { NewPackedB(MaxK+1, 4) },
		"M < 0":            func() { NewPackedB(4, -1) },
		"panel −1":         func() { b.SetPanel(-1, make([]int8, 48)) },
		"panel 2":          func() { b.SetPanel(2, make([]int8, 4)) },
		"short panel":      func() { b.SetPanel(0, make([]int8, 44)) },
		"long last panel":  func() { b.SetPanel(1, make([]int8, 8)) },
		"A not whole rows": func() { b.MulRows(make([]int32, 13), make([]int8, 5)) },
		"C too short":      func() { b.MulRows(make([]int32, 25), make([]int8, 8)) },
		"C too long":       func() { b.MulRows(make([]int32, 27), make([]int8, 8)) },
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

// BenchmarkMulRows is the kernel on one core, as the prover runs it: an
// n×n×n product in blocks of RowBlock rows.
func BenchmarkMulRows(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{512, 2048} {
		a, cols := random(r, RowBlock*n), random(r, n*n)
		packed := pack(cols, n, n)
		c := make([]int32, RowBlock*n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				for range n / RowBlock {
					packed.MulRows(c, a)
				}
			}
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOPS")
		})
	}
}
