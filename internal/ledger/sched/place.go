package sched

import (
	"bytes"
	"math"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// How much of the index a placement looks at.
const (
	// PlacePerClass is the feasible offers a placement scores per class
	// (Request.PerClass of the end-of-block scheduler).
	PlacePerClass = 8
	// QuotePerClass is the feasible offers a quote counts per class.
	QuotePerClass = 32
	// ScanLimit is the offers one placement may look at, in all classes
	// together: its cost is bounded whatever the index holds.
	ScanLimit = 2048
)

// A Request is what one placement asks for: a job's hard constraints, in
// the form offers are checked against, and how many providers it needs.
// The ledger builds one from a JobSpec (a service's from its JobView).
type Request struct {
	// Units is what an ask multiplies by for this job: its GPUs, or its
	// whole cores for a CPU job; at least 1. A pick's price is per hour for the job:
	// max(ask, market price) × Units.
	Units uint64
	// MaxPricePerHour is the job's ceiling, usync per hour for all its
	// units; the scan of a class stops at MaxPricePerHour / Units.
	MaxPricePerHour uint64
	// GPUCount is the GPUs the job needs (0: a CPU job, which scans
	// CPUClass). Classes are the GPU classes it accepts; none for any.
	GPUCount uint64
	Classes  []string
	// MinVRAM (bytes) and MinComputeCap (MAJOR*1000+MINOR) apply to each
	// of GPUCount GPUs of the class.
	MinVRAM, MinComputeCap uint64
	CPUMilli               uint64 // thousandths of a core; an offer needs the whole cores
	Memory, Disk           uint64 // bytes
	// Region is the preferred region (a score term); RegionRequired
	// makes it a constraint.
	Region         string
	RegionRequired bool
	// Network: the job needs network access.
	Network bool
	// NVLink: the job needs providers whose GPUs are linked by NVLink
	// (Offer.NVLink).
	NVLink bool
	// Gang: the Need providers are the members of one gang: all in one
	// site (one region) or none (gang.go). Need is then the members.
	// Members, when above 0, is the members of one gang and Need a
	// multiple of it: Need/Members whole gangs (replica gangs of a
	// verified gang), each in one site, on distinct providers.
	Gang    bool
	Members int
	// Admit, when set, is a constraint the ledger checks itself: a
	// provider it returns false for is turned away (Miss.TEE; a trust:
	// tee job admits attested providers only). It only reads.
	Admit func(address.Address) bool
	// Executor is the bit of the executor the job runs on (Offer.Executors).
	Executor uint8
	// An offer's provider needs MinStakePerGPU for each of its GPUs, or
	// MinStakeCPU if it has none.
	MinStakePerGPU, MinStakeCPU uint64
	// Tier is the job's market tier (State.MarketPrice); MayPreempt that
	// the tier may take a lower tier's slot, so that Plan.Busy is filled.
	Tier       string
	MayPreempt bool
	// Engine is what the job asks of wasm engines.
	Engine EngineNeed

	// PerClass is how many fitting offers a class's scan scores
	// (PlacePerClass, QuotePerClass).
	PerClass int
	// Planned is how many providers the job runs on from the start: with
	// fewer candidates, Miss.CheapestAbove is looked for.
	Planned int
	// Need is how many providers this placement takes.
	Need int
	// Partial: a plan may pick fewer than Need (a service's replicas are
	// placed one by one); otherwise it picks Need or none (a job's
	// replicas start together).
	Partial bool
	// Have are providers the job already runs on: never picked.
	Have []address.Address
	// Excluded are providers it must not get: never picked, and counted
	// in Miss.Excluded when they fit.
	Excluded []address.Address
}

// A Pick is one provider a plan takes (or could take).
type Pick struct {
	Provider address.Address
	Class    string
	// Price is usync per hour for the job: max(ask, market price) ×
	// units; Ask is the provider's ask × units.
	Price, Ask uint64
	Score      uint64 // Score's; 0 in Plan.Busy
	Engine     uint64 // the offer's wasm engine id; 0 for none
	// Site is the offer's region, for a gang's request only (gang.go).
	Site string
}

// A Plan is what Place decides; the ledger applies it.
type Plan struct {
	// Ranked are the providers that can take the job now, best first:
	// each at most once (at its best class), of one engine when the job
	// chooses one, none it has or excludes. A quote reports them.
	Ranked []Pick
	// Picks are the providers to place it on: the first Need of Ranked;
	// fewer only for a Partial request, none when fewer than Need fit
	// otherwise.
	Picks []Pick
	// Busy, for a request that MayPreempt, are offers that fit but for a
	// free slot: the slots a preemption could take, in scan order
	// (cheapest ask first in each class), at most PerClass in all.
	Busy []Pick
	// Miss says why the other providers were passed over, and, when
	// fewer than Need fit, why the job waits.
	Miss Miss
	// Gangs, for a gang's request, is how many whole gangs the ranked
	// candidates make, site by site (at least: the scan stops at the
	// first site with Need).
	Gangs int
}

// needs is a request's hard constraints with what they derive.
type needs struct {
	r        *Request
	cpuCores uint64 // whole cores, rounded up
}

// Place plans r on the offers st holds. It only reads st. In each class it
// scans the offers from the cheapest ask up to the job's ceiling and scores
// the first PerClass that fit (so the best price, then reputation, load,
// speed and region among them wins), looking at no more than ScanLimit
// offers in all.
//
// For a job whose replicas share a wasm engine (Engine.Shared) only offers
// with one fit: the pinned engine's, or, before the job has one, any; the
// scan then goes on past PerClass until Engine.Group offers of one engine
// fit, and the candidates are those of one engine.
func Place(st State, r *Request) (*Plan, error) {
	units := r.Units
	classes := r.Classes
	var sums []ClassSummary // of classes, for a GPU job
	if r.GPUCount == 0 {
		classes = []string{CPUClass}
	} else if len(classes) == 0 {
		var err error
		if sums, err = st.GPUClasses(); err != nil {
			return nil, err
		}
		classes = make([]string, len(sums))
		for i := range sums {
			classes[i] = sums[i].Class
		}
	} else {
		sums = make([]ClassSummary, len(classes))
		for i, c := range classes {
			var err error
			if sums[i], err = st.Summary(c); err != nil {
				return nil, err
			}
		}
	}
	maxUnit := r.MaxPricePerHour / units
	need := &needs{r: r, cpuCores: (r.CPUMilli + 999) / 1000}
	caps := needCaps(r)
	plan := &Plan{}
	m := &plan.Miss
	var cands []Pick
	// tally, for a placement that chooses the engine, counts the fitting
	// offers of each: the scan looks for Engine.Group of one. (Set once,
	// so the scan's closure copies it rather than moving it to the heap.)
	tally := r.Engine.tally()
	sites := newSiteTally(r)
	perClass := r.PerClass
	if sites != nil {
		perClass = max(perClass, r.Need)
	}
	budget := ScanLimit
	preempts := r.MayPreempt && !r.Engine.Shared
	var scanned, empty []string
	for i, class := range classes {
		if budget <= 0 {
			break
		}
		if sums != nil && sums[i].Offers > 0 && !sums[i].mayFit(caps) {
			// No offer of the class can meet the job's GPU needs: skip
			// the scan, and count the class's providers under the first
			// need none of them meets.
			m.Classes++
			m.Seen += int(sums[i].Offers)
			m.misfit(&sums[i], caps)
			continue
		}
		market, err := st.MarketPrice(class, r.Tier)
		if err != nil {
			return nil, err
		}
		if market > maxUnit {
			m.Classes++
			m.OverMarket++
			if price := market * units; m.MarketPrice == 0 || price < m.MarketPrice {
				m.MarketPrice = price
			}
			continue
		}
		found := 0
		hasEntries := false
		err = st.Offers(class, 0, maxUnit, func(of *Offer) bool {
			hasEntries = true
			budget--
			m.Seen++
			busy := m.Busy
			if need.fits(of, m) {
				price := max(of.Ask, market) * units
				pk := Pick{Provider: of.Provider, Class: class, Price: price, Ask: of.Ask * units, Score: Score(of, price, r), Engine: of.Engine}
				if sites != nil {
					pk.Site = sites.add(of.Region)
				}
				cands = append(cands, pk)
				found++
				if tally != nil {
					tally.add(of.Engine)
				}
			} else if preempts && m.Busy > busy && len(plan.Busy) < r.PerClass {
				price := max(of.Ask, market) * units
				plan.Busy = append(plan.Busy, Pick{Provider: of.Provider, Class: class, Price: price, Ask: of.Ask * units})
			}
			return (found < perClass || tally.short() || sites.short()) && budget > 0
		})
		if err != nil {
			return nil, err
		}
		if hasEntries {
			m.Classes++
		} else {
			empty = append(empty, class)
		}
		scanned = append(scanned, class)
	}
	cands = rank(cands, len(classes) > 1)
	if tally != nil {
		cands = chooseEngine(cands, r.Engine.Group, m)
	}
	if len(cands) < r.Planned {
		// The job will not be placed: find, for its reason, the cheapest
		// ask above its ceiling.
		if err := cheapestAbove(st, scanned, empty, maxUnit, units, m); err != nil {
			return nil, err
		}
	}
	plan.pick(cands, r)
	return plan, nil
}

// pick takes, of the ranked candidates, those r may get: none it has or
// excludes (the excluded counted), then the first Need, all or none unless
// r.Partial; and says why the placement waits when fewer fit. (A gang,
// several providers that must suit one another, is chosen here: a set of
// Need from cands that satisfies its constraint, or none.)
func (plan *Plan) pick(cands []Pick, r *Request) {
	m := &plan.Miss
	if len(r.Have) > 0 || len(r.Excluded) > 0 {
		cands = slices.DeleteFunc(cands, func(c Pick) bool {
			if slices.Contains(r.Excluded, c.Provider) {
				m.Excluded++
				return true
			}
			return slices.Contains(r.Have, c.Provider)
		})
	}
	plan.Ranked = cands
	m.Fit, m.Need = len(cands), r.Need
	if r.Gang && r.Need > 1 {
		plan.Picks, plan.Gangs = pickGangs(cands, r.Need, r.Members, m)
		if plan.Picks == nil {
			m.Code = m.code(len(cands), r.Need)
		}
		return
	}
	switch {
	case len(cands) >= r.Need:
		plan.Picks = cands[:r.Need]
	case r.Partial:
		plan.Picks = cands
	}
	if len(cands) < r.Need {
		m.Code = m.code(len(cands), r.Need)
	}
}

// rank sorts cands best first: by score, then by address. When they come
// from several classes (dedup), a provider appears once, at its best.
func rank(cands []Pick, dedup bool) []Pick {
	slices.SortFunc(cands, func(a, b Pick) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.Provider[:], b.Provider[:])
	})
	if !dedup {
		return cands
	}
	seen := make(map[address.Address]bool, len(cands))
	out := cands[:0]
	for _, c := range cands {
		if !seen[c.Provider] {
			seen[c.Provider] = true
			out = append(out, c)
		}
	}
	return out
}

// cheapestAbove records in m the cheapest ask above maxUnit in the scanned
// classes, and counts the classes with no offer within the price but one
// above it.
func cheapestAbove(st State, scanned, empty []string, maxUnit, units uint64, m *Miss) error {
	for _, class := range scanned {
		err := st.Offers(class, maxUnit+1, math.MaxUint64, func(of *Offer) bool {
			if price := of.Ask * units; m.CheapestAbove == 0 || price < m.CheapestAbove {
				m.CheapestAbove = price
			}
			if slices.Contains(empty, class) {
				m.Classes++
			}
			return false
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// fits applies the hard constraints, counting the first one of of's
// failures in m.
func (n *needs) fits(of *Offer, m *Miss) bool {
	r := n.r
	switch {
	case of.Executors&r.Executor == 0:
		m.Executor++
	case of.Stake < of.requiredStake(r):
		m.Stake++
	case of.CPUCores < n.cpuCores:
		m.CPU++
	case of.RAM < r.Memory:
		m.RAM++
	case of.Disk < r.Disk:
		m.Disk++
	case r.RegionRequired && string(of.Region) != r.Region:
		m.Region++
	case r.Network && !of.Network:
		m.Network++
	case r.NVLink && !of.NVLink:
		m.NVLink++
	case r.Admit != nil && !r.Admit(of.Provider):
		m.TEE++
	case r.GPUCount > 0 && !n.gpusFit(of.ClassGPUs, m):
	case !of.free():
		m.Busy++
	case r.Engine.Shared && of.Engine == 0:
		m.NoEngine++
	case r.Engine.Pinned != 0 && of.Engine != r.Engine.Pinned:
		m.OtherEngine++
	default:
		return true
	}
	return false
}

func (n *needs) gpusFit(gpus []GPU, m *Miss) bool {
	r := n.r
	var vramOK, ccOK uint64
	for _, g := range gpus {
		if g.VRAM >= r.MinVRAM {
			vramOK++
			if g.ComputeCap >= r.MinComputeCap {
				ccOK++
			}
		}
	}
	switch {
	case uint64(len(gpus)) < r.GPUCount:
		m.GPUs++
	case vramOK < r.GPUCount:
		m.VRAM++
	case ccOK < r.GPUCount:
		m.ComputeCap++
	default:
		return true
	}
	return false
}

// Score ranks an offer that fits r, at price (usync per hour for the
// job): cheaper, more reputable, less loaded, faster and in the preferred
// region is better. Each term is in [0, 1000] before its weight: price
// (the share of the ceiling left) ×4, reputation ×3, free positions ×2
// (the share of the provider's TentativePerSlot × max_jobs positions
// that neither a granted job nor an ungranted placement holds: without
// ungranted placements, its free slots), speed (int8 GOPS / 100, capped)
// ×1, the preferred region ×2. All integer.
func Score(of *Offer, price uint64, r *Request) uint64 {
	priceTerm := (r.MaxPricePerHour - min(price, r.MaxPricePerHour)) * 1000 / max(r.MaxPricePerHour, 1)
	rep := of.Reputation / 1000
	positions := Positions(of.Jobs, of.MaxJobs)
	load := (positions - min(of.Tentative, positions)) * 1000 / max(TentativePerSlot*of.MaxJobs, 1)
	speed := min(of.Int8GOPS/100, 1000)
	var region uint64
	if r.Region != "" && string(of.Region) == r.Region {
		region = 1000
	}
	return 4*priceTerm + 3*rep + 2*load + speed + 2*region
}
