package ledger

import (
	"encoding/binary"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// The scheduler runs at the end of every block. It walks the queued jobs
// (oldest first, at most params.max_placements_per_block of them; from a
// cursor, in turns, when more wait) and places each on the best providers
// that fit, or records in the job why none do.
//
// Choosing the providers is the planner's (package sched): sched.Place
// reads the offer index through indexState (offer.go) and returns a
// sched.Plan, the picks and a structured miss. This file applies a plan:
// place assigns the picks (provider slots, market reservations, events,
// dequeueing) or records the miss, as a code and a PlacementMiss (the
// words are internal/jobtext's); QuoteJob reports the plan a job would
// get.

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
	// (TestSquattersCannotKeepAnHonestJobWaiting). When more jobs wait
	// than the budget, half of what is left of it still goes to the
	// oldest jobs, every block, and the other half walks the rest of the
	// queue from the cursor, in turns, so that every job is looked at and
	// none among the oldest waits for its turn behind younger ones (before,
	// the whole budget walked from the cursor, and a squatter's jobs
	// submitted after an honest job took the slots that freed while the
	// cursor was past it).
	collect := func(start, end []byte, limit uint64) {
		if uint64(len(queued)) >= limit {
			return
		}
		o.Iterate(start, end, func(k, _ []byte) bool {
			queued = append(queued, binary.BigEndian.Uint64(k[len(prefixJobQueue):]))
			return uint64(len(queued)) < limit
		})
	}
	walked := len(queued)
	if n <= budget {
		collect(prefixJobQueue, prefixEnd(prefixJobQueue), budget)
	} else if rest := budget - min(uint64(len(queued)), budget); rest > 0 {
		collect(prefixJobQueue, prefixEnd(prefixJobQueue), uint64(len(queued))+(rest+1)/2)
		var headEnd uint64 // the head's jobs are those below it
		if len(queued) > verifying {
			headEnd = queued[len(queued)-1] + 1
		}
		walked = len(queued)
		cursor := max(getUint(o, keyQueueCursor), headEnd)
		collect(jobQueueKey(cursor), prefixEnd(prefixJobQueue), budget)
		// Wrap around only if jobs wait between the head and the cursor:
		// the range behind it is mostly the tombstones of jobs placed
		// long ago.
		if cursor > headEnd {
			collect(jobQueueKey(headEnd), jobQueueKey(cursor), budget)
		}
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
	if len(queued) > walked {
		setUint(o, keyQueueCursor, queued[len(queued)-1]+1)
	}
	return events, nil
}

// jobRequest is what placing a job of spec s asks the planner: its
// constraints, with perClass and eng; the caller sets Need (and Have).
func jobRequest(s *JobSpec, p Params, perClass int, eng sched.EngineNeed) sched.Request {
	tier := s.TierName()
	return sched.Request{
		Units:           s.Units(),
		MaxPricePerHour: s.MaxPricePerHour,
		GPUCount:        s.GPUCount,
		Classes:         s.GPUModels,
		MinVRAM:         s.MinVRAM,
		MinComputeCap:   computeCapValue(s.MinComputeCap),
		CPUMilli:        s.CPUMilli,
		Memory:          s.Memory,
		Disk:            s.Disk,
		Region:          s.Region,
		RegionRequired:  s.RegionRequired,
		Network:         s.Network,
		Executor:        executorBits([]string{s.Executor}),
		MinStakePerGPU:  p.MinStakePerGPU,
		MinStakeCPU:     p.MinStakeCPU,
		NVLink:          s.Interconnect == InterconnectNVLink,
		Gang:            s.Gang(),
		Members:         gangMembers(s),
		Tier:            tier,
		// A gang does not preempt: the slots it could take need not
		// make a gang in one site (gang.go).
		MayPreempt: tierRank(tier) > 0 && !s.Gang(),
		Engine:     eng,
		PerClass:   perClass,
		Planned:    int(s.PlannedReplicas()),
	}
}

// placementMiss is the record of a plan's miss m: its counts, and pinned,
// the wasm engine the job's replicas run on if they must share one. The
// caller adds what the planner does not know (Assigned, the preemption).
func placementMiss(m *sched.Miss, pinned string) PlacementMiss {
	return PlacementMiss{
		Seen: uint64(m.Seen), Busy: uint64(m.Busy), Executor: uint64(m.Executor),
		GPUs: uint64(m.GPUs), VRAM: uint64(m.VRAM), ComputeCap: uint64(m.ComputeCap),
		CPU: uint64(m.CPU), RAM: uint64(m.RAM), Disk: uint64(m.Disk),
		Region: uint64(m.Region), Network: uint64(m.Network), Stake: uint64(m.Stake), TEE: uint64(m.TEE),
		CheapestAbove: m.CheapestAbove, Classes: uint64(m.Classes),
		OtherEngine: uint64(m.OtherEngine), NoEngine: uint64(m.NoEngine), Pinned: pinned,
		Fitting: uint64(m.Fitting), Engines: uint64(m.Engines),
		OverMarket: uint64(m.OverMarket), MarketPrice: m.MarketPrice,
		Fit: uint64(m.Fit), Need: uint64(m.Need), Excluded: uint64(m.Excluded),
		NVLink: uint64(m.NVLink), Sites: uint64(m.Sites), Together: uint64(m.Together),
	}
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
	// Reason is why it would not be placed, for people: Miss in words.
	// The ledger leaves it empty; the API fills it from Miss
	// (internal/jobtext.QuoteMiss, the one renderer).
	Reason string `json:"reason,omitempty"`
	// Code is why it would not be placed, for programs: one of the
	// Quote* codes, "" when it would be placed; Miss is then the
	// planner's tally behind it.
	Code string         `json:"code,omitempty"`
	Miss *PlacementMiss `json:"miss,omitempty"`
	// CheapestAsk, when it would not be placed, is the cheapest ask above
	// its max_price_per_hour in the classes it can use (usync per hour for
	// this job); 0 when there is none.
	CheapestAsk uint64       `json:"cheapest_ask,omitempty"`
	Best        []QuoteOffer `json:"best"`
	// Gangs, for a gang (resources.nodes > 1), is how many whole gangs
	// of it the providers that fit make now, site by site (at least:
	// the planner stops looking at the first site with enough); Nodes
	// its members. PricePerHour and MaxCost are then per member and for
	// the whole gang.
	Nodes uint64 `json:"nodes,omitempty"`
	Gangs int    `json:"gangs,omitempty"`
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
	// TEEIndex is the class's TEE index for a trust: tee job
	// (market_tee.go), which pays the larger of the two indexes.
	TEEIndex uint64 `json:"tee_index,omitempty"`
}

// Why a quoted job would not be placed (Quote.Code), and why a queued job
// or service waits (Job.WaitCode, Service.WaitCode): the planner's
// sched.Code strings.
const (
	// QuoteNoOffer: no online provider offers the job's GPU classes (or
	// CPU capacity) at any price.
	QuoteNoOffer = string(sched.NoOffer)
	// QuoteOverPrice: providers offer the job's classes, but every ask is
	// above its max_price_per_hour.
	QuoteOverPrice = string(sched.OverPrice)
	// QuoteNoFit: providers ask within the price, but none of them can
	// run the job now (hardware, region, network, stake, busy).
	QuoteNoFit = string(sched.NoFit)
	// QuoteTooFew: some can run it, fewer than the distinct replicas its
	// verification needs.
	QuoteTooFew = string(sched.TooFew)
	// QuoteApart: a gang (resources.nodes > 1), enough providers fit
	// for its members, but too few of them in one region (gang.go).
	QuoteApart = string(sched.Apart)
	// QuoteNoEngine: a wasm job whose replicas are compared, and enough
	// providers that fit are free, but too few of them on one wasm engine:
	// before it is placed, no engine has as many as it needs; once placed,
	// the free ones run another engine than its replicas (or declare
	// none).
	QuoteNoEngine = string(sched.NoEngine)
	// QuoteOverMarket: the market price of the job's classes for its
	// tier (index × tier factor, market.go) is above its
	// max_price_per_hour: it waits until the index falls or it pays more.
	QuoteOverMarket = string(sched.OverMarket)
)

// QuoteOffer is one provider a job could get.
type QuoteOffer struct {
	Provider     address.Address `json:"provider"`
	PricePerHour uint64          `json:"price_per_hour"`
	Score        uint64          `json:"score"`
}

// QuoteJob answers what submitting s now would give.
func QuoteJob(kv KV, s *JobSpec) (*Quote, error) { return QuoteJobAt(kv, s, time.Time{}) }

// QuoteJobAt is QuoteJob at time now, against which a trust: tee job's
// providers' attestations must be unexpired (the zero time: any accepted
// attestation counts).
func QuoteJobAt(kv KV, s *JobSpec, now time.Time) (*Quote, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	p, err := GetParams(kv)
	if err != nil {
		return nil, err
	}
	var eng sched.EngineNeed
	if s.SharesEngine() {
		eng = sched.EngineNeed{Shared: true, Group: int(s.PlannedReplicas())}
	}
	r := jobRequest(s, p, sched.QuotePerClass, eng)
	r.Need = r.Planned
	var at int64
	if !now.IsZero() {
		at = now.Unix()
	}
	r.Admit = teeAdmits(kv, s, at)
	plan, err := sched.Place(newIndexState(kv, p).forTrust(s.Trust), &r)
	if err != nil {
		return nil, err
	}
	cands, m := plan.Ranked, &plan.Miss
	q := &Quote{Matching: len(cands), Replicas: s.PlannedReplicas(), Escrow: JobEscrow(s, p), Best: []QuoteOffer{}}
	if m.Code != "" {
		miss := placementMiss(m, "")
		q.Code, q.Miss, q.CheapestAsk = string(m.Code), &miss, m.CheapestAbove
	}
	priced := cands
	if s.Gang() {
		// A gang's price is its members': those it would get.
		q.Nodes, q.Gangs, priced = s.Nodes, plan.Gangs, plan.Picks
		if priced == nil {
			priced = cands
		}
	}
	for i, c := range priced {
		if uint64(i) < q.Replicas {
			q.PricePerHour = max(q.PricePerHour, c.Price)
			cost := mulDiv(c.Price, s.TimeoutSeconds, 3600)
			q.MaxCost += cost + mulDiv(cost, p.ProtocolFeeBps, 10_000)
		}
	}
	for i, c := range cands {
		if i < 5 {
			q.Best = append(q.Best, QuoteOffer{Provider: c.Provider, PricePerHour: c.Price, Score: c.Score})
		}
	}
	class, ask := CPUClass, uint64(0)
	switch {
	case len(cands) > 0:
		class, ask = cands[0].Class, cands[0].Ask
	case s.GPUCount > 0 && len(s.GPUModels) > 0:
		class = s.GPUModels[0]
	case s.GPUCount > 0:
		class = ""
	}
	if class != "" {
		mc, err := marketClassOrFloor(kv, class, p)
		if err != nil {
			return nil, err
		}
		var tee *MarketClass
		if s.Trust == TrustTEE {
			if tee, err = teeBook.orFloor(kv, class, p); err != nil {
				return nil, err
			}
		}
		for _, t := range Tiers {
			qt := QuoteTier{Tier: t, Class: class, Index: mc.Index(), FactorPPM: p.TierFactorPPM(t), Market: mc.PricePerUnit(p, t) * s.Units(), Ask: ask}
			if tee != nil {
				// A trust: tee job pays the larger of the two indexes
				// (market_tee.go).
				qt.TEEIndex = tee.Index()
				qt.Market = max(mc.PricePerUnit(p, t), tee.PricePerUnit(p, t)) * s.Units()
			}
			qt.PricePerHour, qt.Why = max(qt.Market, ask), "ask"
			if qt.Market > ask {
				qt.Why = "index"
			}
			q.Tiers = append(q.Tiers, qt)
		}
	}
	return q, nil
}

// place tries to give j the replicas it wants; it records why (a
// WaitUnplaced wait) when it cannot. A job that already has replicas (an
// audit, an escalation, a replacement) gets providers it does not have
// yet.
func place(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	need := int(j.Replicas) - len(j.Assignments)
	if need <= 0 {
		dequeueJob(o, j.ID)
		return nil, nil
	}
	eng, pinned := engineNeedOf(j)
	r := jobRequest(&j.Spec, p, sched.PlacePerClass, eng)
	r.Need = need
	r.Admit = teeAdmits(o, &j.Spec, info.Time.Unix())
	for _, a := range j.Assignments {
		r.Have = append(r.Have, a.Provider)
	}
	plan, err := sched.Place(newIndexState(o, p).forTier(j.Spec.TierName()).forTrust(j.Spec.Trust), &r)
	if err != nil {
		return nil, err
	}
	if m := &plan.Miss; m.Code != "" {
		evs, pre, err := preemptSpot(o, j, plan.Busy, need-m.Fit, p, info)
		if err != nil {
			return nil, err
		}
		miss := placementMiss(m, pinned)
		miss.Assigned = uint64(len(j.Assignments))
		miss.PreemptWait, miss.Preempting, miss.PreemptAt = pre.PreemptWait, pre.Preempting, pre.PreemptAt
		// Only on change: a job that waits keeps its record (and the
		// app hash) as it is while nothing about its wait changes.
		if code := string(m.Code); !waitsUnplaced(j, miss) || j.WaitCode != code || len(evs) > 0 {
			j.setWait(Wait{Code: WaitUnplaced, Miss: &miss})
			j.WaitCode = code
			setJob(o, j, j.Deadline)
		}
		return evs, nil
	}
	now := info.Time.Unix()
	old := j.Deadline
	planned := int(j.Spec.PlannedReplicas())
	// A gang's picks come gang by gang, rank 0 first; at full each new
	// gang takes the lowest replica gang index free (gang_verify.go).
	freeGangs := freeGangIndexes(j, len(plan.Picks))
	var names []string
	for pi, c := range plan.Picks {
		pr, err := mustProvider(o, c.Provider)
		if err != nil {
			return nil, err
		}
		regular := 0
		for _, a := range j.Assignments {
			if !a.Extra {
				regular++
			}
		}
		a := Assignment{Provider: c.Provider, PricePerHour: c.Price, AssignedAt: now, Class: c.Class, Extra: regular >= planned}
		if j.Spec.Gang() {
			// A gang is placed whole: its members' ranks are the
			// order the planner ranked them in (gang.go).
			a.Rank = uint64(len(j.Assignments))
			if j.Spec.Checked() {
				a.Rank = uint64(pi) % j.Spec.Nodes
				a.Gang = freeGangs[uint64(pi)/j.Spec.Nodes]
				a.Placement = j.Attempts + 1
			}
		}
		if j.Spec.Executor == ExecutorWASM {
			// What ran it, for every wasm job; for one whose replicas
			// share an engine, the index matched it (engineNeedOf).
			a.WasmEngine = pr.WasmEngine
		}
		j.Assignments = append(j.Assignments, a)
		// Until its key is granted, it holds the slot tentatively
		// (slots.go).
		holdTentative(o, j, &a, pr)
		names = append(names, c.Provider.String())
	}
	j.Attempts++
	if j.committed() > 0 {
		j.State = JobVerifying
		if j.KeyCommitment == nil {
			j.setWait(Wait{Code: WaitExtraPlacedOwnerKey})
		} else {
			j.setWait(Wait{Code: WaitExtraPlaced})
		}
	} else {
		j.State = JobAssigned
		j.setWait(Wait{Code: WaitPlaced})
	}
	j.Deadline = now + int64(p.JobGrantTimeout)
	j.WaitCode = ""
	dequeueJob(o, j.ID)
	setJob(o, j, old)
	return []Event{jobEvent("job_assigned", j, Attr{"providers", strings.Join(names, ",")})}, nil
}

// waitsUnplaced reports whether j's record already says it waits
// unplaced for miss (and holds no sentence from before version 6).
func waitsUnplaced(j *Job, miss PlacementMiss) bool {
	return j.Reason == "" && j.Wait != nil && j.Wait.Code == WaitUnplaced && j.Wait.Miss != nil && *j.Wait.Miss == miss
}
