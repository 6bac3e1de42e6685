package hwinfo

import (
	"fmt"
	"runtime"
	"sync"
)

// MaxGEMMSize is the largest n for which GEMMInt8 is exact: n products of
// int8 values are at most n·128·128 = n·2^14, which fits in an int32 only for
// n ≤ 131071 (n = 131072 overflows when every entry is -128).
const MaxGEMMSize = 131071

// GEMMInt8 computes C = A×B for n×n row-major int8 matrices with exact int32
// accumulation: c[i*n+j] = Σk int32(a[i*n+k])·int32(b[k*n+j]). Integer
// arithmetic makes the result identical on every platform and for every
// implementation, which the hardware challenge protocol relies on.
//
// It panics if n < 0, n > MaxGEMMSize, or a, b or c hold fewer than n·n
// elements. Only the first n·n elements of c are written; a and b are not
// modified.
func GEMMInt8(a, b []int8, c []int32, n int) {
	GEMMInt8Parallel(a, b, c, n, 1)
}

// GEMMInt8Parallel is GEMMInt8 split across workers goroutines by rows of C.
// workers ≤ 0 means runtime.GOMAXPROCS(0). The result does not depend on
// workers.
func GEMMInt8Parallel(a, b []int8, c []int32, n, workers int) {
	gemmInt8(a, b, c, n, workers, nil)
}

// The kernel packs two int8 columns of B into one int64 "word", w = b0 + b1·2³²,
// so that one 64-bit multiply-add by an A entry x accumulates both x·b0 and x·b1:
// Σ x·w = L0 + L1·2³² (mod 2⁶⁴) with L0 = Σ x·b0 and L1 = Σ x·b1. Both sums fit in
// an int32 (n ≤ MaxGEMMSize), so the low 32 bits are L0 exactly and, once L0 is
// subtracted, the high 32 bits are L1 exactly: borrows between the lanes cancel
// in wrapping arithmetic. This halves the multiplies of a plain loop in pure Go.
const (
	gemmRows  = 2 // rows of A per micro-kernel
	gemmWords = 4 // packed words of B (2 columns each) per micro-kernel
	gemmCols  = 2 * gemmWords
)

// packB lays B out in panels of gemmCols columns: panel p holds, for each k,
// the gemmWords words covering columns [p·gemmCols, (p+1)·gemmCols), zero past n.
// A micro-kernel then reads one panel front to back.
func packB(b []int8, n int) []int64 {
	panels := (n + gemmCols - 1) / gemmCols
	out := make([]int64, panels*n*gemmWords)
	for k := 0; k < n; k++ {
		row := b[k*n : k*n+n]
		for j := 0; j < n; j += 2 {
			var w int64 = int64(row[j])
			if j+1 < n {
				w += int64(row[j+1]) << 32
			}
			p, off := j/gemmCols, (j%gemmCols)/2
			out[(p*n+k)*gemmWords+off] = w
		}
	}
	return out
}

// unpack splits an accumulated word into its two exact int32 sums.
func unpack(s int64) (lo, hi int32) {
	lo = int32(s)
	hi = int32((s - int64(lo)) >> 32)
	return lo, hi
}

// gemmInt8 is the shared implementation; stop, if non-nil, is polled between
// panels and makes it return false early (C is then incomplete).
func gemmInt8(a, b []int8, c []int32, n, workers int, stop func() bool) bool {
	if n < 0 || n > MaxGEMMSize {
		panic(fmt.Sprintf("hwinfo: GEMMInt8 size n=%d outside [0, %d]", n, MaxGEMMSize))
	}
	nn := n * n
	if len(a) < nn || len(b) < nn || len(c) < nn {
		panic(fmt.Sprintf("hwinfo: GEMMInt8 n=%d needs %d elements, got len(a)=%d len(b)=%d len(c)=%d",
			n, nn, len(a), len(b), len(c)))
	}
	if n == 0 {
		return true
	}
	bp := packB(b[:nn], n)
	blocks := (n + gemmRows - 1) / gemmRows
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	if workers > blocks {
		workers = blocks
	}
	if workers == 1 {
		return gemmRowsRange(a, bp, c, n, 0, n, stop)
	}
	var wg sync.WaitGroup
	ok := make([]bool, workers)
	for w := range workers {
		lo := blocks * w / workers * gemmRows
		hi := min(blocks*(w+1)/workers*gemmRows, n)
		wg.Go(func() { ok[w] = gemmRowsRange(a, bp, c, n, lo, hi, stop) })
	}
	wg.Wait()
	for _, o := range ok {
		if !o {
			return false
		}
	}
	return true
}

// gemmRowsRange computes rows [lo, hi) of C. Panels are the outer loop so one
// panel of B (n·32 bytes) stays in cache while the rows of A stream past it.
func gemmRowsRange(a []int8, bp []int64, c []int32, n, lo, hi int, stop func() bool) bool {
	panels := len(bp) / (n * gemmWords)
	for p := range panels {
		if stop != nil && stop() {
			return false
		}
		panel := bp[p*n*gemmWords : (p+1)*n*gemmWords]
		j0 := p * gemmCols
		i := lo
		for ; i+gemmRows <= hi; i += gemmRows {
			s := kernel2x4(a[i*n:i*n+n], a[(i+1)*n:(i+1)*n+n], panel)
			store(c[i*n:i*n+n], j0, s[0:4])
			store(c[(i+1)*n:(i+1)*n+n], j0, s[4:8])
		}
		for ; i < hi; i++ {
			s := kernel1x4(a[i*n:i*n+n], panel)
			store(c[i*n:i*n+n], j0, s[:])
		}
	}
	return true
}

// store unpacks accumulated words into row c starting at column j0, dropping
// the zero padding past the end of the row.
func store(c []int32, j0 int, s []int64) {
	for w, v := range s {
		lo, hi := unpack(v)
		j := j0 + 2*w
		if j < len(c) {
			c[j] = lo
		}
		if j+1 < len(c) {
			c[j+1] = hi
		}
	}
}

// kernel2x4 accumulates two rows of A against one panel of B.
func kernel2x4(a0, a1 []int8, panel []int64) [8]int64 {
	a1 = a1[:len(a0)]
	panel = panel[:len(a0)*gemmWords]
	var s00, s01, s02, s03, s10, s11, s12, s13 int64
	for k, x := range a0 {
		x0, x1 := int64(x), int64(a1[k])
		w := panel[k*gemmWords : k*gemmWords+gemmWords : k*gemmWords+gemmWords]
		b0, b1, b2, b3 := w[0], w[1], w[2], w[3]
		s00 += x0 * b0
		s01 += x0 * b1
		s02 += x0 * b2
		s03 += x0 * b3
		s10 += x1 * b0
		s11 += x1 * b1
		s12 += x1 * b2
		s13 += x1 * b3
	}
	return [8]int64{s00, s01, s02, s03, s10, s11, s12, s13}
}

// kernel1x4 is kernel2x4 for a single leftover row.
func kernel1x4(a0 []int8, panel []int64) [4]int64 {
	panel = panel[:len(a0)*gemmWords]
	var s0, s1, s2, s3 int64
	for k, x := range a0 {
		x0 := int64(x)
		w := panel[k*gemmWords : k*gemmWords+gemmWords : k*gemmWords+gemmWords]
		s0 += x0 * w[0]
		s1 += x0 * w[1]
		s2 += x0 * w[2]
		s3 += x0 * w[3]
	}
	return [4]int64{s0, s1, s2, s3}
}
