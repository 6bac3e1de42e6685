package ledger

import (
	"fmt"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Settlement: a job's escrow, what each of its providers is paid and from
// where, and finishing a job (refund, providers released).

// Escrowed returns the total usync locked in job escrow.
func Escrowed(kv KV) uint64 { return getUint(kv, keyEscrow) }

// JobEscrow is what SubmitJob locks: the most the job can cost (max price ×
// its chargeable seconds × planned replicas) plus the protocol fee on that.
func JobEscrow(s *JobSpec, p Params) uint64 {
	most := mulDiv(s.MaxPricePerHour, chargeableSeconds(s, p), 3600) * s.PlannedReplicas()
	return most + mulDiv(most, p.ProtocolFeeBps, 10_000)
}

// chargeableSeconds is the most seconds one replica of the job can be
// charged: its run (the timeout) or, if the owner never grants the key,
// the slot it held until the grant deadline (holdCharge).
func chargeableSeconds(s *JobSpec, p Params) uint64 {
	return max(s.TimeoutSeconds, p.JobGrantTimeout)
}

// holdSeconds is how long a's slot has been held for a job that did not
// start it: from its placement to now, at most the grant timeout (after
// that the job no longer holds it).
func holdSeconds(a *Assignment, p Params, now int64) uint64 {
	return min(uint64(max(now-a.AssignedAt, 0)), p.JobGrantTimeout)
}

// chargeHold pays a provider whose slot a job held without running it (the
// owner did not grant the key in time, or cancelled first) for the seconds
// it was held at its agreed price: from the escrow, with the protocol fee,
// for a replica the owner planned; from the treasury for an audit or
// escalation replica, as that replica's run would have been. Holding a
// slot thus costs what running in it costs, so blocking providers is no
// cheaper than using them.
func chargeHold(o *Overlay, j *Job, a *Assignment, p Params, now int64) error {
	cost := mulDiv(a.PricePerHour, holdSeconds(a, p, now), 3600)
	if a.Extra {
		return payFromTreasury(o, j, a, cost)
	}
	return payProvider(o, j, a, min(cost, mulDiv(j.Escrow, 10_000, 10_000+p.ProtocolFeeBps)), p)
}

// payProvider moves cost (capped by what the escrow holds) and its fee out
// of the job's escrow.
func payProvider(o *Overlay, j *Job, a *Assignment, cost uint64, p Params) error {
	fee := mulDiv(cost, p.ProtocolFeeBps, 10_000)
	if cost+fee > j.Escrow {
		return fmt.Errorf("job %d: escrow %d cannot cover %d + fee %d: %w", j.ID, j.Escrow, cost, fee, ErrInternal)
	}
	acct, err := GetAccount(o, a.Provider)
	if err != nil {
		return err
	}
	acct.Balance += cost
	setAccount(o, &acct)
	if pr, ok, err := GetProvider(o, a.Provider); err != nil {
		return err
	} else if ok {
		pr.Earned += cost
		setProvider(o, pr)
	}
	setUint(o, keyTreasury, Treasury(o)+fee)
	setUint(o, keyEscrow, Escrowed(o)-cost-fee)
	j.Escrow -= cost + fee
	j.Cost += cost
	j.Fee += fee
	a.Paid += cost
	return nil
}

// payFromTreasury pays an audit or escalation replica, as far as the
// treasury can.
func payFromTreasury(o *Overlay, j *Job, a *Assignment, cost uint64) error {
	cost = min(cost, Treasury(o))
	acct, err := GetAccount(o, a.Provider)
	if err != nil {
		return err
	}
	acct.Balance += cost
	setAccount(o, &acct)
	if pr, ok, err := GetProvider(o, a.Provider); err != nil {
		return err
	} else if ok {
		pr.Earned += cost
		setProvider(o, pr)
	}
	setUint(o, keyTreasury, Treasury(o)-cost)
	a.Paid += cost
	j.AuditCost += cost
	return nil
}

// finishJob refunds what is left of the escrow and releases the providers.
func finishJob(o *Overlay, j *Job, info BlockInfo) ([]Event, error) {
	old := j.Deadline
	owner, err := GetAccount(o, j.Owner)
	if err != nil {
		return nil, err
	}
	owner.Balance += j.Escrow
	setAccount(o, &owner)
	setUint(o, keyEscrow, Escrowed(o)-j.Escrow)
	j.Refund += j.Escrow
	j.Escrow = 0
	j.FinishedAt = info.Time.Unix()
	j.Deadline = 0
	for _, a := range j.Assignments {
		if err := releaseProvider(o, a.Provider, j.ID, a.holdsSlot()); err != nil {
			return nil, err
		}
	}
	dequeueJob(o, j.ID)
	setJob(o, j, old)
	return []Event{jobEvent("job_"+j.State, j, Attr{"cost", strconv.FormatUint(j.Cost, 10)}, Attr{"refund", strconv.FormatUint(j.Refund, 10)})}, nil
}

// releaseProvider ends a provider's part in a job, and frees its slot if
// the assignment still held one.
func releaseProvider(o *Overlay, provider address.Address, id uint64, slot bool) error {
	o.Delete(jobProvKey(provider, id))
	if !slot {
		return nil
	}
	return releaseSlot(o, provider)
}

func releaseSlot(o *Overlay, provider address.Address) error {
	p, ok, err := GetProvider(o, provider)
	if err != nil || !ok {
		return err
	}
	if p.Jobs > 0 {
		p.Jobs--
	}
	setProvider(o, p)
	return nil
}
