package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
)

// Service placement, at the end of every block after the jobs': each
// service that wants more replicas than it has (svcq/) gets providers the
// way a job does (findCandidates on its JobView: the same offers, slots,
// market price and scoring), but never one it already runs on or one that
// gave back, dropped or was evicted from a replica of it (Excluded).

// serviceMarketReserve adds (d = +1) or removes (d = −1) what replica r of
// s reserves in its class, as a job's assignment does (marketReserve), so
// that the market's utilisation counts services. Self-dealing does not
// count.
func serviceMarketReserve(o *Overlay, s *Service, r *Replica, d int64) {
	if s.Owner == r.Provider {
		return
	}
	view := s.Spec.JobView()
	n := getMarketCounts(o, r.Class)
	n.reserved = addUnits(n.reserved, d*int64(view.Units()))
	setMarketCounts(o, r.Class, n)
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
	cands, v, err := findCandidates(o, &view, p, candidatesPerClass+len(s.Replicas)+len(s.Excluded), engineNeed{})
	if err != nil {
		return nil, err
	}
	excluded := 0
	cands = slices.DeleteFunc(cands, func(c candidate) bool {
		if slices.Contains(s.Excluded, c.addr) {
			excluded++
			return true
		}
		return s.replica(c.addr) >= 0
	})
	now := info.Time.Unix()
	old := s.Deadline
	var events []Event
	for _, c := range cands[:min(need, len(cands))] {
		pr, err := mustProvider(o, c.addr)
		if err != nil {
			return nil, err
		}
		before := *pr
		pr.Jobs++
		setProviderFrom(o, &before, pr)
		r := Replica{Provider: c.addr, PricePerHour: c.price, Class: c.class, AssignedAt: now}
		s.Replicas = append(s.Replicas, r)
		serviceMarketReserve(o, s, &r, +1)
		setMarker(o, serviceProvKey(c.addr, s.ID), true)
		s.Placements++
		events = append(events, serviceEvent("service_replica_placed", s, Attr{"provider", c.addr.String()},
			Attr{"price_per_hour", strconv.FormatUint(c.price, 10)}, Attr{"class", c.class}))
	}
	reason, code := "", ""
	if len(cands) < need {
		reason = fmt.Sprintf("waiting for %d more provider(s): %s", need-len(cands), v.String(&view))
		if excluded > 0 {
			reason += fmt.Sprintf("; %d that fit are excluded (they gave back, dropped or were evicted from a replica of it)", excluded)
		}
		code = v.code(cands, need)
	}
	if len(events) == 0 && s.Reason == reason && s.WaitCode == code {
		return nil, nil
	}
	s.Reason, s.WaitCode = reason, code
	return append(events, refreshService(o, s, p, now, old)...), nil
}
