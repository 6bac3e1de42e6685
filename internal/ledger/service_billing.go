package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Service billing and deadlines. On a chain with an active validator set
// a replica is paid for the periods witnesses saw it serve
// (service_serve.go), with the arithmetic below; on a chain without one,
// for the seconds its provider reported it ready, as follows. A replica
// is paid at its agreed price, from the service's escrow, with the protocol
// fee on top (as a job's provider is: protocolFee). Payment is cumulative:
// after any settlement a replica has been paid
//
//	paid = price_per_hour × ready_seconds / 3600, rounded down,
//
// and its fee is that of the total, so settling often never drifts from
// settling once. The time between two settlements counts as ready when the
// replica was ready at the earlier one (the provider's last report). A
// replica is settled at each heartbeat of its provider, when it is
// released or scaled away, and when the service stops; a replica dropped
// for silence or evicted is paid to its last heartbeat only.
//
// Each active service has one entry in the deadline index, at the earliest
// of: the budget warning (once), the end of its budget (RunsOutAt) and
// each replica's heartbeat timeout. expireServices handles them at the
// start of every block.

// charge is what settling r up to t would pay: the seconds, the cost and
// the fee.
func (r *Replica) charge(t int64, p Params) (secs, cost, fee uint64) {
	if !r.Ready || r.ReadyAt == 0 || t <= r.PaidUntil {
		return 0, 0, 0
	}
	secs = uint64(t - r.PaidUntil)
	total := mulDiv(r.PricePerHour, r.ReadySeconds+secs, 3600)
	return secs, total - min(total, r.Paid), protocolFee(total, p) - min(protocolFee(total, p), protocolFee(r.Paid, p))
}

// settleReplica pays r up to t. When the escrow cannot cover it all, it
// pays what the escrow holds and reports exhausted: the service must stop.
//
// On a chain with an active validator set, payment follows the
// witnesses' attestations instead (service_serve.go): settling only moves
// PaidUntil, and the provider's report pays nothing.
func settleReplica(o *Overlay, s *Service, r *Replica, t int64, p Params) (exhausted bool, err error) {
	secs, _, _ := r.charge(t, p)
	if t > r.PaidUntil {
		r.PaidUntil = t
	}
	if secs == 0 || witnessedBilling(o) {
		return false, nil
	}
	return payServed(o, s, r, secs, p)
}

// payReplica moves cost usync from s's escrow to r's provider and fee to
// the treasury.
func payReplica(o *Overlay, s *Service, r *Replica, cost, fee uint64) error {
	if cost+fee == 0 {
		return nil
	}
	if cost+fee > s.Escrow {
		return fmt.Errorf("service %d: escrow %d cannot cover %d + fee %d: %w", s.ID, s.Escrow, cost, fee, ErrInternal)
	}
	collectFee(o, fee)
	if s.Owner != r.Provider {
		// Demand for the epoch's emission, as a job's payment is
		// (notePayment); self-dealing does not count.
		d := getEpochDemand(o)
		d.Fees += fee
		d.Paid += cost
		setEpochDemand(o, d)
	}
	setUint(o, keyEscrow, Escrowed(o)-cost-fee)
	s.Escrow -= cost + fee
	s.Cost += cost
	s.Fee += fee
	r.Paid += cost
	acct, err := GetAccount(o, r.Provider)
	if err != nil {
		return err
	}
	acct.Balance += cost
	setAccount(o, &acct)
	if pr, ok, err := GetProvider(o, r.Provider); err != nil {
		return err
	} else if ok {
		pr.Earned += cost
		setProvider(o, pr)
	}
	return nil
}

// runsOutAt is when s's escrow ends at its ready replicas' rate, from
// now: 0 when nothing is being paid. With witnesses, what a replica is
// owed is counted from the end of its last paid period (or its ready
// time), as if it served since.
func (s *Service) runsOutAt(now int64, p Params, witnessed bool) int64 {
	var rate, owed uint64
	for i := range s.Replicas {
		r := &s.Replicas[i]
		if r.Ready && r.ReadyAt != 0 {
			rate += r.PricePerHour
			c, f := r.owed(now, p, witnessed)
			owed += c + f
		}
	}
	if rate == 0 {
		return 0
	}
	if owed >= s.Escrow {
		return now
	}
	secs := mulDiv(s.Escrow-owed, 3600, rate+protocolFee(rate, p))
	return now + int64(min(secs, 1<<40))
}

// owed is what r would be paid, and its fee, for the time to now that is
// not paid yet.
func (r *Replica) owed(now int64, p Params, witnessed bool) (cost, fee uint64) {
	if !witnessed {
		_, c, f := r.charge(now, p)
		return c, f
	}
	from := r.ReadyAt
	if r.ServedPeriod > 0 {
		from = max(from, int64((r.ServedPeriod+1)*p.ServiceServePeriod))
	}
	if now <= from {
		return 0, 0
	}
	total := mulDiv(r.PricePerHour, r.ReadySeconds+uint64(now-from), 3600)
	return total - min(total, r.Paid), protocolFee(total, p) - min(protocolFee(total, p), protocolFee(r.Paid, p))
}

// stopAt is when s is stopped for its budget: when it runs out, or, with
// witnesses, two periods later, so that the attestations of the periods
// up to its end, which come after each period, are in and paid (the
// escrow runs out then, and stops it).
func (s *Service) stopAt(p Params, witnessed bool) int64 {
	if s.RunsOutAt == 0 || !witnessed {
		return s.RunsOutAt
	}
	return s.RunsOutAt + 2*int64(p.ServiceServePeriod)
}

// dueAt is when r's provider must have reported next: a heartbeat timeout
// after its last report (or its placement), and, while it was never
// ready, its readiness start time plus that timeout after its placement.
func (r *Replica) dueAt(s *Service, p Params) int64 {
	t := max(r.HeartbeatAt, r.AssignedAt) + int64(p.ServiceHeartbeatTimeout)
	if r.ReadyAt == 0 {
		t = min(t, r.AssignedAt+int64(s.Spec.Readiness.StartSeconds+p.ServiceHeartbeatTimeout))
	}
	return t
}

// nextDeadline is the next block time at which s needs looking at.
func (s *Service) nextDeadline(p Params, witnessed bool) int64 {
	var d int64
	consider := func(t int64) {
		if t > 0 && (d == 0 || t < d) {
			d = t
		}
	}
	if s.RunsOutAt != 0 {
		if s.BudgetWarnedAt == 0 {
			consider(max(s.RunsOutAt-int64(p.ServiceBudgetWarning), 1))
		}
		consider(s.stopAt(p, witnessed))
	}
	for i := range s.Replicas {
		consider(s.Replicas[i].dueAt(s, p))
	}
	return d
}

// refreshService recomputes when s's budget runs out, warns its owner
// once when that is params.service_budget_warning away or closer, and
// stores it with its next deadline.
func refreshService(o *Overlay, s *Service, p Params, now, oldDeadline int64) []Event {
	var events []Event
	witnessed := witnessedBilling(o)
	prev := s.RunsOutAt
	s.RunsOutAt = s.runsOutAt(now, p, witnessed)
	if witnessed && prev != 0 && prev <= now && s.RunsOutAt == now {
		// Already owed all it holds: the budget ran out at prev, and
		// its stop (stopAt) must not slide with each refresh.
		s.RunsOutAt = prev
	}
	if s.RunsOutAt != 0 && s.BudgetWarnedAt == 0 && s.RunsOutAt-int64(p.ServiceBudgetWarning) <= now {
		s.BudgetWarnedAt = now
		events = append(events, serviceEvent("service_budget_low", s, Attr{"owner", s.Owner.String()},
			Attr{"runs_out_at", strconv.FormatInt(s.RunsOutAt, 10)}, Attr{"escrow", strconv.FormatUint(s.Escrow, 10)}))
	}
	s.Deadline = s.nextDeadline(p, witnessed)
	setService(o, s, oldDeadline)
	return events
}

// endReplica ends s's replica i: its slot, market reservation and index
// entry are freed and it joins the history, with why (its Code, Text and
// Seconds). exclude keeps its provider from being placed on again for s;
// failure counts it as a failure.
func endReplica(o *Overlay, s *Service, i int, now int64, why ReplicaEnd, exclude, failure bool) (Event, error) {
	r := s.Replicas[i]
	setMarker(o, serviceProvKey(r.Provider, s.ID), false)
	serviceMarketReserve(o, s, &r, -1)
	if err := releaseSlot(o, r.Provider, grantedSlot); err != nil {
		return Event{}, err
	}
	s.Replicas = slices.Delete(s.Replicas, i, i+1)
	s.Ended = append(s.Ended, ReplicaEnd{Provider: r.Provider, AssignedAt: r.AssignedAt, ReadyAt: r.ReadyAt, EndedAt: now,
		PricePerHour: r.PricePerHour, ReadySeconds: r.ReadySeconds, Paid: r.Paid, Code: why.Code, Text: why.Text, Seconds: why.Seconds})
	if n := len(s.Ended); n > MaxEndedReplicas {
		s.Ended = slices.Delete(s.Ended, 0, n-MaxEndedReplicas)
	}
	if exclude && !slices.Contains(s.Excluded, r.Provider) {
		s.Excluded = append(s.Excluded, r.Provider)
		if n := len(s.Excluded); n > MaxExcluded {
			s.Excluded = slices.Delete(s.Excluded, 0, n-MaxExcluded)
		}
	}
	if failure {
		s.Failures++
	}
	return serviceEvent("service_replica_ended", s, Attr{"provider", r.Provider.String()},
		Attr{"paid", strconv.FormatUint(r.Paid, 10)}, Attr{"why", why.Code}), nil
}

// finishService ends s in state (stopped or failed) for why: its
// replicas are paid to now (as far as the escrow goes) and end, and the
// rest of the escrow goes back to its owner.
func finishService(o *Overlay, s *Service, p Params, now, oldDeadline int64, state string, why Wait) ([]Event, error) {
	end := ReplicaEnd{Code: EndServiceStopped}
	if state == ServiceFailed {
		end.Code = EndServiceFailed
	}
	var events []Event
	for len(s.Replicas) > 0 {
		if _, err := settleReplica(o, s, &s.Replicas[0], now, p); err != nil {
			return nil, err
		}
		ev, err := endReplica(o, s, 0, now, end, false, false)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	owner, err := GetAccount(o, s.Owner)
	if err != nil {
		return nil, err
	}
	owner.Balance += s.Escrow
	setAccount(o, &owner)
	setUint(o, keyEscrow, Escrowed(o)-s.Escrow)
	s.Refund += s.Escrow
	s.Escrow = 0
	s.State, s.StoppedAt, s.RunsOutAt = state, now, 0
	s.setWait(&why)
	setService(o, s, oldDeadline)
	return append(events, serviceEvent("service_stopped", s, Attr{"state", state}, Attr{"reason", why.Code},
		Attr{"cost", strconv.FormatUint(s.Cost, 10)}, Attr{"refund", strconv.FormatUint(s.Refund, 10)})), nil
}

// budgetEnd says that s's budget ran out at now, and when its owner was
// warned.
func budgetEnd(s *Service, now int64) Wait {
	return Wait{Code: WaitBudgetRanOut, At: now, Warned: s.BudgetWarnedAt}
}

// expireServices handles the services whose deadline is at or before
// block time now: replicas whose provider stopped reporting or that never
// became ready, the budget warning and the budget's end.
func expireServices(o *Overlay, now int64, p Params) ([]Event, error) {
	var due []uint64
	o.Iterate(prefixServiceDue, serviceDueKey(now+1, 0), func(k, _ []byte) bool {
		due = append(due, binary.BigEndian.Uint64(k[len(prefixServiceDue)+8:]))
		return true
	})
	var events []Event
	for _, id := range due {
		s, err := mustService(o, id)
		if err != nil {
			return nil, err
		}
		if s.Done() {
			return nil, fmt.Errorf("deadline index names service %d, which is %s: %w", id, s.State, ErrInternal)
		}
		old := s.Deadline
		dropped := false
		for i := 0; i < len(s.Replicas); {
			r := &s.Replicas[i]
			var ev Event
			switch {
			case r.ReadyAt == 0 && r.AssignedAt+int64(s.Spec.Readiness.StartSeconds+p.ServiceHeartbeatTimeout) <= now:
				ev, err = endReplica(o, s, i, now, ReplicaEnd{Code: EndNotReady, Seconds: s.Spec.Readiness.StartSeconds}, true, true)
			case r.dueAt(s, p) <= now:
				// As a job's provider that does not report in time
				// (reassign): no pay past its last report, no slash;
				// the service places the replica elsewhere.
				ev, err = endReplica(o, s, i, now, ReplicaEnd{Code: EndSilent}, true, false)
			default:
				i++
				continue
			}
			if err != nil {
				return nil, err
			}
			dropped = true
			events = append(events, ev)
		}
		var evs []Event
		if stop := s.stopAt(p, witnessedBilling(o)); !dropped && stop != 0 && stop <= now {
			evs, err = finishService(o, s, p, now, old, ServiceStopped, budgetEnd(s, now))
		} else {
			evs, err = afterFailure(o, s, p, now, old, false)
		}
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

// dropServiceReplicasOf ends the replicas of a provider that went offline,
// as if it had stopped reporting: paid to its last heartbeat, excluded,
// replaced.
func dropServiceReplicasOf(o *Overlay, provider address.Address, p Params, info BlockInfo) ([]Event, error) {
	return endReplicasOf(o, provider, nil, ReplicaEnd{Code: EndOffline}, true, p, info.Time.Unix())
}

// endReplicasOf ends, for why, provider's replica of each service that
// only accepts (nil: every service), paid to its last heartbeat, excluded
// from the service if exclude, not a failure, and queues its replacement.
func endReplicasOf(o *Overlay, provider address.Address, only func(*Service) bool, why ReplicaEnd, exclude bool, p Params, now int64) ([]Event, error) {
	var events []Event
	for _, id := range ServicesOfProvider(o, provider) {
		s, err := mustService(o, id)
		if err != nil {
			return nil, err
		}
		if only != nil && !only(s) {
			continue
		}
		i := s.replica(provider)
		if i < 0 || s.Done() {
			return nil, fmt.Errorf("service index names %s for service %d, which has no replica there: %w", provider, id, ErrInternal)
		}
		old := s.Deadline
		ev, err := endReplica(o, s, i, now, why, exclude, false)
		if err != nil {
			return nil, err
		}
		evs, err := afterFailure(o, s, p, now, old, false)
		if err != nil {
			return nil, err
		}
		events = append(append(events, ev), evs...)
	}
	return events, nil
}

// hasServiceReplicas reports whether provider runs a replica of an active
// service: like a provider with unfinished jobs, its stake waits.
func hasServiceReplicas(kv KV, provider address.Address) bool {
	return len(ServicesOfProvider(kv, provider)) > 0
}
