package sched

import (
	"bytes"
	"cmp"
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// The test harness: an in-memory State, and builders for offers and
// requests that fit each other unless a test says otherwise. No ledger,
// no store, no consensus: a placement is a function of what State says.

// memState is State over slices: the offers of each class, kept in the
// index's order (ask, then address), and a market price per class.
type memState struct {
	offers map[string][]Offer
	// market is the unit price of a class for every tier; marketTier,
	// when set for class+"/"+tier, overrides it for that tier.
	market     map[string]uint64
	marketTier map[string]uint64
	// scanned counts the offers Offers passed to its callers, by class.
	scanned map[string]int
}

func newState(offers ...Offer) *memState {
	st := &memState{offers: map[string][]Offer{}, market: map[string]uint64{}, marketTier: map[string]uint64{}, scanned: map[string]int{}}
	st.add(CPUClass, offers...)
	return st
}

// add puts offers into class.
func (st *memState) add(class string, offers ...Offer) *memState {
	all := append(st.offers[class], offers...)
	slices.SortFunc(all, func(a, b Offer) int {
		if c := cmp.Compare(a.Ask, b.Ask); c != 0 {
			return c
		}
		return bytes.Compare(a.Provider[:], b.Provider[:])
	})
	st.offers[class] = all
	return st
}

func (st *memState) summary(class string) ClassSummary {
	s := ClassSummary{Class: class}
	for _, o := range st.offers[class] {
		c := CapsOf(o.ClassGPUs)
		s.Offers++
		s.Top = Caps{VRAM: max(s.Top.VRAM, c.VRAM), ComputeCap: max(s.Top.ComputeCap, c.ComputeCap), GPUs: max(s.Top.GPUs, c.GPUs)}
	}
	return s
}

func (st *memState) GPUClasses() ([]ClassSummary, error) {
	var names []string
	for c, offers := range st.offers {
		if c != CPUClass && len(offers) > 0 {
			names = append(names, c)
		}
	}
	slices.Sort(names)
	out := make([]ClassSummary, len(names))
	for i, c := range names {
		out[i] = st.summary(c)
	}
	return out, nil
}

func (st *memState) Summary(class string) (ClassSummary, error) { return st.summary(class), nil }

func (st *memState) MarketPrice(class, tier string) (uint64, error) {
	if p, ok := st.marketTier[class+"/"+tier]; ok {
		return p, nil
	}
	return st.market[class], nil
}

func (st *memState) Offers(class string, from, to uint64, fn func(*Offer) bool) error {
	for _, o := range st.offers[class] {
		if o.Ask < from || o.Ask > to {
			continue
		}
		st.scanned[class]++
		if !fn(&o) {
			break
		}
	}
	return nil
}

// addr is a provider's address, its first byte n: addresses order as n.
func addr(n byte) address.Address { return address.Address{n} }

const (
	oci  = 1 << 0 // executor bits, as the ledger numbers them
	wasm = 1 << 1
	gib  = 1 << 30
)

// offer is provider n's offer at ask, fitting req(): idle, staked,
// average reputation, in region "eu".
func offer(n byte, ask uint64) Offer {
	return Offer{
		Provider: addr(n), Ask: ask, Executors: oci | wasm, Stake: 1_000,
		CPUCores: 8, RAM: 16 * gib, Disk: 100 * gib, Region: []byte("eu"),
		MaxJobs: 4, Reputation: 500_000,
	}
}

// gpuOffer is offer with gpus GPUs of vram GiB and compute capability cc
// (MAJOR*1000+MINOR).
func gpuOffer(n byte, ask uint64, gpus int, vram, cc uint64) Offer {
	o := offer(n, ask)
	o.GPUs = uint64(gpus)
	for range gpus {
		o.ClassGPUs = append(o.ClassGPUs, GPU{VRAM: vram * gib, ComputeCap: cc})
	}
	return o
}

// req is a one-replica CPU job of one core with a ceiling of 1 000 per
// hour, which offer fits.
func req() Request {
	return Request{
		Units: 1, MaxPricePerHour: 1_000, CPUMilli: 1_000, Memory: gib, Disk: gib,
		Executor: oci, MinStakePerGPU: 100, MinStakeCPU: 100, Tier: "on-demand",
		PerClass: PlacePerClass, Planned: 1, Need: 1,
	}
}

// gpuReq is req for gpus GPUs of any class.
func gpuReq(gpus uint64) Request {
	r := req()
	r.GPUCount, r.Units, r.MaxPricePerHour = gpus, gpus, gpus*1_000
	return r
}

func place(t *testing.T, st State, r Request) *Plan {
	t.Helper()
	plan, err := Place(st, &r)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// providers are the first bytes of the picks' addresses, in order.
func providers(picks []Pick) []byte {
	out := []byte{}
	for _, p := range picks {
		out = append(out, p.Provider[0])
	}
	return out
}
