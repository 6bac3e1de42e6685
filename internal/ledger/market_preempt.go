package ledger

import (
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// Preemption: a job of a higher tier than spot that no free capacity fits
// takes the slot of a spot job that fits it but for the slot. The spot
// assignment gets params.preempt_grace_seconds (Assignment.PreemptAt) to
// checkpoint (checkpoint.go; its agent sees PreemptAt on the job), then
// the spot job is requeued: not failed, the placement not counted against
// job_max_attempts nor held against the provider, and the provider paid
// for the seconds it ran, or, when the job resumes from a checkpoint, for
// the seconds that checkpoint covers. The preempting job waits in its
// queue (the priority queue is placed first) and takes a slot when one
// frees; it looks for more spot jobs to preempt at most once per grace
// period (Job.PreemptWait), so that it never preempts more than it needs.

// preemptAt is the earliest grace end of the job's preempted assignments
// that still hold a slot (0 for none).
func (j *Job) preemptAt() int64 {
	var at int64
	for i := range j.Assignments {
		a := &j.Assignments[i]
		if a.PreemptAt != 0 && a.holdsSlot() && (at == 0 || a.PreemptAt < at) {
			at = a.PreemptAt
		}
	}
	return at
}

// preemptSpot marks up to need spot assignments on the busy offers for
// preemption in favour of j. It returns their events and what j's
// PlacementMiss should add (its PreemptWait, Preempting and PreemptAt).
func preemptSpot(o *Overlay, j *Job, busy []sched.Pick, need int, p Params, info BlockInfo) ([]Event, PlacementMiss, error) {
	var miss PlacementMiss
	rank := tierRank(j.Spec.TierName())
	if need <= 0 || len(busy) == 0 || rank <= tierRank(TierSpot) || len(j.Assignments) > 0 {
		return nil, miss, nil
	}
	now := info.Time.Unix()
	if now < j.PreemptWait {
		miss.PreemptWait = j.PreemptWait
		return nil, miss, nil
	}
	at := now + int64(p.PreemptGraceSeconds)
	var events []Event
	n := 0
	for _, c := range busy {
		if n >= need {
			break
		}
		for _, id := range ActiveJobsOf(o, c.Provider) {
			v, err := mustJob(o, id)
			if err != nil {
				return nil, miss, err
			}
			// One replica, nothing committed: requeueing it loses no
			// result and blames no one.
			if v.Done() || v.ID == j.ID || v.Spec.TierName() != TierSpot || len(v.Assignments) != 1 || v.committed() > 0 {
				continue
			}
			a := v.assignment(c.Provider)
			if a == nil || a.Extra || !a.holdsSlot() || a.PreemptAt != 0 {
				continue
			}
			old := v.Deadline
			a.PreemptAt = at
			v.setWait(Wait{Code: WaitPreempted, Tier: j.Spec.TierName(), Job: j.ID, Providers: []address.Address{c.Provider}, At: at})
			setJob(o, v, old)
			events = append(events, jobEvent("job_preempted", v, Attr{"provider", c.Provider.String()}, Attr{"by", strconv.FormatUint(j.ID, 10)}, Attr{"at", strconv.FormatInt(at, 10)}))
			n++
			break
		}
	}
	j.PreemptWait = at
	if n == 0 {
		return nil, miss, nil
	}
	miss.Preempting, miss.PreemptAt = uint64(n), at
	return events, miss, nil
}

// requeuePreempted requeues a spot job whose preempted assignment's grace
// ended: it resumes from its latest checkpoint, if it has one
// (keepCheckpointed), each provider is paid for the seconds it ran (the
// seconds the checkpoint covers, if one is kept; the slot it held, if it
// had not started), and the escrow is topped up from
// the owner's balance to cover a whole run again. An owner who cannot pay
// that gets the job failed and the rest refunded.
func requeuePreempted(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	old := j.Deadline
	all, kept, have, need, err := settleWhole(o, j, p, info.Time.Unix())
	if err != nil {
		return nil, err
	}
	if need > 0 {
		j.State = JobFailed
		j.setWait(Wait{Code: WaitPreemptUnfunded, Providers: all, Amount: have, Needed: need})
		return finishJob(o, j, info)
	}
	j.Preempted++
	if err := requeueWhole(o, j, old, resumeWait(Wait{Code: WaitPreemptRequeued, Providers: all}, j, kept)); err != nil {
		return nil, err
	}
	return []Event{jobEvent("job_requeued", j, Attr{"providers", joinAddrs(all)}, Attr{"why", "preempted"})}, nil
}
