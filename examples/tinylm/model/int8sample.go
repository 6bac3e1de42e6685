package model

import (
	"cmp"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
)

// int8Source samples the int8 model's tokens, in integers only.
type int8Source struct {
	m      *Int8
	o      Options
	rng    *rand.Rand
	ctx    []int32 // the last Context tokens
	logits []int32
}

func (s *int8Source) next(notEnd bool) (int32, error) {
	if err := s.m.Logits(s.logits, [][]int32{s.ctx}); err != nil {
		return 0, err
	}
	tok := sampleInt(s.logits, notEnd, s.m.dims.LogitScale, fixedTemperature(s.o.Temperature), fixedTopP(s.o.TopP), s.rng)
	copy(s.ctx, s.ctx[1:])
	s.ctx[len(s.ctx)-1] = tok
	return tok, nil
}

// Fixed-point forms of the sampling options: the request's floats are
// rounded once, exactly, to integers (a multiplication by a power of two
// and math.Round are exact in IEEE arithmetic), and only these integers
// are used.
const (
	tempOne = 1 << 10 // temperature 1
	topPOne = 1 << 16 // top_p 1
)

func fixedTemperature(t float64) int64 {
	if !(t > 0) {
		return 0
	}
	return int64(math.Round(min(t, 16) * tempOne))
}

func fixedTopP(p float64) int64 {
	if !(p > 0) || p >= 1 {
		return 0 // all tokens
	}
	return max(int64(math.Round(p*topPOne)), 1)
}

// weighted is a candidate token and its integer weight.
type weighted struct {
	tok int32
	w   uint64
}

// sampleInt picks the next token from integer logits: the likeliest
// (the lowest id among equals) at temperature 0, else one drawn with
// weight exp(logit·scale/2^24 / temperature) relative to the likeliest
// (expNeg, in fixed point), from the likeliest ones whose weights add up
// to top_p of the whole (nucleus sampling) when topP > 0; rng draws an
// integer below the weights' sum. notEnd leaves End out.
func sampleInt(logits []int32, notEnd bool, scale, temp, topP int64, rng *rand.Rand) int32 {
	first := 0
	if notEnd {
		first = 1
	}
	best := first
	for i := first; i < len(logits); i++ {
		if logits[i] > logits[best] {
			best = i
		}
	}
	if temp == 0 || len(logits)-first == 1 {
		return int32(best)
	}
	var cs []weighted
	var total uint64
	for i := first; i < len(logits); i++ {
		// d·scale is at most 2^33·2^24: no overflow. Weights below
		// e^-48 of the likeliest are 0.
		e := (int64(logits[i]) - int64(logits[best])) * scale
		e = max(e, -expFloor*tempOne)
		e = max(e*tempOne/temp, -expFloor)
		if w := expNeg(-e); w > 0 {
			cs = append(cs, weighted{int32(i), w})
			total += w
		}
	}
	if topP > 0 {
		slices.SortStableFunc(cs, func(a, b weighted) int { return cmp.Or(cmp.Compare(b.w, a.w), cmp.Compare(a.tok, b.tok)) })
		kept, sum := 0, uint64(0)
		for kept < len(cs) && sum*topPOne < uint64(topP)*total {
			sum += cs[kept].w
			kept++
		}
		cs, total = cs[:kept], sum
	}
	r := rng.Uint64N(total)
	for _, c := range cs {
		if r < c.w {
			return c.tok
		}
		r -= c.w
	}
	return cs[len(cs)-1].tok // not reached: r < total
}

// expFloor bounds expNeg's argument: 48 natural-log units, times 2^24.
const expFloor = 48 << 24

// log2e is log₂(e) times 2^30, rounded.
const log2e = 1549082005

// expNeg returns e^(-x/2^24)·2^32 for 0 ≤ x ≤ expFloor, in integers:
// 2^(-y) with y = x·log₂e, its integer part a shift and its fraction's
// top ten bits a table entry.
func expNeg(x int64) uint64 {
	y := x * log2e >> 30 // 2^24 units of log₂
	n, f := y>>24, y&(1<<24-1)
	if n >= 64 {
		return 0
	}
	return exp2Table[f>>14] >> n
}

// exp2Table[j] is 2^(-j/1024)·2^32, rounded, computed in software
// floating point (math/big), the same on every machine.
var exp2Table = func() (t [1024]uint64) {
	const prec = 128
	root := big.NewFloat(2).SetPrec(prec) // 2^(1/1024): ten square roots of 2
	for range 10 {
		root.Sqrt(root)
	}
	inv := new(big.Float).SetPrec(prec).Quo(big.NewFloat(1).SetPrec(prec), root)
	v := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(1), 32)
	half := big.NewFloat(0.5)
	for j := range t {
		r := new(big.Float).SetPrec(prec).Add(v, half)
		t[j], _ = r.Uint64()
		v.Mul(v, inv)
	}
	return t
}()
