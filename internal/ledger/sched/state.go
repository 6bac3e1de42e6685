package sched

import "github.com/gpunet/gpunet/internal/address"

// CPUClass is the class of CPU-only offers: what a job without GPUs scans.
const CPUClass = "cpu"

// State is what placement reads: the offers of every online provider, by
// hardware class and ask, their classes' summaries and the market's
// prices. The ledger implements it over its offer index; tests over a
// slice. An implementation only reads; Place calls it in a fixed order,
// so that one that counts what is read (a gas meter, a benchmark) counts
// the same on every node.
type State interface {
	// GPUClasses lists the GPU classes that have offers (every class but
	// CPUClass), in byte order of their names, with their summaries.
	GPUClasses() ([]ClassSummary, error)
	// Summary is class's summary; the zero ClassSummary (with Class set)
	// when the class has no offers.
	Summary(class string) (ClassSummary, error)
	// MarketPrice is what a job of the market tier pays per unit-hour in
	// class before the ask: the class's index × the tier's factor. A
	// class without a market record is at the floor.
	MarketPrice(class, tier string) (uint64, error)
	// Offers calls fn with each offer of class whose ask per unit-hour
	// lies in [from, to], in ask order and, at one ask, in byte order of
	// the provider's address, until fn returns false or the offers run
	// out. The *Offer, and the slices it holds, are valid only during the
	// call: fn copies what it keeps. An error stops the walk.
	Offers(class string, from, to uint64, fn func(*Offer) bool) error
}

// An Offer is what placement knows of one ask of one online provider:
// everything its hard constraints and its score read.
type Offer struct {
	Provider address.Address
	// Ask is the provider's price for the class, usync per unit-hour (a
	// GPU for a GPU class, a core for CPUClass).
	Ask uint64
	// Executors has bit i set when the provider runs the ledger's i-th
	// executor (Request.Executor is one of these bits).
	Executors uint8
	// Network: the provider allows jobs network access.
	Network bool
	// Engine is the id of the wasm engine it runs wasm jobs on (the
	// ledger's engineID); 0 for none.
	Engine uint64
	Stake  uint64
	// GPUs counts all the provider's GPUs, of every class: its minimum
	// stake depends on them.
	GPUs      uint64
	CPUCores  uint64
	RAM, Disk uint64 // bytes
	Region    []byte
	// NVLink: every pair of the provider's GPUs is linked by NVLink.
	NVLink        bool
	Jobs, MaxJobs uint64 // slots taken for real (granted jobs, service replicas) and slots in all
	// Tentative counts the placements on the provider whose key is not
	// granted yet: each holds a slot only tentatively (Positions).
	Tentative  uint64
	Reputation uint64 // parts per million
	Int8GOPS   uint64 // measured speed
	// ClassGPUs are the provider's GPUs of the ask's class.
	ClassGPUs []GPU
}

// A GPU is one GPU of an offer's class.
type GPU struct {
	VRAM       uint64 // bytes
	ComputeCap uint64 // MAJOR*1000 + MINOR; 0 when unknown
}

// TentativePerSlot is how many placements not granted yet a slot that
// nothing granted holds may carry at once: the scheduler places a job on
// such a slot while fewer than this many ungranted placements hold it,
// and the first of them to be granted takes it; the ledger then bumps the
// placements the provider's free slots can no longer carry (ledger's
// bumpExcess). So an ungranted placement keeps nobody out: to make an
// honest job wait at all, a squatter must hold every position of every
// free slot it could use, TentativePerSlot times the slots, each paying
// the provider's price while it holds it; and a grant bumps at most
// TentativePerSlot-1 placements. Four leaves room for twice the slots of
// squatters queued ahead of an honest job, with a position to spare for
// it, at a bounded cost per grant (docs/ledger.md, Slots).
const TentativePerSlot = 4

// Positions is how many placements, granted or not, a provider with jobs
// slots taken for real out of maxJobs may carry: TentativePerSlot per
// slot nothing granted holds; 0 when every slot is taken.
func Positions(jobs, maxJobs uint64) uint64 {
	if jobs >= maxJobs {
		return 0
	}
	return TentativePerSlot * (maxJobs - jobs)
}

// free reports whether the offer's provider can take one more placement:
// a slot that nothing granted holds, and a position on it.
func (o *Offer) free() bool { return o.Tentative < Positions(o.Jobs, o.MaxJobs) }

// requiredStake is the least stake the offer's provider needs to run
// anything (the ledger's Provider.RequiredStake, which it mirrors).
func (o *Offer) requiredStake(r *Request) uint64 {
	if o.GPUs > 0 {
		return o.GPUs * r.MinStakePerGPU
	}
	return r.MinStakeCPU
}
