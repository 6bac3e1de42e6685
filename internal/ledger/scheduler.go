package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// The scheduler runs at the end of every block. It walks the queued jobs
// (oldest first, at most params.max_placements_per_block of them; from a
// cursor, in turns, when more wait) and places
// each on the best providers that fit, or records in the job why none do.
//
// Providers are indexed by hardware class and ask: pidx/<class>/<price per
// unit-hour>/<address> for every ask of every online provider. A job's scan
// of a class starts at the cheapest ask and stops at the job's price
// ceiling, so the cost of placing a job depends on the providers near its
// price, not on how many providers exist.

const (
	candidatesPerClass = 8    // feasible offers a placement scores per class
	quotePerClass      = 32   // feasible offers a quote counts per class
	scanLimit          = 2048 // index entries a job may look at per block
)

func providerIndexKey(class string, pricePerHour uint64, a address.Address) []byte {
	k := append(slices.Clone(prefixProviderIndex), class...)
	k = append(k, '/')
	k = binary.BigEndian.AppendUint64(k, pricePerHour)
	return append(k, a[:]...)
}

func classPrefix(class string) []byte {
	return append(append(slices.Clone(prefixProviderIndex), class...), '/')
}

// indexEntry is one index entry a provider record should have, with the
// buckets its class summary counts.
type indexEntry struct {
	Change
	caps entryCaps
}

// indexEntries returns the index entries (key and offer summary) a
// provider record should have.
func indexEntries(p *Provider) []indexEntry {
	if p == nil || !p.Online {
		return nil
	}
	out := make([]indexEntry, 0, len(p.Asks))
	for _, a := range p.Asks {
		var gpus []offerGPU
		for _, g := range p.Inventory.GPUs {
			if g.Class == a.Class {
				gpus = append(gpus, offerGPU{vram: g.VRAM, computeCap: computeCapValue(g.ComputeCap)})
			}
		}
		out = append(out, indexEntry{
			Change: Change{Key: providerIndexKey(a.Class, uint64(a.PricePerHour), p.Address), Value: encodeOffer(p, a.Class)},
			caps:   capsOf(gpus),
		})
	}
	return out
}

// reindexProvider moves a provider's index entries, and its classes'
// summaries, from those of old to those of p.
func reindexProvider(o *Overlay, old, p *Provider) {
	before, after := indexEntries(old), indexEntries(p)
	sameKeys := len(before) == len(after)
	for i := 0; sameKeys && i < len(before); i++ {
		sameKeys = bytes.Equal(before[i].Key, after[i].Key)
	}
	if sameKeys {
		for i, e := range after {
			if !bytes.Equal(before[i].Value, e.Value) {
				// The entry holds what old's record says (an invariant):
				// the app hash will need that old value.
				o.noteBase(e.Key, before[i].Value)
				o.Set(e.Key, e.Value)
			}
			if before[i].caps != e.caps {
				adjustClassSummary(o, before[i], -1)
				adjustClassSummary(o, e, +1)
			}
		}
		return
	}
	for _, e := range before {
		o.Delete(e.Key)
		adjustClassSummary(o, e, -1)
	}
	for _, e := range after {
		o.Set(e.Key, e.Value)
		adjustClassSummary(o, e, +1)
	}
}

// indexedGPUClasses lists the hardware classes with online providers, but
// "cpu", with their summaries.
func indexedGPUClasses(kv KV) ([]string, []classSummary, error) {
	var classes []string
	var sums []classSummary
	var err error
	kv.Iterate(prefixClassCount, prefixEnd(prefixClassCount), func(k, v []byte) bool {
		c := string(k[len(prefixClassCount):])
		if c == CPUClass {
			return true
		}
		var s classSummary
		if s, err = decodeClassSummary(c, v); err != nil {
			return false
		}
		classes, sums = append(classes, c), append(sums, s)
		return true
	})
	return classes, sums, err
}

// schedule places queued jobs, then the replicas services wait for
// (service_place.go).
func schedule(o *Overlay, p Params, info BlockInfo) ([]Event, error) {
	events, err := scheduleJobs(o, p, info)
	if err != nil {
		return nil, err
	}
	more, err := placeServices(o, p, info)
	return append(events, more...), err
}

// scheduleJobs places queued jobs.
func scheduleJobs(o *Overlay, p Params, info BlockInfo) ([]Event, error) {
	n := QueueLen(o)
	if n == 0 {
		return nil, nil
	}
	budget := p.MaxPlacementsPerBlock
	// Jobs waiting for a verification replica (an audit, an escalation, a
	// replacement next to committed results) go first: their owners' work
	// is done but for the check, and a replica that cannot be placed in
	// time is dropped, leaving the result unverified.
	var queued []uint64
	o.Iterate(prefixVerifyQ, prefixEnd(prefixVerifyQ), func(k, _ []byte) bool {
		queued = append(queued, binary.BigEndian.Uint64(k[len(prefixVerifyQ):]))
		return uint64(len(queued)) < budget
	})
	// Then priority-tier jobs (market.go), then the main queue.
	if uint64(len(queued)) < budget {
		o.Iterate(prefixPriorityQ, prefixEnd(prefixPriorityQ), func(k, _ []byte) bool {
			queued = append(queued, binary.BigEndian.Uint64(k[len(prefixPriorityQ):]))
			return uint64(len(queued)) < budget
		})
	}
	verifying := len(queued)
	// The main queue is walked in submission order, so that a slot that
	// frees (an owner's grant window lapsed, say) goes to the job that has
	// waited longest, never to one submitted after it: a squatter cannot
	// take back the slots its ungranted jobs held with fresh jobs
	// (TestSquattersCannotKeepAnHonestJobWaiting). Only a queue longer than
	// the budget is walked from the cursor, in turns, so that every job
	// is looked at.
	cursor := getUint(o, keyQueueCursor)
	if n <= budget {
		cursor = 0
	}
	collect := func(start, end []byte) {
		o.Iterate(start, end, func(k, _ []byte) bool {
			queued = append(queued, binary.BigEndian.Uint64(k[len(prefixJobQueue):]))
			return uint64(len(queued)) < budget
		})
	}
	if uint64(len(queued)) < budget {
		collect(jobQueueKey(cursor), prefixEnd(prefixJobQueue))
	}
	// Wrap around only if jobs wait before the cursor: the range behind
	// it is mostly the tombstones of jobs placed long ago.
	if uint64(len(queued)) < min(budget, n) && cursor > 0 {
		collect(prefixJobQueue, jobQueueKey(cursor))
	}
	jobs := make([]*Job, 0, len(queued))
	for _, id := range queued {
		j, err := mustJob(o, id)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	var events []Event
	for _, j := range jobs {
		evs, err := place(o, j, p, info)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	if len(queued) > verifying {
		setUint(o, keyQueueCursor, queued[len(queued)-1]+1)
	}
	return events, nil
}

type candidate struct {
	addr   address.Address
	class  string
	price  uint64 // usync per hour for this job: max(ask, market price) × units
	ask    uint64 // the provider's ask × units
	score  uint64
	engine uint64 // engineID of its wasm engine; 0 for none
}

// verdict tallies why providers were passed over, for the job's reason.
type verdict struct {
	seen, busy, executor, gpus, vram, computeCap, cpu, ram, disk, region, network, stake int
	cheapestAbove                                                                        uint64
	classes                                                                              int
	// For a job whose replicas share an engine: the offers that fit but
	// run another engine than the pinned one (otherEngine) or declare
	// none (noEngine); and, when no engine had enough of the offers that
	// fit (chooseEngine), how many fit and how many engines they run.
	otherEngine, noEngine int
	pinned                string
	fitting, engines      int
	// overMarket counts the classes whose market price for the job's
	// tier is above its ceiling, marketPrice the cheapest of those (for
	// the job, usync per hour).
	overMarket  int
	marketPrice uint64
	// busyOffers are offers that fit but for a free slot, for a job that
	// may preempt (market_preempt.go).
	busyOffers []candidate
}

func (v *verdict) String(j *JobSpec) string {
	if v.overMarket > 0 && v.seen == 0 {
		return fmt.Sprintf("the market price for tier %s is %s/h (the class's index × the tier's factor), above max %s/h", j.TierName(), syncString(v.marketPrice), syncString(j.MaxPricePerHour))
	}
	if v.classes == 0 || (v.seen == 0 && v.cheapestAbove == 0) {
		if j.GPUCount > 0 {
			models := "any GPU class"
			if len(j.GPUModels) > 0 {
				models = strings.Join(j.GPUModels, " or ")
			}
			return fmt.Sprintf("no online provider offers %s", models)
		}
		return "no online provider offers CPU capacity"
	}
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(v.executor, "lack the "+j.Executor+" executor")
	add(v.gpus, fmt.Sprintf("have fewer than %d GPUs", j.GPUCount))
	add(v.vram, fmt.Sprintf("have less than %d GiB VRAM", j.MinVRAM>>30))
	add(v.computeCap, "have compute capability below "+j.MinComputeCap)
	add(v.cpu, fmt.Sprintf("have fewer than %.3g cores", float64(j.CPUMilli)/1000))
	add(v.ram, fmt.Sprintf("have less than %d MiB RAM", j.Memory>>20))
	add(v.disk, fmt.Sprintf("have less than %d MiB disk", j.Disk>>20))
	add(v.region, "are outside region "+j.Region)
	add(v.network, "do not allow network access")
	add(v.stake, "are under-staked")
	add(v.busy, "match but are busy")
	add(v.otherEngine, "run another wasm engine than its replicas' ("+v.pinned+")")
	add(v.noEngine, "declare no wasm engine")
	s := fmt.Sprintf("0 of %d providers within the price can run it", v.seen)
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	if v.cheapestAbove > 0 {
		s += fmt.Sprintf("; cheapest other ask %s/h > max %s/h", syncString(v.cheapestAbove), syncString(j.MaxPricePerHour))
	}
	return s
}

func syncString(usync uint64) string {
	s := fmt.Sprintf("%d.%06d", usync/1_000_000, usync%1_000_000)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".") + " SYNC"
}

// findCandidates returns the providers that can run s now, best first,
// and the tally of why the others cannot. It only reads. In each class it
// scans the offers from the cheapest ask up to the job's ceiling and scores
// the first perClass that fit (so the best price, then reputation, load,
// speed and region among them wins), looking at no more than scanLimit
// offers in all.
//
// For a job whose replicas share a wasm engine (eng.shared) only offers
// with one fit: the pinned engine's, or, before the job has one, any; the
// scan then goes on past perClass until eng.group offers of one engine
// fit, and the candidates returned are those of one engine (chooseEngine).
func findCandidates(kv KV, s *JobSpec, p Params, perClass int, eng engineNeed) ([]candidate, *verdict, error) {
	units := s.Units()
	classes := s.GPUModels
	var sums []classSummary // of classes, for a GPU job
	if s.GPUCount == 0 {
		classes = []string{CPUClass}
	} else if len(classes) == 0 {
		var err error
		if classes, sums, err = indexedGPUClasses(kv); err != nil {
			return nil, nil, err
		}
	} else {
		sums = make([]classSummary, len(classes))
		for i, c := range classes {
			var err error
			if sums[i], err = getClassSummary(kv, []byte(c)); err != nil {
				return nil, nil, err
			}
		}
	}
	maxUnit := s.MaxPricePerHour / units
	need := newNeeds(s, p)
	need.engine = eng
	caps := needCaps(s)
	var cands []candidate
	v := &verdict{pinned: eng.pinned}
	// tally, for a placement that chooses the engine, counts the fitting
	// offers of each: the scan looks for eng.group of one. (Set once, so
	// the scan's closure copies it rather than moving it to the heap.)
	tally := eng.tally()
	budget := scanLimit
	tier := s.TierName()
	preempts := tierRank(tier) > 0 && !eng.shared
	var of offer
	var scanned, empty []string
	for i, class := range classes {
		if budget <= 0 {
			break
		}
		if sums != nil && sums[i].entries > 0 && !sums[i].mayFit(caps) {
			// No entry of the class can meet the job's GPU needs: skip
			// the scan, and count the class's providers under the first
			// need none of them meets.
			v.classes++
			v.seen += int(sums[i].entries)
			sums[i].tallyMisfit(caps, v)
			continue
		}
		market, err := marketUnitPrice(kv, class, p, tier)
		if err != nil {
			return nil, nil, err
		}
		if market > maxUnit {
			v.classes++
			v.overMarket++
			if price := market * units; v.marketPrice == 0 || price < v.marketPrice {
				v.marketPrice = price
			}
			continue
		}
		cp := classPrefix(class)
		end := providerIndexKey(class, maxUnit+1, address.Address{})
		found := 0
		hasEntries := false
		kv.Iterate(cp, end, func(k, val []byte) bool {
			hasEntries = true
			budget--
			if err = decodeOffer(cp, k, val, &of); err != nil {
				return false
			}
			v.seen++
			busy := v.busy
			if need.fits(&of, v) {
				price := max(of.pricePerUnit, market) * units
				cands = append(cands, candidate{addr: of.addr, class: class, price: price, ask: of.pricePerUnit * units, score: score(&of, price, s), engine: of.engine})
				found++
				if tally != nil {
					tally.add(of.engine)
				}
			} else if preempts && v.busy > busy && len(v.busyOffers) < perClass {
				price := max(of.pricePerUnit, market) * units
				v.busyOffers = append(v.busyOffers, candidate{addr: of.addr, class: class, price: price, ask: of.pricePerUnit * units})
			}
			return (found < perClass || tally.short()) && budget > 0
		})
		if err != nil {
			return nil, nil, err
		}
		if hasEntries {
			v.classes++
		} else {
			empty = append(empty, class)
		}
		scanned = append(scanned, class)
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.addr[:], b.addr[:])
	})
	// A provider appears once (at its best) even if several of its
	// classes fit.
	if len(classes) > 1 {
		seen := make(map[address.Address]bool, len(cands))
		out := cands[:0]
		for _, c := range cands {
			if !seen[c.addr] {
				seen[c.addr] = true
				out = append(out, c)
			}
		}
		cands = out
	}
	if tally != nil {
		cands = chooseEngine(cands, eng.group, v)
	}
	if len(cands) < int(s.PlannedReplicas()) {
		// The job will not be placed: find, for its reason, the cheapest
		// ask above its ceiling.
		for _, class := range scanned {
			cp := classPrefix(class)
			kv.Iterate(providerIndexKey(class, maxUnit+1, address.Address{}), prefixEnd(cp), func(k, _ []byte) bool {
				if price := binary.BigEndian.Uint64(k[len(cp):]) * units; v.cheapestAbove == 0 || price < v.cheapestAbove {
					v.cheapestAbove = price
				}
				if slices.Contains(empty, class) {
					v.classes++
				}
				return false
			})
		}
	}
	return cands, v, nil
}

// unplacedReason explains why a job with these candidates cannot start.
func unplacedReason(s *JobSpec, cands []candidate, v *verdict) string {
	reason := v.String(s)
	switch n := len(cands); {
	case v.engines > 1:
		reason = fmt.Sprintf("needs %d distinct providers on one wasm engine for verification %s: %d fit, but they run %d engines, at most %d on one; %s",
			s.PlannedReplicas(), s.Verification, v.fitting, v.engines, n, reason)
	case n > 0:
		reason = fmt.Sprintf("needs %d distinct providers for verification %s, %d fit; %s", s.PlannedReplicas(), s.Verification, n, reason)
	}
	return reason
}

// code is the Quote code of what unplacedReason explains, for a placement
// that needs need candidates.
func (v *verdict) code(cands []candidate, need int) string {
	switch {
	case len(cands) == 0 && v.overMarket > 0 && v.seen == 0:
		return QuoteOverMarket
	case v.engines > 1 || (len(cands) < need && len(cands)+v.otherEngine+v.noEngine >= need):
		// Enough fit, but not on one engine (or not on the pinned one).
		return QuoteNoEngine
	case len(cands) > 0:
		return QuoteTooFew
	case v.classes == 0 || (v.seen == 0 && v.cheapestAbove == 0):
		return QuoteNoOffer
	case v.seen == 0:
		return QuoteOverPrice
	}
	return QuoteNoFit
}

// Quote is what a job would get if it were submitted now.
type Quote struct {
	Matching     int    `json:"matching"`       // providers that can run it now
	PricePerHour uint64 `json:"price_per_hour"` // usync per hour of the provider it would get (per replica)
	Replicas     uint64 `json:"replicas"`
	// MaxCost is what the job costs if it runs to its timeout at that
	// price, fee included; Escrow is what submitting it locks.
	MaxCost uint64 `json:"max_cost"`
	Escrow  uint64 `json:"escrow"`
	Reason  string `json:"reason,omitempty"` // why it would not be placed, for people
	// Code is why it would not be placed, for programs: one of the
	// Quote* codes, "" when it would be placed.
	Code string `json:"code,omitempty"`
	// CheapestAsk, when it would not be placed, is the cheapest ask above
	// its max_price_per_hour in the classes it can use (usync per hour for
	// this job); 0 when there is none.
	CheapestAsk uint64       `json:"cheapest_ask,omitempty"`
	Best        []QuoteOffer `json:"best"`
	// Tiers is what the job would pay per hour in each tier now, and why
	// (market.go).
	Tiers []QuoteTier `json:"tiers,omitempty"`
}

// QuoteTier is what a job would pay per hour in one tier: the larger of
// its best provider's ask and the class's index × the tier's factor, both
// for the job's units.
type QuoteTier struct {
	Tier         string `json:"tier"`
	Class        string `json:"class"`
	Index        uint64 `json:"index"` // the class's index, usync per unit-hour
	FactorPPM    uint64 `json:"factor_ppm"`
	Market       uint64 `json:"market"` // index × factor × units, usync per hour
	Ask          uint64 `json:"ask"`    // the best provider's ask × units; 0 when none fits
	PricePerHour uint64 `json:"price_per_hour"`
	// Why says which of the two sets the price: "ask" or "index".
	Why string `json:"why"`
}

// Why a quoted job would not be placed (Quote.Code).
const (
	// QuoteNoOffer: no online provider offers the job's GPU classes (or
	// CPU capacity) at any price.
	QuoteNoOffer = "no_offer"
	// QuoteOverPrice: providers offer the job's classes, but every ask is
	// above its max_price_per_hour.
	QuoteOverPrice = "over_price"
	// QuoteNoFit: providers ask within the price, but none of them can
	// run the job now (hardware, region, network, stake, busy).
	QuoteNoFit = "no_fit"
	// QuoteTooFew: some can run it, fewer than the distinct replicas its
	// verification needs.
	QuoteTooFew = "too_few"
	// QuoteNoEngine: a wasm job whose replicas are compared, and enough
	// providers that fit are free, but too few of them on one wasm engine:
	// before it is placed, no engine has as many as it needs; once placed,
	// the free ones run another engine than its replicas (or declare
	// none).
	QuoteNoEngine = "no_engine"
	// QuoteOverMarket: the market price of the job's classes for its
	// tier (index × tier factor, market.go) is above its
	// max_price_per_hour: it waits until the index falls or it pays more.
	QuoteOverMarket = "over_market"
)

// QuoteOffer is one provider a job could get.
type QuoteOffer struct {
	Provider     address.Address `json:"provider"`
	PricePerHour uint64          `json:"price_per_hour"`
	Score        uint64          `json:"score"`
}

// QuoteJob answers what submitting s now would give.
func QuoteJob(kv KV, s *JobSpec) (*Quote, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	p, err := GetParams(kv)
	if err != nil {
		return nil, err
	}
	var eng engineNeed
	if s.SharesEngine() {
		eng = engineNeed{shared: true, group: int(s.PlannedReplicas())}
	}
	cands, v, err := findCandidates(kv, s, p, quotePerClass, eng)
	if err != nil {
		return nil, err
	}
	q := &Quote{Matching: len(cands), Replicas: s.PlannedReplicas(), Escrow: JobEscrow(s, p), Best: []QuoteOffer{}}
	if uint64(len(cands)) < q.Replicas {
		q.Reason, q.Code, q.CheapestAsk = unplacedReason(s, cands, v), v.code(cands, int(q.Replicas)), v.cheapestAbove
	}
	for i, c := range cands {
		if uint64(i) < q.Replicas {
			q.PricePerHour = max(q.PricePerHour, c.price)
			cost := mulDiv(c.price, s.TimeoutSeconds, 3600)
			q.MaxCost += cost + mulDiv(cost, p.ProtocolFeeBps, 10_000)
		}
		if i < 5 {
			q.Best = append(q.Best, QuoteOffer{Provider: c.addr, PricePerHour: c.price, Score: c.score})
		}
	}
	class, ask := CPUClass, uint64(0)
	switch {
	case len(cands) > 0:
		class, ask = cands[0].class, cands[0].ask
	case s.GPUCount > 0 && len(s.GPUModels) > 0:
		class = s.GPUModels[0]
	case s.GPUCount > 0:
		class = ""
	}
	if class != "" {
		m, err := marketClassOrFloor(kv, class, p)
		if err != nil {
			return nil, err
		}
		for _, t := range Tiers {
			qt := QuoteTier{Tier: t, Class: class, Index: m.Index(), FactorPPM: p.TierFactorPPM(t), Market: m.PricePerUnit(p, t) * s.Units(), Ask: ask}
			qt.PricePerHour, qt.Why = max(qt.Market, ask), "ask"
			if qt.Market > ask {
				qt.Why = "index"
			}
			q.Tiers = append(q.Tiers, qt)
		}
	}
	return q, nil
}

// place tries to give j the replicas it wants; it records the reason when
// it cannot. A job that already has replicas (an audit, an escalation, a
// replacement) gets providers it does not have yet.
func place(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	need := int(j.Replicas) - len(j.Assignments)
	if need <= 0 {
		dequeueJob(o, j.ID)
		return nil, nil
	}
	eng := engineNeedOf(j)
	cands, v, err := findCandidates(o, &j.Spec, p, candidatesPerClass, eng)
	if err != nil {
		return nil, err
	}
	if len(j.Assignments) > 0 {
		cands = slices.DeleteFunc(cands, func(c candidate) bool { return j.assignment(c.addr) != nil })
	}
	if len(cands) < need {
		reason := unplacedReason(&j.Spec, cands, v)
		if len(j.Assignments) > 0 {
			reason = fmt.Sprintf("waiting for %d more distinct provider(s) to verify it: %s", need, reason)
		}
		evs, note, err := preemptFor(o, j, v.busyOffers, need-len(cands), p, info)
		if err != nil {
			return nil, err
		}
		reason += note
		if code := v.code(cands, need); j.Reason != reason || j.WaitCode != code || len(evs) > 0 {
			j.Reason, j.WaitCode = reason, code
			setJob(o, j, j.Deadline)
		}
		return evs, nil
	}
	now := info.Time.Unix()
	old := j.Deadline
	planned := int(j.Spec.PlannedReplicas())
	var names []string
	for _, c := range cands[:need] {
		pr, err := mustProvider(o, c.addr)
		if err != nil {
			return nil, err
		}
		before := *pr
		pr.Jobs++
		setProviderFrom(o, &before, pr)
		regular := 0
		for _, a := range j.Assignments {
			if !a.Extra {
				regular++
			}
		}
		a := Assignment{Provider: c.addr, PricePerHour: c.price, AssignedAt: now, Class: c.class, Extra: regular >= planned}
		if j.Spec.Executor == ExecutorWASM {
			// What ran it, for every wasm job; for one whose replicas
			// share an engine, the index matched it (engineNeed).
			a.WasmEngine = pr.WasmEngine
		}
		j.Assignments = append(j.Assignments, a)
		marketReserve(o, j, &a, +1)
		o.Set(jobProvKey(c.addr, j.ID), []byte{1})
		names = append(names, c.addr.String())
	}
	j.Attempts++
	if j.committed() > 0 {
		j.State = JobVerifying
		j.Reason = "extra replica placed; waiting for its job key (from the owner, or handed over by a committed replica)"
		if j.KeyCommitment == nil {
			j.Reason = "extra replica placed; waiting for the owner to grant it the job key"
		}
	} else {
		j.State = JobAssigned
		j.Reason = "placed; waiting for the owner to grant the job key"
	}
	j.Deadline = now + int64(p.JobGrantTimeout)
	j.WaitCode = ""
	dequeueJob(o, j.ID)
	setJob(o, j, old)
	return []Event{jobEvent("job_assigned", j, Attr{"providers", strings.Join(names, ",")})}, nil
}

// needs is a job's hard constraints in the form offers are checked against.
type needs struct {
	s             *JobSpec
	p             Params
	engine        engineNeed
	executor      uint8
	cpuCores      uint64 // whole cores, rounded up
	minComputeCap uint64
}

func newNeeds(s *JobSpec, p Params) *needs {
	return &needs{
		s:             s,
		p:             p,
		executor:      executorBits([]string{s.Executor}),
		cpuCores:      (s.CPUMilli + 999) / 1000,
		minComputeCap: computeCapValue(s.MinComputeCap),
	}
}

// fits applies the hard constraints, tallying failures in v.
func (n *needs) fits(of *offer, v *verdict) bool {
	s := n.s
	switch {
	case of.executors&n.executor == 0:
		v.executor++
	case of.stake < of.requiredStake(n.p):
		v.stake++
	case of.cpuCores < n.cpuCores:
		v.cpu++
	case of.ram < s.Memory:
		v.ram++
	case of.disk < s.Disk:
		v.disk++
	case s.RegionRequired && string(of.region) != s.Region:
		v.region++
	case s.Network && of.executors&offerNetwork == 0:
		v.network++
	case s.GPUCount > 0 && !n.gpusFit(of.classGPUs, v):
	case of.jobs >= of.maxJobs:
		v.busy++
	case n.engine.shared && of.engine == 0:
		v.noEngine++
	case n.engine.pinnedID != 0 && of.engine != n.engine.pinnedID:
		v.otherEngine++
	default:
		return true
	}
	return false
}

func (n *needs) gpusFit(gpus []offerGPU, v *verdict) bool {
	var vramOK, ccOK uint64
	for _, g := range gpus {
		if g.vram >= n.s.MinVRAM {
			vramOK++
			if g.computeCap >= n.minComputeCap {
				ccOK++
			}
		}
	}
	switch {
	case uint64(len(gpus)) < n.s.GPUCount:
		v.gpus++
	case vramOK < n.s.GPUCount:
		v.vram++
	case ccOK < n.s.GPUCount:
		v.computeCap++
	default:
		return true
	}
	return false
}

// score ranks a feasible offer for a job: cheaper, more reputable, less
// loaded, faster and in the preferred region is better. All integer.
func score(of *offer, price uint64, s *JobSpec) uint64 {
	priceTerm := (s.MaxPricePerHour - min(price, s.MaxPricePerHour)) * 1000 / max(s.MaxPricePerHour, 1)
	rep := of.reputation / 1000
	load := (of.maxJobs - min(of.jobs, of.maxJobs)) * 1000 / max(of.maxJobs, 1)
	speed := min(of.int8GOPS/100, 1000)
	var region uint64
	if s.Region != "" && string(of.region) == s.Region {
		region = 1000
	}
	return 4*priceTerm + 3*rep + 2*load + speed + 2*region
}
