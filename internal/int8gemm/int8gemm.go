// Package int8gemm multiplies int8 matrices with exact int32 results in
// pure Go. It is the CPU's kernel for the hardware challenge: the CPU
// prover (package challenge/prove) runs it for every challenge, and
// hwinfo's CPU benchmark times it the same way, so the throughput a CPU
// provider declares is the throughput its proofs achieve.
//
// The package is deterministic and starts no goroutines; callers
// parallelise by giving goroutines disjoint blocks of rows (RowBlock at a
// time, as the prover does). TestImportRule keeps it so.
package int8gemm

import "fmt"

// The kernel packs three columns of B into one int64 "word",
// w = b0 + b1·2²¹ + b2·2⁴², so one 64-bit multiply-add by an entry x of A
// accumulates x·b0, x·b1 and x·b2 at once: over a chunk of x's,
// Σ x·w = S0 + S1·2²¹ + S2·2⁴² exactly (|S2·2⁴²| < 2⁶³). Each product is in
// [−16256, 16384], so over a chunk of at most 63 entries every lane sum
// lies in [−2²⁰, 2²⁰): S0 is the low 21 bits read as a signed number, S1
// the next 21 once S0 is subtracted, and S2 what remains. The lanes are
// split into int32 accumulators after every chunk. Three lanes do 1.5
// times the multiply-adds of a plain loop per multiply; a two-lane
// variant (32-bit lanes, no chunks), which hwinfo's benchmark timed until
// both used this one, measured a third slower.

const (
	// MaxK is the longest inner dimension whose products are exact: K
	// products of int8 values sum to at most K·2¹⁴, which fits in an
	// int32 only for K ≤ 131071 (K = 131072 overflows when every entry
	// is −128). The challenge's own bound, challenge.MaxK = 2¹⁶, is
	// within it.
	MaxK = 131071
	// PanelCols is the number of columns of B one packed panel holds:
	// the columns a micro-kernel computes for each row of A.
	PanelCols = lanes * words
	// RowBlock is the number of rows of C the CPU prover computes and
	// hashes at a time by default, and the block hwinfo's benchmark
	// times. A block's rows of A (RowBlock·K bytes) stay in cache while
	// every panel of B streams past them.
	RowBlock = 32

	rows     = 2 // rows of A per micro-kernel
	words    = 4 // packed words per micro-kernel
	lanes    = 3 // columns of B per word
	laneBits = 21
	chunk    = 63 // entries of A between lane splits
)

// PackedB is a K×M matrix B laid out for MulRows: panels of PanelCols
// consecutive columns (the last zero-padded), each K·4 words holding,
// for each x, columns 3w, 3w+1 and 3w+2 of the panel in word w. It takes
// 8/3·K·M bytes.
type PackedB struct {
	k, m int
	w    []int64
}

// NewPackedB returns a K×M matrix B of zeros, to be filled with SetPanel.
// It panics unless 1 ≤ k ≤ MaxK and m ≥ 0.
func NewPackedB(k, m int) *PackedB {
	if k < 1 || k > MaxK || m < 0 {
		panic(fmt.Sprintf("int8gemm: B of %d×%d: want 1 ≤ K ≤ %d and M ≥ 0", k, m, MaxK))
	}
	return &PackedB{k: k, m: m, w: make([]int64, panels(m)*k*words)}
}

func panels(m int) int { return (m + PanelCols - 1) / PanelCols }

// K returns B's number of rows, the inner dimension of a product.
func (b *PackedB) K() int { return b.k }

// M returns B's number of columns.
func (b *PackedB) M() int { return b.m }

// Panels returns the number of panels, ⌈M/PanelCols⌉.
func (b *PackedB) Panels() int { return panels(b.m) }

// SetPanel packs columns p·PanelCols, p·PanelCols+1, … of B from cols,
// which holds them one after another, K entries each (B column-major, as
// challenge.Generator.FillColsB gives it): min(PanelCols, M − p·PanelCols)
// columns. Calls for different panels may run concurrently. It panics if
// p or len(cols) is wrong.
func (b *PackedB) SetPanel(p int, cols []int8) {
	if p < 0 || p >= panels(b.m) || len(cols) != min(PanelCols, b.m-p*PanelCols)*b.k {
		panic(fmt.Sprintf("int8gemm: panel %d from %d entries: want one of %d panels, %d entries",
			p, len(cols), panels(b.m), min(PanelCols, b.m-p*PanelCols)*b.k))
	}
	k := b.k
	dst := b.w[p*k*words : (p+1)*k*words]
	clear(dst)
	for j := range len(cols) / k {
		col := cols[j*k : (j+1)*k]
		w, shift := j/lanes, laneBits*(j%lanes)
		for x, v := range col {
			dst[x*words+w] += int64(v) << shift
		}
	}
}

// MulRows sets c to a·B: a holds rows of A one after another, K entries
// each, and c receives the same rows of C, M entries each,
// c[i·M+j] = Σx int32(a[i·K+x])·int32(B[x][j]), exactly. Panels are the
// outer loop, so one panel (32·K bytes) stays in cache while the rows of a
// stream past it: a block of RowBlock rows is what the kernel is timed
// and run on. Concurrent calls with disjoint c are safe. It panics unless
// len(a) is a multiple of K and len(c) is M times the rows.
func (b *PackedB) MulRows(c []int32, a []int8) {
	k, m := b.k, b.m
	n := len(a) / k
	if len(a)%k != 0 || len(c) != n*m {
		panic(fmt.Sprintf("int8gemm: %d entries of A and %d of C: want rows of K = %d and of M = %d, as many of each",
			len(a), len(c), k, m))
	}
	var out [rows * PanelCols]int32
	for p := range panels(m) {
		panel := b.w[p*k*words : (p+1)*k*words]
		j0 := p * PanelCols
		cols := min(PanelCols, m-j0)
		r := 0
		for ; r+rows <= n; r += rows {
			kernel2(a[r*k:(r+1)*k], a[(r+1)*k:(r+2)*k], panel, &out)
			copy(c[r*m+j0:r*m+j0+cols], out[:cols])
			copy(c[(r+1)*m+j0:(r+1)*m+j0+cols], out[PanelCols:PanelCols+cols])
		}
		for ; r < n; r++ {
			kernel1(a[r*k:(r+1)*k], panel, (*[PanelCols]int32)(out[:PanelCols]))
			copy(c[r*m+j0:r*m+j0+cols], out[:cols])
		}
	}
}

// split returns the three lane sums of an accumulated word.
func split(s int64) (s0, s1, s2 int32) {
	lo := s << (64 - laneBits) >> (64 - laneBits)
	t := (s - lo) >> laneBits
	mid := t << (64 - laneBits) >> (64 - laneBits)
	return int32(lo), int32(mid), int32((t - mid) >> laneBits)
}

// kernel2 computes two rows of A times one panel of B into out: row 0's
// PanelCols sums, then row 1's.
func kernel2(a0, a1 []int8, panel []int64, out *[rows * PanelCols]int32) {
	a1 = a1[:len(a0)]
	panel = panel[:len(a0)*words]
	*out = [rows * PanelCols]int32{}
	for x0 := 0; x0 < len(a0); x0 += chunk {
		x1 := min(x0+chunk, len(a0))
		var s00, s01, s02, s03, s10, s11, s12, s13 int64
		for x := x0; x < x1; x++ {
			v0, v1 := int64(a0[x]), int64(a1[x])
			w := panel[x*words : x*words+words : x*words+words]
			b0, b1, b2, b3 := w[0], w[1], w[2], w[3]
			s00 += v0 * b0
			s01 += v0 * b1
			s02 += v0 * b2
			s03 += v0 * b3
			s10 += v1 * b0
			s11 += v1 * b1
			s12 += v1 * b2
			s13 += v1 * b3
		}
		for i, s := range [...]int64{s00, s01, s02, s03, s10, s11, s12, s13} {
			l0, l1, l2 := split(s)
			out[lanes*i] += l0
			out[lanes*i+1] += l1
			out[lanes*i+2] += l2
		}
	}
}

// kernel1 is kernel2 for a single row.
func kernel1(a0 []int8, panel []int64, out *[PanelCols]int32) {
	panel = panel[:len(a0)*words]
	*out = [PanelCols]int32{}
	for x0 := 0; x0 < len(a0); x0 += chunk {
		x1 := min(x0+chunk, len(a0))
		var s0, s1, s2, s3 int64
		for x := x0; x < x1; x++ {
			v := int64(a0[x])
			w := panel[x*words : x*words+words : x*words+words]
			s0 += v * w[0]
			s1 += v * w[1]
			s2 += v * w[2]
			s3 += v * w[3]
		}
		for i, s := range [...]int64{s0, s1, s2, s3} {
			l0, l1, l2 := split(s)
			out[lanes*i] += l0
			out[lanes*i+1] += l1
			out[lanes*i+2] += l2
		}
	}
}
