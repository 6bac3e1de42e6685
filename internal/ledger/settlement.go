package ledger

import (
	"fmt"
	"strconv"
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

// escrowNeeded is what unfinished job j may still be charged, which its
// escrow must cover: the planned replicas at their agreed price (at the
// job's ceiling for those not placed) for their chargeable seconds (the
// timeout, or the slot held to the grant deadline), less the progress a
// resumed job has paid for (RunBudget), fee included.
func escrowNeeded(j *Job, p Params) uint64 {
	secs := chargeableSeconds(&j.Spec, p) - min(j.Progress, chargeableSeconds(&j.Spec, p)-1)
	// Each charge carries the protocol fee, as payments charge it.
	withFee := func(c uint64) uint64 { return c + protocolFee(c, p) }
	var most, regular uint64
	for _, a := range j.Assignments {
		if !a.Extra {
			regular++
			most += withFee(mulDiv(a.PricePerHour, secs, 3600))
		}
	}
	if planned := j.Spec.PlannedReplicas(); regular < planned {
		most += withFee(mulDiv(j.Spec.MaxPricePerHour, secs, 3600)) * (planned - regular)
	}
	return most
}

// holdSeconds is how long a's slot has been held for a job that did not
// start it: from its placement to now, at most the grant timeout (after
// that the job no longer holds it).
func holdSeconds(a *Assignment, p Params, now int64) uint64 {
	return min(uint64(max(now-a.AssignedAt, 0)), p.JobGrantTimeout)
}

// chargeHold pays a provider whose slot a job held without running it (the
// owner did not grant the key in time, or cancelled first) for the seconds
// it was held at its agreed price, as that replica's run would have been
// paid (payAssignment). Holding a slot thus costs what running in it costs,
// so blocking providers is no cheaper than using them.
func chargeHold(o *Overlay, j *Job, a *Assignment, p Params, now int64) error {
	return payForTime(o, j, a, holdSeconds(a, p, now), p)
}

// payForTime pays a's provider for secs seconds at its agreed price, for
// time held or run rather than a result delivered: a replica the owner
// planned gets what the job's escrow can still pay, fee included, rather
// than the tx failing.
func payForTime(o *Overlay, j *Job, a *Assignment, secs uint64, p Params) error {
	cost := mulDiv(a.PricePerHour, secs, 3600)
	if !a.Extra {
		cost = min(cost, mulDiv(j.Escrow, 10_000, 10_000+p.ProtocolFeeBps))
	}
	return payAssignment(o, j, a, cost, p)
}

// payAssignment pays a's provider cost usync for its part in job j, from
// where that replica is paid: a replica the owner planned from the job's
// escrow, with the protocol fee on top to the treasury (the escrow must
// cover both); an audit or escalation replica (Extra) from the treasury, as
// far as the treasury holds. Every payment to a job's provider goes through
// here: a verdict's (decide), a cancel's and a held slot's (payForTime).
func payAssignment(o *Overlay, j *Job, a *Assignment, cost uint64, p Params) error {
	if a.Extra {
		cost = min(cost, Treasury(o))
		setUint(o, keyTreasury, Treasury(o)-cost)
		j.AuditCost += cost
	} else {
		fee := protocolFee(cost, p)
		if cost+fee > j.Escrow {
			return fmt.Errorf("job %d: escrow %d cannot cover %d + fee %d: %w", j.ID, j.Escrow, cost, fee, ErrInternal)
		}
		collectFee(o, fee)
		notePayment(o, j, a, cost, fee)
		setUint(o, keyEscrow, Escrowed(o)-cost-fee)
		j.Escrow -= cost + fee
		j.Cost += cost
		j.Fee += fee
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
	a.Paid += cost
	return nil
}

// protocolFee is the protocol fee on a payment of cost usync to a
// provider, paid by the consumer to the treasury on top of it: jobs
// (payAssignment) and services (payReplica) alike.
func protocolFee(cost uint64, p Params) uint64 { return mulDiv(cost, p.ProtocolFeeBps, 10_000) }

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
	for i := range j.Assignments {
		if err := releaseAssignment(o, j, &j.Assignments[i]); err != nil {
			return nil, err
		}
	}
	dequeueJob(o, j.ID)
	setJob(o, j, old)
	return []Event{jobEvent("job_"+j.State, j, Attr{"cost", strconv.FormatUint(j.Cost, 10)}, Attr{"refund", strconv.FormatUint(j.Refund, 10)})}, nil
}
