package ledger

import (
	"encoding/binary"
	"strconv"

	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// Service placement, at the end of every block after the jobs': each
// service that wants more replicas than it has (svcq/) gets providers the
// way a job does (sched.Place on its JobView: the same offers, slots,
// market price and scoring), but never one it already runs on or one that
// gave back, dropped or was evicted from a replica of it (Excluded), and
// as many as fit (a Partial request) rather than all or none.

// serviceMarketReserve adds (d = +1) or removes (d = −1) what replica r of
// s reserves in its class, as a job's assignment does (marketReserve), so
// that the market's utilisation counts services. Self-dealing does not
// count.
func serviceMarketReserve(o *Overlay, s *Service, r *Replica, d int64) {
	if s.Owner == r.Provider {
		return
	}
	view := s.Spec.JobView()
	plainBook.reserve(o, r.Class, d*int64(view.Units()))
	serviceTEEReserve(o, s, r, d)
}

// placeServices places the replicas that the queued services want, at most
// params.max_placements_per_block services a block, in id order.
func placeServices(o *Overlay, p Params, info BlockInfo) ([]Event, error) {
	var ids []uint64
	o.Iterate(prefixServiceQueue, prefixEnd(prefixServiceQueue), func(k, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(k[len(prefixServiceQueue):]))
		return uint64(len(ids)) < p.MaxPlacementsPerBlock
	})
	var events []Event
	for _, id := range ids {
		s, err := mustService(o, id)
		if err != nil {
			return nil, err
		}
		evs, err := placeService(o, s, p, info)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

// placeService gives s the replicas it wants, as far as providers fit, and
// records why it waits for the rest.
func placeService(o *Overlay, s *Service, p Params, info BlockInfo) ([]Event, error) {
	need := int(s.Spec.Replicas) - len(s.Replicas)
	if s.Done() || need <= 0 {
		setService(o, s, s.Deadline)
		return nil, nil
	}
	view := s.Spec.JobView()
	r := jobRequest(&view, p, sched.PlacePerClass+len(s.Replicas)+len(s.Excluded), sched.EngineNeed{})
	r.Need, r.Partial, r.Excluded = need, true, s.Excluded
	// A trust: tee service's replicas go to attested providers only, at
	// the TEE market's price (market_tee.go).
	r.Admit = teeAdmits(o, &view, info.Time.Unix())
	for _, rep := range s.Replicas {
		r.Have = append(r.Have, rep.Provider)
	}
	plan, err := sched.Place(newIndexState(o, p).forTrust(view.Trust), &r)
	if err != nil {
		return nil, err
	}
	now := info.Time.Unix()
	old := s.Deadline
	var events []Event
	for _, c := range plan.Picks {
		pr, err := mustProvider(o, c.Provider)
		if err != nil {
			return nil, err
		}
		before := *pr
		pr.Jobs++
		setProviderFrom(o, &before, pr)
		rep := Replica{Provider: c.Provider, PricePerHour: c.Price, Class: c.Class, AssignedAt: now}
		s.Replicas = append(s.Replicas, rep)
		serviceMarketReserve(o, s, &rep, +1)
		setMarker(o, serviceProvKey(c.Provider, s.ID), true)
		s.Placements++
		events = append(events, serviceEvent("service_replica_placed", s, Attr{"provider", c.Provider.String()},
			Attr{"price_per_hour", strconv.FormatUint(c.Price, 10)}, Attr{"class", c.Class}))
		// A replica has no key to grant: it takes its slot for real at
		// once, as a grant does (slots.go).
		bumped, err := bumpExcess(o, c.Provider, 0, p, info)
		if err != nil {
			return nil, err
		}
		events = append(events, bumped...)
	}
	var wait *Wait
	code := ""
	if m := &plan.Miss; m.Code != "" {
		miss := placementMiss(m, "") // Need: the replicas s still wants
		wait, code = &Wait{Code: WaitUnplaced, Miss: &miss}, string(m.Code)
	}
	if len(events) == 0 && s.Reason == "" && sameWait(s.Wait, wait) && s.WaitCode == code {
		return nil, nil
	}
	s.setWait(wait)
	s.WaitCode = code
	return append(events, refreshService(o, s, p, now, old)...), nil
}

// sameWait reports whether a service's wait a is b, for placeService's
// waits (a code and a miss): a service that waits keeps its record as it
// is while nothing about its wait changes.
func sameWait(a, b *Wait) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Code == b.Code && a.Miss != nil && b.Miss != nil && *a.Miss == *b.Miss
}

// ServiceQuote is what deploying a service now would give: the providers
// that could take its replicas, what they would cost an hour, and how long
// a budget would last at that rate.
type ServiceQuote struct {
	Matching int    `json:"matching"` // providers that could take a replica now
	Replicas uint64 `json:"replicas"`
	// PricePerHour is the dearest of the replicas' prices (usync per
	// hour); RatePerHour what all of them would cost an hour when ready,
	// the protocol fee included.
	PricePerHour uint64 `json:"price_per_hour"`
	RatePerHour  uint64 `json:"rate_per_hour"`
	// Budget is the budget asked about; LastsSeconds how long it pays
	// RatePerHour (0 when no budget was given or nothing would be placed).
	Budget       uint64 `json:"budget,omitempty"`
	LastsSeconds uint64 `json:"lasts_seconds,omitempty"`
	// MinBudget is the least budget deploying it takes: a minute of its
	// replicas at max_price_per_hour, the fee included.
	MinBudget uint64 `json:"min_budget"`
	// Code says why some replicas would wait (Quote* codes, as a job's
	// quote), Miss the planner's tally behind it, and Reason the same in
	// words: the ledger leaves Reason empty, the API fills it from Miss
	// (internal/jobtext.ServiceQuoteMiss). CheapestAsk is then the
	// cheapest ask above max_price_per_hour in the classes it can use.
	Reason      string         `json:"reason,omitempty"`
	Code        string         `json:"code,omitempty"`
	Miss        *PlacementMiss `json:"miss,omitempty"`
	CheapestAsk uint64         `json:"cheapest_ask,omitempty"`
	Best        []QuoteOffer   `json:"best"`
}

// QuoteService answers what deploying s with budget now would give, from
// the same planner placement uses (sched.Place).
func QuoteService(kv KV, s *ServiceSpec, budget uint64) (*ServiceQuote, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	p, err := GetParams(kv)
	if err != nil {
		return nil, err
	}
	view := s.JobView()
	r := jobRequest(&view, p, sched.QuotePerClass, sched.EngineNeed{})
	r.Need = int(s.Replicas)
	r.Admit = teeAdmits(kv, &view, 0) // any accepted attestation, as QuoteJob
	plan, err := sched.Place(newIndexState(kv, p).forTrust(view.Trust), &r)
	if err != nil {
		return nil, err
	}
	cands, m := plan.Ranked, &plan.Miss
	q := &ServiceQuote{Matching: len(cands), Replicas: s.Replicas, Budget: budget, MinBudget: minServiceBudget(s, s.Replicas, p), Best: []QuoteOffer{}}
	if m.Code != "" {
		miss := placementMiss(m, "") // Fit: len(cands); Need: s.Replicas
		q.Code, q.Miss, q.CheapestAsk = string(m.Code), &miss, m.CheapestAbove
	}
	var prices uint64
	for i, c := range cands {
		if uint64(i) < s.Replicas {
			q.PricePerHour = max(q.PricePerHour, c.Price)
			prices += c.Price
		}
		if i < 5 {
			q.Best = append(q.Best, QuoteOffer{Provider: c.Provider, PricePerHour: c.Price, Score: c.Score})
		}
	}
	q.RatePerHour = prices + protocolFee(prices, p)
	if budget > 0 && q.RatePerHour > 0 {
		q.LastsSeconds = mulDiv(budget, 3600, q.RatePerHour)
	}
	return q, nil
}
