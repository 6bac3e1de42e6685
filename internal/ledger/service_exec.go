package ledger

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// The handlers of the service messages (msg_service.go). Payment and
// deadlines are in service_billing.go, placement in service_place.go.

// syncString is usync as SYNC, without trailing zeros, for the errors of
// this file: an error answers a message, it is never part of a record.
func syncString(usync uint64) string {
	s := fmt.Sprintf("%d.%06d", usync/1_000_000, usync%1_000_000)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".") + " SYNC"
}

// minServiceBudget is the least budget a service of spec with n replicas
// may lock: a minute of n replicas at its price ceiling, fee included.
func minServiceBudget(spec *ServiceSpec, n uint64, p Params) uint64 {
	cost := mulDiv(spec.MaxPricePerHour, 60*n, 3600)
	return cost + protocolFee(cost, p)
}

// ownService reads a service its owner acts on: it must exist, be the
// sender's and be active.
func ownService(o *Overlay, from address.Address, id uint64) (*Service, error) {
	s, err := mustService(o, id)
	if err != nil {
		return nil, err
	}
	if s.Owner != from {
		return nil, fmt.Errorf("service %d belongs to %s, not %s: %w", id, s.Owner, from, ErrNotServiceParty)
	}
	if s.Done() {
		return nil, fmt.Errorf("service %d is %s: %w", id, s.State, ErrServiceState)
	}
	return s, nil
}

func execDeployService(o *Overlay, from address.Address, m *MsgDeployService, p Params, info BlockInfo) ([]Event, error) {
	acct, err := GetAccount(o, from)
	if err != nil {
		return nil, err
	}
	if acct.Balance < m.Budget {
		return nil, fmt.Errorf("budget %s is more than the balance %s: %w", syncString(m.Budget), syncString(acct.Balance), ErrInsufficientFunds)
	}
	if least := minServiceBudget(&m.Spec, m.Spec.Replicas, p); m.Budget < least {
		return nil, invalid("budget %s covers less than a minute of %d replicas at %s/h (max_price) plus the protocol fee: at least %s",
			syncString(m.Budget), m.Spec.Replicas, syncString(m.Spec.MaxPricePerHour), syncString(least))
	}
	id := getUint(o, keyNextService) + 1
	setUint(o, keyNextService, id)
	acct.Balance -= m.Budget
	setAccount(o, &acct)
	setUint(o, keyEscrow, Escrowed(o)+m.Budget)
	s := &Service{
		ID: id, Owner: from, Spec: m.Spec, ConsumerKey: m.ConsumerKey, State: ServiceActive,
		Public: m.Public, KeyHashes: slices.Clone(m.KeyHashes),
		Budget: m.Budget, Escrow: m.Budget,
		CreatedAt: info.Time.Unix(), Height: uint64(info.Height),
		Replicas: []Replica{},
	}
	o.Set(serviceOwnerKey(from, id), []byte{1})
	setService(o, s, 0)
	return []Event{serviceEvent("service_deployed", s, Attr{"owner", from.String()},
		Attr{"replicas", strconv.FormatUint(s.Spec.Replicas, 10)}, Attr{"budget", strconv.FormatUint(s.Budget, 10)})}, nil
}

func execTopUpService(o *Overlay, from address.Address, m *MsgTopUpService, p Params, info BlockInfo) ([]Event, error) {
	s, err := mustService(o, m.ServiceID)
	if err != nil {
		return nil, err
	}
	if s.Done() {
		return nil, fmt.Errorf("service %d is %s: %w", s.ID, s.State, ErrServiceState)
	}
	acct, err := GetAccount(o, from)
	if err != nil {
		return nil, err
	}
	if acct.Balance < m.Amount {
		return nil, fmt.Errorf("top-up %s is more than the balance %s: %w", syncString(m.Amount), syncString(acct.Balance), ErrInsufficientFunds)
	}
	acct.Balance -= m.Amount
	setAccount(o, &acct)
	setUint(o, keyEscrow, Escrowed(o)+m.Amount)
	old := s.Deadline
	s.Budget += m.Amount
	s.Escrow += m.Amount
	s.BudgetWarnedAt = 0
	return refreshService(o, s, p, info.Time.Unix(), old), nil
}

func execScaleService(o *Overlay, from address.Address, m *MsgScaleService, p Params, info BlockInfo) ([]Event, error) {
	s, err := ownService(o, from, m.ServiceID)
	if err != nil {
		return nil, err
	}
	if least := minServiceBudget(&s.Spec, m.Replicas, p); m.Replicas > s.Spec.Replicas && s.Escrow < least {
		return nil, fmt.Errorf("the escrow %s covers less than a minute of %d replicas at %s/h (max_price) plus the protocol fee (%s): top it up first: %w",
			syncString(s.Escrow), m.Replicas, syncString(s.Spec.MaxPricePerHour), syncString(least), ErrInsufficientFunds)
	}
	now := info.Time.Unix()
	old := s.Deadline
	s.Spec.Replicas = m.Replicas
	var events []Event
	for uint64(len(s.Replicas)) > m.Replicas {
		// The dearest replica goes first; of equal prices the one placed
		// last.
		i := 0
		for k, r := range s.Replicas {
			if r.PricePerHour > s.Replicas[i].PricePerHour || (r.PricePerHour == s.Replicas[i].PricePerHour && r.AssignedAt >= s.Replicas[i].AssignedAt) {
				i = k
			}
		}
		if _, err := settleReplica(o, s, &s.Replicas[i], now, p); err != nil {
			return nil, err
		}
		ev, err := endReplica(o, s, i, now, ReplicaEnd{Code: EndScaledDown}, false, false)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	if s.Escrow == 0 {
		evs, err := finishService(o, s, p, now, old, ServiceStopped, budgetEnd(s, now))
		return append(events, evs...), err
	}
	return append(events, refreshService(o, s, p, now, old)...), nil
}

func execStopService(o *Overlay, from address.Address, m *MsgStopService, p Params, info BlockInfo) ([]Event, error) {
	s, err := ownService(o, from, m.ServiceID)
	if err != nil {
		return nil, err
	}
	now := info.Time.Unix()
	return finishService(o, s, p, now, s.Deadline, ServiceStopped, Wait{Code: WaitStoppedByOwner, At: now})
}

func execSetServiceAccess(o *Overlay, from address.Address, m *MsgSetServiceAccess) ([]Event, error) {
	s, err := ownService(o, from, m.ServiceID)
	if err != nil {
		return nil, err
	}
	s.Public, s.KeyHashes = m.Public, slices.Clone(m.KeyHashes)
	setService(o, s, s.Deadline)
	return nil, nil
}

func execServiceHeartbeat(o *Overlay, from address.Address, m *MsgServiceHeartbeat, p Params, info BlockInfo) ([]Event, error) {
	if _, err := mustProvider(o, from); err != nil {
		return nil, err
	}
	now := info.Time.Unix()
	var events []Event
	for _, st := range m.Replicas {
		s, ok, err := GetService(o, st.ServiceID)
		if err != nil {
			return nil, err
		}
		i := -1
		if ok && !s.Done() {
			i = s.replica(from)
		}
		if i < 0 {
			// Stopped, scaled down or moved since the agent last looked:
			// nothing to report on.
			continue
		}
		old := s.Deadline
		r := &s.Replicas[i]
		// The time since the last report is paid if the replica was
		// ready then.
		exhausted, err := settleReplica(o, s, r, now, p)
		if err != nil {
			return nil, err
		}
		if witnessedBilling(o) && r.unwitnessed(o, now, p) {
			// Reported ready, yet no quorum of witnesses saw it serve
			// while they saw others serve (service_serve.go): given
			// back and placed elsewhere, not slashed.
			ev, err := endReplica(o, s, i, now, ReplicaEnd{Code: EndUnwitnessed, Seconds: unwitnessedSeconds(p)}, true, true)
			if err != nil {
				return nil, err
			}
			evs, err := afterFailure(o, s, p, now, old, exhausted)
			if err != nil {
				return nil, err
			}
			events = append(append(events, ev), evs...)
			continue
		}
		r.Ready, r.Relay, r.HeartbeatAt = st.Ready, st.Relay, now
		if st.Ready && r.ReadyAt == 0 {
			r.ReadyAt, r.PaidUntil = now, now
			events = append(events, serviceEvent("service_replica_ready", s, Attr{"provider", from.String()}))
		}
		if s.stableReplica(now, p) {
			s.Failures = 0
		}
		if exhausted {
			evs, err := finishService(o, s, p, now, old, ServiceStopped, budgetEnd(s, now))
			if err != nil {
				return nil, err
			}
			events = append(events, evs...)
			continue
		}
		events = append(events, refreshService(o, s, p, now, old)...)
	}
	return events, nil
}

func execReleaseReplica(o *Overlay, from address.Address, m *MsgReleaseReplica, p Params, info BlockInfo) ([]Event, error) {
	s, err := mustService(o, m.ServiceID)
	if err != nil {
		return nil, err
	}
	if s.Done() {
		return nil, fmt.Errorf("service %d is %s: %w", s.ID, s.State, ErrServiceState)
	}
	i := s.replica(from)
	if i < 0 {
		return nil, fmt.Errorf("%s runs no replica of service %d: %w", from, s.ID, ErrNotServiceParty)
	}
	now := info.Time.Unix()
	old := s.Deadline
	exhausted, err := settleReplica(o, s, &s.Replicas[i], now, p)
	if err != nil {
		return nil, err
	}
	ev, err := endReplica(o, s, i, now, ReplicaEnd{Code: EndReleased, Text: m.Reason}, true, true)
	if err != nil {
		return nil, err
	}
	evs, err := afterFailure(o, s, p, now, old, exhausted)
	return append([]Event{ev}, evs...), err
}

func execEvictReplica(o *Overlay, from address.Address, m *MsgEvictReplica, p Params, info BlockInfo) ([]Event, error) {
	s, err := ownService(o, from, m.ServiceID)
	if err != nil {
		return nil, err
	}
	i := s.replica(m.Provider)
	if i < 0 {
		return nil, fmt.Errorf("%s runs no replica of service %d: %w", m.Provider, s.ID, ErrNotServiceParty)
	}
	now := info.Time.Unix()
	old := s.Deadline
	// Paid to its last heartbeat only: the owner says it did not serve
	// since.
	ev, err := endReplica(o, s, i, now, ReplicaEnd{Code: EndEvicted, Text: m.Reason}, true, false)
	if err != nil {
		return nil, err
	}
	return append([]Event{ev}, refreshService(o, s, p, now, old)...), nil
}

// afterFailure stores s after one of its replicas failed: it stops the
// service whose budget ran out, fails it when too many replicas failed
// while none was stable, and otherwise refreshes its deadline (the
// replacement is queued by setService).
func afterFailure(o *Overlay, s *Service, p Params, now, old int64, exhausted bool) ([]Event, error) {
	switch {
	case exhausted || s.Escrow == 0:
		return finishService(o, s, p, now, old, ServiceStopped, budgetEnd(s, now))
	case s.Failures >= p.ServiceMaxFailures && !s.stableReplica(now, p):
		why := Wait{Code: WaitReplicasFailed, Count: s.Failures, Limit: p.ServiceStableSeconds}
		if n := len(s.Ended); n > 0 {
			// The last: its code, and its text or seconds (only one
			// of them is set).
			last := s.Ended[n-1]
			why.Cause, why.Text, why.Seconds = last.Code, last.Text, last.Seconds
			if last.Code == "" { // ended before issue 28: its sentence
				why.Cause, why.Text = EndLegacy, last.Why
			}
		}
		return finishService(o, s, p, now, old, ServiceFailed, why)
	}
	return refreshService(o, s, p, now, old), nil
}

// stableReplica reports whether one of s's replicas has been ready for
// params.service_stable_seconds.
func (s *Service) stableReplica(now int64, p Params) bool {
	for _, r := range s.Replicas {
		if r.Ready && r.ReadyAt != 0 && now-r.ReadyAt >= int64(p.ServiceStableSeconds) {
			return true
		}
	}
	return false
}
