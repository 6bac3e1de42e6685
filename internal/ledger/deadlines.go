package ledger

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// Job deadlines. At the start of every block expireJobs takes each job whose
// current step is overdue (grant, start, result, reveal, extra replica) and
// decides what happens: a verdict with the replicas there are, a
// reassignment to other providers, dropped extra replicas, or a failed job.
// reassignJobsOf does the same for the jobs of a provider that went
// offline.

// How long a job can stay verifying. Every step after a job's first
// committed result has a deadline, and each missed deadline either ends the
// job or asks for one more replica, which the job's placement budget
// bounds: replacements (reassign) and escalations (decide) are asked for
// only while the job has had fewer than job_max_attempts + max_replicas
// placements, the audit once, and an escalation replica that could not be
// added ends the asking (dropReplicas decides for good). So a job never
// stays verifying for longer than VerifyingBound, and in the case that
// matters most (every replica committed, one did not reveal, nobody free to
// check the other) no longer than VerdictWindow after the last commit.

// VerdictWindow is how long a job whose replicas have all committed waits
// for its verdict when no further replica joins it: the reveal window,
// then the grant window in which the escalation replica it asks for must
// be placed, after which it is decided with the replicas it has.
func VerdictWindow(p Params) uint64 { return p.RevealTimeout + p.JobGrantTimeout }

// replicaRound is the longest one replica added to a committed job (audit,
// escalation or replacement) takes from the block the job asks for it to
// the end of the reveal window after its commit: placement and its key
// (three grant windows: to be placed, to be granted, restarted once by its
// handover request), its start, its run and the result grace, the reveal.
// A job with a compare rule may follow each reveal with a judging round
// (judgment.go): a commit window and a reveal window, 2 × reveal_timeout.
func replicaRound(s *JobSpec, p Params) uint64 {
	r := 3*p.JobGrantTimeout + p.JobStartTimeout + s.TimeoutSeconds + p.JobResultGrace + p.RevealTimeout
	if s.Compare != nil {
		r += 2 * p.RevealTimeout
	}
	return r
}

// VerifyingBound is the most seconds of block time from a job's first
// committed result to its final state, whatever its providers and its
// owner do: one round (replicaRound) for the rest of its first placement
// and one per replica the job may still ask for (its placement budget,
// plus one that is asked for and never placed). It does not hold for a
// spot-tier job preempted by a higher tier: that goes back to the queue and
// starts over.
func VerifyingBound(s *JobSpec, p Params) uint64 {
	return (p.JobMaxAttempts + p.MaxReplicas + 2) * replicaRound(s, p)
}

// expireJobs handles jobs whose current step is overdue at block time now.
func expireJobs(o *Overlay, now int64, p Params, info BlockInfo) ([]Event, error) {
	var due []uint64
	o.Iterate(prefixJobDue, jobDueKey(now+1, 0), func(k, _ []byte) bool {
		due = append(due, binary.BigEndian.Uint64(k[len(prefixJobDue)+8:]))
		return true
	})
	var events []Event
	for _, id := range due {
		j, err := mustJob(o, id)
		if err != nil {
			return nil, err
		}
		var evs []Event
		switch {
		case j.Done():
			o.Delete(jobDueKey(j.Deadline, id))
			continue
		case j.preemptAt() != 0 && j.preemptAt() <= now:
			// A higher tier takes the slot (market_preempt.go).
			evs, err = requeuePreempted(o, j, p, info)
		case j.Judging:
			// A judging round's window closed: its reveals open, or it
			// is settled with the judgments there are (judgment.go).
			evs, err = expireJudging(o, j, p, info)
		case j.Revealing:
			// Replicas that did not open their commitment in time do not
			// vote.
			evs, err = decide(o, j, p, info, true)
		case j.queuedForReplica() && j.committed() > 0:
			// No provider took the extra replica in time: go on with the
			// replicas there are.
			evs, err = dropReplicas(o, j, nil, Wait{Code: DropNotPlaced}, p, info)
		case !allGranted(j) && j.committed() == 0:
			// Every provider placed on it held a slot until now: the
			// owner pays for that time, and gets the rest back.
			for i := range j.Assignments {
				if err := chargeHold(o, j, &j.Assignments[i], p, now); err != nil {
					return nil, err
				}
			}
			j.State = JobFailed
			j.setWait(Wait{Code: WaitKeyNotGranted, Amount: j.Cost})
			evs, err = finishJob(o, j, info)
		case !allGranted(j) && j.KeyCommitment != nil && slices.ContainsFunc(j.Assignments, func(a Assignment) bool { return a.waitsForHandover() }):
			evs, err = failWithheldHandover(o, j, p, info)
		case !allGranted(j):
			var ungranted []address.Address
			for i := range j.Assignments {
				a := &j.Assignments[i]
				if a.KeyGrant == nil {
					if err := chargeHold(o, j, a, p, now); err != nil {
						return nil, err
					}
					ungranted = append(ungranted, a.Provider)
				}
			}
			evs, err = dropReplicas(o, j, ungranted, Wait{Code: DropNotGranted}, p, info)
		default:
			var late []address.Address
			for _, a := range j.Assignments {
				if a.Commitment == nil && a.Result == nil {
					late = append(late, a.Provider)
				}
			}
			cause := CauseNotStarted
			if j.State != JobAssigned {
				cause = CauseNoResult
			}
			evs, err = reassign(o, j, late, Wait{Cause: cause}, p, info)
		}
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

// reassign takes the job away from the given providers and queues it for
// others, or gives up when it has been placed too often. They are paid
// only for what their checkpoints kept (keepCheckpointed). Replicas that
// already committed keep their place: only the gone ones are replaced.
// why says why they go: its Cause and Text (the job's Wait gets its code
// here).
func reassign(o *Overlay, j *Job, gone []address.Address, why Wait, p Params, info BlockInfo) ([]Event, error) {
	// A replicated gang that has results loses whole replica gangs: the
	// ones gone belong to (gang_verify.go); the other gangs go on.
	keepGangs := replicated(j) && j.committed() > 0
	if keepGangs {
		gone = wholeGangs(j, gone)
	}
	removed := gone
	if j.committed() == 0 || (j.Spec.Gang() && !keepGangs) {
		removed = make([]address.Address, len(j.Assignments))
		for i, a := range j.Assignments {
			removed[i] = a.Provider
		}
	}
	kept, err := keepCheckpointed(o, j, removed, p)
	if err != nil {
		return nil, err
	}
	why = resumeWait(why, j, kept)
	why.Providers = gone
	// A gang stops as a whole when it loses a member (gang.go): it is
	// placed again, all its members with it, whatever some reported.
	if j.committed() > 0 && (!j.Spec.Gang() || keepGangs) {
		if j.Attempts >= p.JobMaxAttempts+p.MaxReplicas {
			why.Code = DropNoMoreReplacements
			return dropReplicas(o, j, gone, why, p, info)
		}
		old := j.Deadline
		if err := releaseProviders(o, j, gone); err != nil {
			return nil, err
		}
		j.Assignments = slices.DeleteFunc(j.Assignments, func(a Assignment) bool { return slices.Contains(gone, a.Provider) })
		j.State = JobVerifying
		why.Code = WaitReplacing
		j.setWait(why)
		j.Deadline = info.Time.Unix() + int64(p.JobGrantTimeout)
		enqueueJob(o, j)
		setJob(o, j, old)
		return []Event{jobEvent("job_reassigned", j, Attr{"providers", joinAddrs(gone)})}, nil
	}
	old := j.Deadline
	if err := releaseProviders(o, j, gone); err != nil {
		return nil, err
	}
	names := joinAddrs(gone)
	if j.Attempts >= p.JobMaxAttempts {
		j.State = JobFailed
		why.Code, why.Count = WaitGaveUp, j.Attempts
		j.setWait(why)
		return finishJob(o, j, info)
	}
	// Nothing committed yet: every replica restarts, so that the results
	// come from one placement.
	for i := range j.Assignments {
		if a := &j.Assignments[i]; !slices.Contains(gone, a.Provider) {
			if err := releaseAssignment(o, j, a); err != nil {
				return nil, err
			}
		}
	}
	j.Assignments = []Assignment{}
	j.State = JobQueued
	why.Code = WaitRequeued
	j.setWait(why)
	j.Deadline = 0
	enqueueJob(o, j)
	setJob(o, j, old)
	return []Event{jobEvent("job_reassigned", j, Attr{"providers", names})}, nil
}

// dropReplicas gives up on extra replicas that did not commit: the job goes
// on with the replicas that did. When results were revealed already, the
// dropped replica was an escalation's, and the job is decided for good
// with the replicas it has (decide, mayEscalate false). why is a Drop*
// code and its numbers.
func dropReplicas(o *Overlay, j *Job, gone []address.Address, why Wait, p Params, info BlockInfo) ([]Event, error) {
	if replicated(j) {
		gone = wholeGangs(j, gone) // a replica gang goes whole (gang_verify.go)
	}
	if err := releaseProviders(o, j, gone); err != nil {
		return nil, err
	}
	j.Assignments = slices.DeleteFunc(j.Assignments, func(a Assignment) bool { return slices.Contains(gone, a.Provider) })
	j.Replicas = uint64(len(j.Assignments))
	j.Dropped, j.AuditDropped = &why, ""
	dequeueJob(o, j.ID)
	events := []Event{jobEvent("job_replicas_dropped", j, Attr{"providers", joinAddrs(gone)}, Attr{"why", why.Code})}
	var evs []Event
	var err error
	if revealed(j) > 0 || !j.Spec.Checked() {
		evs, err = decide(o, j, p, info, false)
	} else {
		evs, err = openReveal(o, j, p, info)
	}
	return append(events, evs...), err
}

// reassignJobsOf moves the unfinished jobs, and the service replicas, of a
// provider that went offline.
func reassignJobsOf(o *Overlay, provider address.Address, p Params, info BlockInfo) ([]Event, error) {
	var events []Event
	for _, id := range ActiveJobsOf(o, provider) {
		j, err := mustJob(o, id)
		if err != nil {
			return nil, err
		}
		if j.Done() {
			o.Delete(jobProvKey(provider, id))
			continue
		}
		if a := j.assignment(provider); a != nil && (a.Commitment != nil || a.Result != nil) {
			continue // it delivered; waiting for the other replicas
		}
		evs, err := reassign(o, j, []address.Address{provider}, Wait{Cause: CauseOffline}, p, info)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	// Its service replicas are dropped and placed elsewhere too.
	evs, err := dropServiceReplicasOf(o, provider, p, info)
	return append(events, evs...), err
}

// releaseProviders releases the assignments of j to the providers gone
// (releaseAssignment), before the caller removes them from j.
func releaseProviders(o *Overlay, j *Job, gone []address.Address) error {
	for _, g := range gone {
		a := j.assignment(g)
		if a == nil {
			o.Delete(jobProvKey(g, j.ID))
			continue
		}
		if err := releaseAssignment(o, j, a); err != nil {
			return err
		}
	}
	return nil
}

func joinAddrs(as []address.Address) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.String()
	}
	return strings.Join(names, ",")
}
