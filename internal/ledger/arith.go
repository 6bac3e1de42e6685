package ledger

import (
	"math"
	"math/bits"
)

// Integer arithmetic the areas share: parts per million, and a×b/c without
// overflow.

const ppm = 1_000_000

// mulDiv returns a×b/c rounded down, computed in 128 bits; a result that
// does not fit 64 bits saturates (no job can be that expensive: escrow
// would fail first).
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, c)
	return q
}
