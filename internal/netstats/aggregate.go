package netstats

import (
	"slices"
	"sort"

	"github.com/gpunet/gpunet/internal/ledger"
)

// aggregate is the network's figures over its online providers (what a
// Sample and the Overview report), kept up to date one provider at a time:
// a block costs what it changed, never a walk of every provider. Medians
// come from each class's asks kept sorted. Its results are exactly those
// of a walk over the same providers (TestAggregateMatchesFullWalk).
type aggregate struct {
	online     int
	gpusOnline int
	slots      uint64
	busySlots  uint64
	// classes are online capacity by hardware class ("cpu": CPU-only
	// providers, in cores); regions online providers and GPUs by region.
	classes map[string]*classAgg
	regions map[string]*RegionCount
	// prices are online providers' asks by class, sorted.
	prices map[string][]uint64
}

type classAgg struct{ providers, units int }

// newAggregate walks provs once (at load).
func newAggregate(provs []*provider) *aggregate {
	a := &aggregate{classes: map[string]*classAgg{}, regions: map[string]*RegionCount{}, prices: map[string][]uint64{}}
	for _, p := range provs {
		a.apply(p, 1, false)
	}
	for _, ps := range a.prices {
		slices.Sort(ps)
	}
	return a
}

// replace swaps old's contribution for new's (either may be nil).
func (a *aggregate) replace(old, new *provider) {
	if old != nil {
		a.apply(old, -1, true)
	}
	if new != nil {
		a.apply(new, 1, true)
	}
}

// apply adds (sign 1) or removes (sign -1) p's contribution; sorted says
// whether to keep the prices sorted as it goes (else the caller sorts).
func (a *aggregate) apply(p *provider, sign int, sorted bool) {
	if !p.offer.Online {
		return
	}
	a.online += sign
	if sign > 0 {
		a.slots += p.maxJobs
		a.busySlots += min(p.jobs, p.maxJobs)
	} else {
		a.slots -= p.maxJobs
		a.busySlots -= min(p.jobs, p.maxJobs)
	}
	r := a.regions[p.offer.Region]
	if r == nil {
		r = &RegionCount{Region: p.offer.Region}
		a.regions[p.offer.Region] = r
	}
	r.Providers += sign
	if len(p.gpus) == 0 {
		a.addClass(ledger.CPUClass, sign, sign*p.offer.CPU)
	}
	for _, g := range p.gpus {
		a.gpusOnline += sign * g.n
		r.GPUs += sign * g.n
		a.addClass(g.class, sign, sign*g.n)
	}
	if r.Providers == 0 {
		delete(a.regions, r.Region)
	}
	for _, ask := range p.asks {
		ps, v := a.prices[ask.Class], uint64(ask.PricePerHour)
		switch {
		case !sorted:
			ps = append(ps, v)
		case sign > 0:
			i, _ := slices.BinarySearch(ps, v)
			ps = slices.Insert(ps, i, v)
		default:
			if i, found := slices.BinarySearch(ps, v); found {
				ps = slices.Delete(ps, i, i+1)
			}
		}
		if len(ps) == 0 {
			delete(a.prices, ask.Class)
		} else {
			a.prices[ask.Class] = ps
		}
	}
}

func (a *aggregate) addClass(class string, providers, units int) {
	c := a.classes[class]
	if c == nil {
		c = &classAgg{}
		a.classes[class] = c
	}
	c.providers += providers
	c.units += units
	if c.providers == 0 {
		delete(a.classes, class)
	}
}

// medianPrice is the median ask of class in SYNC per unit-hour (0: none).
func (a *aggregate) medianPrice(class string) float64 {
	return float64(sortedMedian(a.prices[class])) / 1e6
}

// fill sets sm's provider figures.
func (a *aggregate) fill(sm *Sample) {
	sm.Online, sm.GPUsOnline, sm.Slots, sm.BusySlots = a.online, a.gpusOnline, a.slots, a.busySlots
	if sm.Slots > 0 {
		sm.Utilization = float64(sm.BusySlots) / float64(sm.Slots)
	}
	sm.MedianPrice = make(PriceMap, len(a.prices))
	for class := range a.prices {
		sm.MedianPrice[class] = a.medianPrice(class)
	}
}

// byClass and byRegion are the Overview's lists, sorted.
func (a *aggregate) byClass() []ClassCount {
	out := make([]ClassCount, 0, len(a.classes))
	for class, c := range a.classes {
		out = append(out, ClassCount{Class: class, Providers: c.providers, Units: c.units, MedianPrice: a.medianPrice(class)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Class < out[j].Class })
	return out
}

func (a *aggregate) byRegion() []RegionCount {
	out := make([]RegionCount, 0, len(a.regions))
	for _, r := range a.regions {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Region < out[j].Region })
	return out
}

// sortedMedian is the median of sorted v (0 when empty).
func sortedMedian(v []uint64) uint64 {
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
