package challenge

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Protocol bounds on a challenge's shape. Every dimension is a multiple of
// Align, so that rows of A and columns of B start on an AES block and every
// row of C holds a whole number of Merkle leaves.
const (
	Align = 64
	// MaxK bounds the inner dimension. An entry of C is a sum of K products
	// of int8 values, each at most 128·128 = 2¹⁴ in magnitude, so K ≤ 2¹⁶
	// keeps it within ±2³⁰: exact in int32 with room to spare.
	MaxK = 1 << 16
	// MaxM bounds the columns of C (and of B). B is the one operand a
	// prover keeps whole; at MaxK × MaxM it is 1 GiB.
	MaxM = 1 << 14
	// MaxN bounds the rows of C (and of A). Rows are independent, so a
	// prover streams A and C by blocks of rows and never holds either; at
	// the maximum each is 512 GiB, expanded and hashed on the device by a
	// GPU prover (at K = MaxK and M = MaxM that is 3·10⁻⁵ bytes per
	// operation: a few percent of an H100's time at 1 TB/s of AES and of
	// SHA-256).
	MaxN = 1 << 23
	// MaxOps is the work of the largest challenge, 2·MaxN·MaxK·MaxM = 2⁵⁴,
	// 9 s at an H100's int8 peak.
	MaxOps = 2 * MaxN * MaxK * MaxM
)

// Size is the shape of a challenge's GEMM: A is N×K, B is K×M, C = A·B is
// N×M.
type Size struct {
	N, K, M int
}

func (s Size) String() string { return fmt.Sprintf("%d×%d×%d", s.N, s.K, s.M) }

// Validate reports whether s is within the protocol's bounds.
func (s Size) Validate() error {
	for _, d := range []struct {
		name string
		v    int
		max  int
	}{{"N", s.N, MaxN}, {"K", s.K, MaxK}, {"M", s.M, MaxM}} {
		if d.v < Align || d.v > d.max || d.v%Align != 0 {
			return fmt.Errorf("size %s: %s = %d, want a multiple of %d in [%d, %d]: %w",
				s, d.name, d.v, Align, Align, d.max, ErrSize)
		}
	}
	return nil
}

// Ops is the challenge's work counted as int8 GPU datasheets and
// hwinfo.Figures count it: a multiply-add is two operations, so 2·N·K·M.
func (s Size) Ops() uint64 { return 2 * uint64(s.N) * uint64(s.K) * uint64(s.M) }

// Leaves is the number of Merkle leaves over C: each is LeafEntries
// consecutive entries of one row.
func (s Size) Leaves() uint64 { return uint64(s.N) * uint64(s.M) / LeafEntries }

// Depth is the length of every Merkle proof for a C of this size.
func (s Size) Depth() int { return treeDepth(s.Leaves()) }

// appendBinary appends N, K, M as uint32 little-endian, the form in which a
// size enters the key and selection derivations.
func (s Size) appendBinary(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(s.N))
	b = binary.LittleEndian.AppendUint32(b, uint32(s.K))
	return binary.LittleEndian.AppendUint32(b, uint32(s.M))
}

// Params are the tunable parts of the protocol. A chain keeps them in its
// governance parameters; every validator must use the same values.
type Params struct {
	// TargetMillis is the compute time, at the claimed throughput, that
	// SizeFor aims for.
	TargetMillis uint64
	// SlackPermille multiplies the compute time at the claimed throughput
	// to give the prover's time budget, in thousandths (1250 = ×1.25). The
	// slack pays for generating A and B and hashing C, and for the spread
	// between a benchmark figure and a run under load.
	SlackPermille uint64
	// AllowanceMillis is added to the budget for everything that is not
	// computation: seeing the block that issues the challenge and getting
	// the commit into a block. About two block times.
	AllowanceMillis uint64
	// Openings is K, the number of leaves the chain opens after the commit.
	Openings int
}

// Defaults. With 6 s blocks a commit lands in the first block after the
// proof ends, hence the 6 s allowance. The deadline is a measuring mark,
// not a trap: a correct proof committed after it measures the device and
// is not slashed (the ledger's rulings, docs/challenge.md), so it can be
// tight enough that a device of half its claim is always late. DESIGN.md
// asks for ~60 openings.
const (
	DefaultTargetMillis    = 10_000
	DefaultSlackPermille   = 1_250
	DefaultAllowanceMillis = 6_000
	DefaultOpenings        = 60
	// MaxOpenings bounds K so an opening always fits a 256 KiB tx (see
	// MaxOpeningBytes).
	MaxOpenings = 128
	// MaxLoadMillisPerHour is DESIGN.md's bound on an honest provider's
	// time spent on challenges.
	MaxLoadMillisPerHour = 60_000
)

// DefaultParams returns the parameters above.
func DefaultParams() Params {
	return Params{
		TargetMillis:    DefaultTargetMillis,
		SlackPermille:   DefaultSlackPermille,
		AllowanceMillis: DefaultAllowanceMillis,
		Openings:        DefaultOpenings,
	}
}

// Validate reports whether p is usable.
func (p Params) Validate() error {
	switch {
	case p.TargetMillis == 0 || p.TargetMillis > 3_600_000:
		return fmt.Errorf("target %d ms: want 1 ms to 1 hour", p.TargetMillis)
	case p.SlackPermille < 1000 || p.SlackPermille > 10_000:
		return fmt.Errorf("slack %d‰: want 1000‰ to 10000‰ (×1 to ×10)", p.SlackPermille)
	case p.AllowanceMillis > 3_600_000:
		return fmt.Errorf("allowance %d ms: want at most 1 hour", p.AllowanceMillis)
	case p.Openings < 1 || p.Openings > MaxOpenings:
		return fmt.Errorf("openings %d: want 1 to %d", p.Openings, MaxOpenings)
	}
	return nil
}

// Plan is a challenge sized for one claimed throughput, with its deadline
// and the spacing that keeps an honest provider within
// MaxLoadMillisPerHour. All figures are integers computed the same way on
// every machine.
type Plan struct {
	Size Size
	// ComputeMillis is Size.Ops() at the claimed throughput, rounded up.
	ComputeMillis uint64
	// BusyMillis is ComputeMillis × slack, rounded up: the most an honest
	// provider, running at its claim, spends on the challenge.
	BusyMillis uint64
	// DeadlineMillis is BusyMillis + allowance: the commit must be in a
	// block whose time is at most this long after the challenge's block.
	DeadlineMillis uint64
	// MinGapMillis is 3 600 000 × BusyMillis / MaxLoadMillisPerHour
	// (= 60 × BusyMillis), rounded up: challenging a provider no more often
	// than once per MinGapMillis keeps its long-run load at or under 60 s
	// an hour.
	MinGapMillis uint64
}

// NewPlan sizes a challenge for a device that claims claimedGOPS int8
// giga-operations per second (multiply-add = 2) and derives its deadline.
func NewPlan(claimedGOPS uint64, p Params) (Plan, error) {
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	if claimedGOPS == 0 {
		return Plan{}, fmt.Errorf("claimed throughput is 0 GOPS: %w", ErrSize)
	}
	size := SizeFor(claimedGOPS, p.TargetMillis)
	compute := ComputeMillis(size, claimedGOPS)
	busy := p.BusyMillis(compute)
	return Plan{
		Size:           size,
		ComputeMillis:  compute,
		BusyMillis:     busy,
		DeadlineMillis: busy + p.AllowanceMillis,
		MinGapMillis:   ceilDiv(busy*3_600_000, MaxLoadMillisPerHour),
	}, nil
}

// BusyMillis is the most an honest device spends on a challenge whose
// compute time at its claim is computeMillis: that × the slack, rounded
// up (compute ≤ MaxOps/10⁶ < 2³⁵ ms: no overflow).
func (p Params) BusyMillis(computeMillis uint64) uint64 {
	return ceilDiv(computeMillis*p.SlackPermille, 1000)
}

// SizeFor chooses the shape whose work is closest to claimedGOPS ×
// targetMillis within the bounds: K, then M, then N, each the multiple of
// Align nearest to an even split of what is left (a cube while it fits),
// then clamped. A cube keeps N·M, and with it the hashing of C, small next
// to the GEMM while K (which sets a verifier's cost per entry) stays
// moderate. Large claims hit MaxK, then MaxM, then MaxN; claims beyond
// MaxOps get MaxOps.
func SizeFor(claimedGOPS, targetMillis uint64) Size {
	// ops = GOPS·10⁹ · ms/10³; the product is capped, not wrapped.
	hi, lo := bits.Mul64(claimedGOPS, targetMillis)
	var ops uint64
	if hi != 0 || lo > MaxOps/1_000_000 {
		ops = MaxOps
	} else {
		ops = lo * 1_000_000
	}
	vol := ops / 2 // N·K·M
	k := clampAlign(icbrt(vol), MaxK)
	m := clampAlign(isqrt(vol/k), MaxM)
	n := clampAlign(vol/(k*m), MaxN)
	return Size{N: int(n), K: int(k), M: int(m)}
}

// ComputeMillis is the time size's work takes at claimedGOPS, rounded up.
// It returns 0 for a zero claim.
func ComputeMillis(size Size, claimedGOPS uint64) uint64 {
	if claimedGOPS == 0 {
		return 0
	}
	// ops per millisecond = GOPS·10⁶; GOPS beyond 2⁶⁴/10⁶ finishes any
	// challenge within a millisecond.
	if claimedGOPS > (1<<64-1)/1_000_000 {
		return 1
	}
	return max(1, ceilDiv(size.Ops(), claimedGOPS*1_000_000))
}

// MeasuredGOPS is the throughput a challenge of size shows when its commit
// took elapsedMillis, rounded down (at least 1 for a positive time). The
// elapsed time includes the network, so this is a lower bound on the
// device: what the chain records in place of a claim the device did not
// meet.
func MeasuredGOPS(size Size, elapsedMillis uint64) uint64 {
	if elapsedMillis == 0 {
		return 0
	}
	hi, lo := bits.Mul64(elapsedMillis, 1_000_000)
	if hi != 0 {
		return 1
	}
	return max(1, size.Ops()/lo)
}

// clampAlign rounds v to the nearest multiple of Align and clamps it to
// [Align, max].
func clampAlign(v, hi uint64) uint64 {
	v = (v + Align/2) / Align * Align
	return min(max(v, Align), hi)
}

func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

// isqrt returns ⌊√x⌋.
func isqrt(x uint64) uint64 {
	var r uint64
	for bit := uint64(1) << 31; bit != 0; bit >>= 1 {
		if t := r | bit; t*t <= x {
			r = t
		}
	}
	return r
}

// icbrt returns ⌊∛x⌋ for x < 2⁶³ (r < 2²¹, so r³ cannot overflow).
func icbrt(x uint64) uint64 {
	var r uint64
	for bit := uint64(1) << 20; bit != 0; bit >>= 1 {
		if t := r | bit; t*t*t <= x {
			r = t
		}
	}
	return r
}
