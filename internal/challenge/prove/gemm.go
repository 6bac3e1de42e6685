package prove

// The CPU kernel computes C = A·B in pure Go with exact int32 results.
//
// It packs three columns of B into one int64 "word", w = b0 + b1·2²¹ + b2·2⁴²,
// so one 64-bit multiply-add by an entry x of A accumulates x·b0, x·b1 and
// x·b2 at once: over a chunk of x's, Σ x·w = S0 + S1·2²¹ + S2·2⁴² exactly
// (|S2·2⁴²| < 2⁶³). Each product is in [−16256, 16384], so over a chunk of
// at most 63 entries every lane sum lies in [−2²⁰, 2²⁰): S0 is the low 21
// bits read as a signed number, S1 the next 21 once S0 is subtracted, and
// S2 what remains. The lanes are split into int32 accumulators after every
// chunk. hwinfo's benchmark kernel, which gives a CPU provider its claim,
// packs two columns (32-bit lanes, no chunks); three lanes do 1.5 times the
// multiply-adds per multiply, which measures about a third faster and
// leaves an honest CPU provider most of the slack for expanding A and B
// and hashing C.

const (
	kernelRows  = 2 // rows of A per micro-kernel
	kernelWords = 4 // packed words per micro-kernel
	lanes       = 3 // columns of B per word
	laneBits    = 21
	panelCols   = lanes * kernelWords // columns of B per panel
	chunk       = 63                  // entries of A between lane splits
)

// panels returns how many panels cover m columns; the last is zero-padded.
func panels(m int) int { return (m + panelCols - 1) / panelCols }

// packPanel packs up to panelCols consecutive columns of B (each K
// entries, as FillColsB lays them out, len(cols)/k of them) into dst,
// K·kernelWords words: for each x, word w holds columns 3w, 3w+1, 3w+2.
// Missing columns are zero.
func packPanel(dst []int64, cols []int8, k int) {
	dst = dst[:k*kernelWords]
	clear(dst)
	for j := range len(cols) / k {
		col := cols[j*k : (j+1)*k]
		w, shift := j/lanes, laneBits*(j%lanes)
		for x, v := range col {
			dst[x*kernelWords+w] += int64(v) << shift
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

// mulRows computes rows of C into c (len(a)/k rows of m entries) from the
// same rows of A in a and the packed panels of B. Panels are the outer
// loop, so one panel (32·K bytes) stays in cache while the block of rows of
// A streams past it.
func mulRows(c []int32, a []int8, packed []int64, k, m int) {
	rows := len(a) / k
	var out [kernelRows * panelCols]int32
	for p := range panels(m) {
		panel := packed[p*k*kernelWords : (p+1)*k*kernelWords]
		j0 := p * panelCols
		n := min(panelCols, m-j0)
		r := 0
		for ; r+kernelRows <= rows; r += kernelRows {
			kernel2(a[r*k:(r+1)*k], a[(r+1)*k:(r+2)*k], panel, &out)
			copy(c[r*m+j0:r*m+j0+n], out[:n])
			copy(c[(r+1)*m+j0:(r+1)*m+j0+n], out[panelCols:panelCols+n])
		}
		for ; r < rows; r++ {
			kernel1(a[r*k:(r+1)*k], panel, (*[panelCols]int32)(out[:panelCols]))
			copy(c[r*m+j0:r*m+j0+n], out[:n])
		}
	}
}

// kernel2 computes two rows of A times one panel of B into out: row 0's
// panelCols sums, then row 1's.
func kernel2(a0, a1 []int8, panel []int64, out *[kernelRows * panelCols]int32) {
	a1 = a1[:len(a0)]
	panel = panel[:len(a0)*kernelWords]
	*out = [kernelRows * panelCols]int32{}
	for x0 := 0; x0 < len(a0); x0 += chunk {
		x1 := min(x0+chunk, len(a0))
		var s00, s01, s02, s03, s10, s11, s12, s13 int64
		for x := x0; x < x1; x++ {
			v0, v1 := int64(a0[x]), int64(a1[x])
			w := panel[x*kernelWords : x*kernelWords+kernelWords : x*kernelWords+kernelWords]
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
func kernel1(a0 []int8, panel []int64, out *[panelCols]int32) {
	panel = panel[:len(a0)*kernelWords]
	*out = [panelCols]int32{}
	for x0 := 0; x0 < len(a0); x0 += chunk {
		x1 := min(x0+chunk, len(a0))
		var s0, s1, s2, s3 int64
		for x := x0; x < x1; x++ {
			v := int64(a0[x])
			w := panel[x*kernelWords : x*kernelWords+kernelWords : x*kernelWords+kernelWords]
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
