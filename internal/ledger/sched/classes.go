package sched

import "math/bits"

// A class's summary lets placement skip, unscanned, a class none of whose
// offers can meet a job's GPU needs: without it, a job that takes any class
// and wants 40 GiB of VRAM scanned every 16 and 24 GiB class to its
// ceiling. The ledger keeps, per class, a histogram of its offers' Caps
// (buckets of their largest VRAM, highest compute capability and GPU
// count); placement reads the top bucket of each.

// Caps are buckets of an offer's GPUs (or of a job's GPU needs): VRAM,
// compute capability and GPU count, each through a monotone bucket
// function, so that an offer whose bucket is below a need's cannot meet
// it.
type Caps struct{ VRAM, ComputeCap, GPUs uint64 }

// A ClassSummary is what placement knows of a class before scanning it.
type ClassSummary struct {
	Class string
	// Offers counts the class's offers, at any ask.
	Offers uint64
	// Top holds the highest bucket of each of Caps among the offers.
	Top Caps
}

// VRAMBucket is monotone in v (v < w implies VRAMBucket(v) <=
// VRAMBucket(w)). Buckets are GiB in two significant bits (16, 24, 32, 48,
// 64, 96, …): at most 2 per power of two, so that a class's histogram
// stays small whatever values providers declare.
func VRAMBucket(v uint64) uint64 {
	g := v >> 30
	if g < 4 {
		return g
	}
	n := uint64(bits.Len64(g))
	return 2*n + (g>>(n-2))&1 // the bit after the leading one
}

// ComputeCapBucket is the major version (capped), monotone in
// MAJOR*1000+MINOR.
func ComputeCapBucket(cc uint64) uint64 { return min(cc/1000, 64) }

// GPUCountBucket is the bit length: 1, 2–3, 4–7, 8–15, …
func GPUCountBucket(n uint64) uint64 { return uint64(bits.Len64(n)) }

// CapsOf are the buckets of an offer with these GPUs of its class.
func CapsOf(gpus []GPU) Caps {
	var maxVRAM, maxCC uint64
	for _, g := range gpus {
		maxVRAM, maxCC = max(maxVRAM, g.VRAM), max(maxCC, g.ComputeCap)
	}
	return Caps{VRAM: VRAMBucket(maxVRAM), ComputeCap: ComputeCapBucket(maxCC), GPUs: GPUCountBucket(uint64(len(gpus)))}
}

// needCaps are the buckets r needs; a class can hold a fitting offer only
// if its top bucket of each reaches them.
func needCaps(r *Request) Caps {
	return Caps{VRAM: VRAMBucket(r.MinVRAM), ComputeCap: ComputeCapBucket(r.MinComputeCap), GPUs: GPUCountBucket(r.GPUCount)}
}

// mayFit reports whether some offer of the class could meet need.
func (s *ClassSummary) mayFit(need Caps) bool {
	return s.Top.VRAM >= need.VRAM && s.Top.ComputeCap >= need.ComputeCap && s.Top.GPUs >= need.GPUs
}

// misfit counts the class's offers in m under the first need (in the
// order fits checks them) that no offer meets.
func (m *Miss) misfit(s *ClassSummary, need Caps) {
	n := int(s.Offers)
	switch {
	case s.Top.GPUs < need.GPUs:
		m.GPUs += n
	case s.Top.VRAM < need.VRAM:
		m.VRAM += n
	default:
		m.ComputeCap += n
	}
}
