package netstats

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// fullWalk is the figures computed the way they were before they were kept
// up to date: a walk over every provider.
type fullWalk struct {
	online, gpus int
	slots, busy  uint64
	utilization  float64
	medianPrice  PriceMap
	byClass      []ClassCount
	byRegion     []RegionCount
}

func walkMedian(v []uint64) uint64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func walk(provs []*provider) fullWalk {
	w := fullWalk{medianPrice: PriceMap{}, byClass: []ClassCount{}, byRegion: []RegionCount{}}
	prices := map[string][]uint64{}
	classes := map[string]*ClassCount{}
	regions := map[string]*RegionCount{}
	class := func(c string) *ClassCount {
		if classes[c] == nil {
			classes[c] = &ClassCount{Class: c}
		}
		return classes[c]
	}
	for _, p := range provs {
		if !p.offer.Online {
			continue
		}
		w.online++
		w.slots += p.maxJobs
		w.busy += min(p.jobs, p.maxJobs)
		r := regions[p.offer.Region]
		if r == nil {
			r = &RegionCount{Region: p.offer.Region}
			regions[p.offer.Region] = r
		}
		r.Providers++
		if len(p.gpus) == 0 {
			c := class(ledger.CPUClass)
			c.Providers++
			c.Units += p.offer.CPU
		}
		for _, g := range p.gpus {
			w.gpus += g.n
			r.GPUs += g.n
			c := class(g.class)
			c.Providers++
			c.Units += g.n
		}
		for _, a := range p.asks {
			prices[a.Class] = append(prices[a.Class], uint64(a.PricePerHour))
		}
	}
	if w.slots > 0 {
		w.utilization = float64(w.busy) / float64(w.slots)
	}
	for c, ps := range prices {
		w.medianPrice[c] = float64(walkMedian(ps)) / 1e6
	}
	for _, c := range classes {
		c.MedianPrice = float64(walkMedian(prices[c.Class])) / 1e6
		w.byClass = append(w.byClass, *c)
	}
	sort.Slice(w.byClass, func(i, j int) bool { return w.byClass[i].Class < w.byClass[j].Class })
	for _, r := range regions {
		w.byRegion = append(w.byRegion, *r)
	}
	sort.Slice(w.byRegion, func(i, j int) bool { return w.byRegion[i].Region < w.byRegion[j].Region })
	return w
}

func (a *aggregate) figures() fullWalk {
	var sm Sample
	a.fill(&sm)
	return fullWalk{online: sm.Online, gpus: sm.GPUsOnline, slots: sm.Slots, busy: sm.BusySlots, utilization: sm.Utilization,
		medianPrice: sm.MedianPrice, byClass: a.byClass(), byRegion: a.byRegion()}
}

// randomProvider has few distinct classes, regions and prices, so that
// classes and regions empty and fill again and prices repeat.
func randomProvider(r *rand.Rand) *provider {
	classes := []string{"RTX_4090", "A100", "H100", ledger.CPUClass}
	p := &provider{
		offer:   &apiwire.ProviderOffer{},
		maxJobs: r.Uint64N(5),
		jobs:    r.Uint64N(7), // sometimes above maxJobs
	}
	p.offer.Online = r.IntN(3) > 0
	p.offer.Region = []string{"eu", "us-east", "ap"}[r.IntN(3)]
	p.offer.CPU = 1 + r.IntN(64)
	for range r.IntN(3) {
		c := classes[r.IntN(3)]
		i, found := slices.BinarySearchFunc(p.gpus, c, func(g gpuCount, c string) int {
			if g.class < c {
				return -1
			} else if g.class > c {
				return 1
			}
			return 0
		})
		if !found {
			p.gpus = slices.Insert(p.gpus, i, gpuCount{class: c})
		}
		p.gpus[i].n += 1 + r.IntN(8)
	}
	for range r.IntN(4) {
		p.asks = append(p.asks, ledger.Ask{Class: classes[r.IntN(len(classes))], PricePerHour: ledger.Amount(r.IntN(20) * 250_000)})
	}
	return p
}

// TestAggregateMatchesFullWalk: the figures kept up to date provider by
// provider are exactly those of a walk over every provider, through random
// changes (a provider going offline or online, changing its GPUs, asks,
// slots and region, new providers).
func TestAggregateMatchesFullWalk(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		provs := make([]*provider, 1+r.IntN(50))
		for i := range provs {
			provs[i] = randomProvider(r)
		}
		a := newAggregate(provs)
		for step := range 200 {
			for range 1 + r.IntN(5) {
				if r.IntN(10) == 0 {
					p := randomProvider(r)
					a.replace(nil, p)
					provs = append(provs, p)
					continue
				}
				i := r.IntN(len(provs))
				p := randomProvider(r)
				a.replace(provs[i], p)
				provs[i] = p
			}
			got, want := a.figures(), walk(provs)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d: kept up to date\n%+v\nwalk\n%+v", seed, step, got, want)
			}
			if fresh := newAggregate(provs).figures(); !reflect.DeepEqual(fresh, want) {
				t.Fatalf("seed %d step %d: loaded\n%+v\nwalk\n%+v", seed, step, fresh, want)
			}
		}
	}
}

// BenchmarkBlockFigures is the per-block cost at 100k providers with a
// few changed: before, a walk of all of them.
func BenchmarkBlockFigures(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	provs := make([]*provider, 100_000)
	for i := range provs {
		provs[i] = randomProvider(r)
	}
	a := newAggregate(provs)
	b.Run("kept", func(b *testing.B) {
		for b.Loop() {
			for range 10 {
				i := r.IntN(len(provs))
				p := randomProvider(r)
				a.replace(provs[i], p)
				provs[i] = p
			}
			var sm Sample
			a.fill(&sm)
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			walk(provs)
		}
	})
}

// TestInternerSharesEqualOnly: equal lists come back as one shared list,
// and lists that differ (however their elements split) never do.
func TestInternerSharesEqualOnly(t *testing.T) {
	var in interner
	a := in.strs([]string{"wasm", "oci"})
	b := in.strs([]string{"wasm", "oci"})
	if &a[0] != &b[0] {
		t.Errorf("equal lists not shared")
	}
	for _, l := range [][]string{{"wasm"}, {"wasm", "oci", ""}, {"a\x00", "b"}, {"a", "\x00b"}, {"wasmoci"}, {"wa", "smoci"}} {
		if got := in.strs(slices.Clone(l)); !slices.Equal(got, l) {
			t.Errorf("strs(%q) = %q", l, got)
		}
	}
}
