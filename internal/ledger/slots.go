package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// Slots: what a placement holds of its provider's max_jobs slots, and how
// a placement nobody granted keeps nobody waiting (issue 27).
//
// A placement whose key is not granted yet holds its slot only
// tentatively (Provider.Tentative counts these; Provider.Jobs counts the
// slots taken for real: granted placements and service replicas). The
// planner places a job on a slot that nothing granted holds while fewer
// than sched.TentativePerSlot ungranted placements hold it
// (sched.Positions). The first of them to be granted, by its owner
// (execGrantKey) or by a handover (execHandOverKey), takes the slot
// (grantSlot); when the provider's free slots can then no longer carry
// the ungranted placements left, the oldest of those are bumped
// (bumpExcess): each pays for the seconds it held (chargeHold, as a lapse
// does) and its job goes back to its queue at its place (its id), its
// placement not counted against job_max_attempts when nothing was
// committed. So a provider never runs more granted jobs than its slots, a
// grant bumps at most TentativePerSlot-1 placements, and a placement
// that is never granted keeps nobody out who grants.
//
// jobtent/<provider><assigned at><^id> lists each provider's ungranted
// placements, oldest placement first and, placed at once, the younger job
// first: the order bumpExcess takes them in, without reading the
// provider's other jobs.

// slotKind is what an assignment holds of its provider's slots.
type slotKind int

const (
	noSlot        slotKind = iota // it reported: it only has to reveal
	tentativeSlot                 // placed; its key is not granted yet
	grantedSlot                   // its key is granted: the slot is taken for real
)

// slot says what a holds of its provider's slots.
func (a *Assignment) slot() slotKind {
	switch {
	case !a.holdsSlot():
		return noSlot
	case a.KeyGrant == nil:
		return tentativeSlot
	}
	return grantedSlot
}

func tentativePrefix(provider address.Address) []byte {
	return append(slices.Clone(prefixJobTentative), provider[:]...)
}

func tentativeKey(provider address.Address, assignedAt int64, id uint64) []byte {
	return u64(u64(tentativePrefix(provider), uint64(max(assignedAt, 0))), ^id)
}

// tentativeValue is a jobtent/ entry's value: the job's tier rank + 1,
// which the planner reads without the job's record (yieldsToHigherTier).
func tentativeValue(j *Job) []byte { return []byte{byte(tierRank(j.Spec.TierName()) + 1)} }

// tentativeIDAt is the job id of a jobtent/ key.
func tentativeIDAt(k []byte) uint64 { return ^binary.BigEndian.Uint64(k[len(k)-8:]) }

// holdTentative records a new placement a of j on its provider: a slot
// held tentatively, its market reservation and its index entries. pr is
// the provider's stored record, which it updates.
func holdTentative(o *Overlay, j *Job, a *Assignment, pr *Provider) {
	before := *pr
	pr.Tentative++
	setProviderFrom(o, &before, pr)
	marketReserve(o, j, a, +1)
	o.Set(jobProvKey(a.Provider, j.ID), []byte{1})
	o.Set(tentativeKey(a.Provider, a.AssignedAt, j.ID), tentativeValue(j))
}

// grantSlot makes the slot a holds for real: its key has just been
// granted (the caller sets KeyGrant after). The provider's free slots may
// then carry fewer ungranted placements than wait on them: the oldest are
// bumped (bumpExcess).
func grantSlot(o *Overlay, j *Job, a *Assignment, p Params, info BlockInfo) ([]Event, error) {
	if a.slot() != tentativeSlot {
		return nil, nil
	}
	pr, err := mustProvider(o, a.Provider)
	if err != nil {
		return nil, err
	}
	if pr.Tentative == 0 || pr.Jobs >= pr.MaxJobs {
		// bumpExcess keeps ungranted placements only where a slot is
		// free (an invariant).
		return nil, fmt.Errorf("job %d's placement on %s waits for its key, but the provider counts %d ungranted placements and %d of %d slots taken: %w", j.ID, a.Provider, pr.Tentative, pr.Jobs, pr.MaxJobs, ErrInternal)
	}
	before := *pr
	pr.Tentative--
	pr.Jobs++
	setProviderFrom(o, &before, pr)
	o.Delete(tentativeKey(a.Provider, a.AssignedAt, j.ID))
	return bumpExcess(o, a.Provider, j.ID, p, info)
}

// bumpExcess bumps the oldest ungranted placements on provider that its
// free slots can no longer carry (sched.Positions): after a grant or a
// service replica took a slot, or the provider lowered max_jobs. self is
// the job whose grant took the slot (0 for none): it holds no ungranted
// placement there.
func bumpExcess(o *Overlay, provider address.Address, self uint64, p Params, info BlockInfo) ([]Event, error) {
	pr, ok, err := GetProvider(o, provider)
	if err != nil || !ok {
		return nil, err
	}
	limit := sched.Positions(pr.Jobs, pr.MaxJobs)
	if pr.Tentative <= limit {
		return nil, nil
	}
	excess := pr.Tentative - limit
	pre := tentativePrefix(provider)
	var ids []uint64
	o.Iterate(pre, prefixEnd(pre), func(k, _ []byte) bool {
		ids = append(ids, tentativeIDAt(k))
		return uint64(len(ids)) < excess
	})
	var events []Event
	for _, id := range ids {
		if id == self {
			return nil, fmt.Errorf("job %d's placement on %s was just granted, yet the index lists it as ungranted: %w", id, provider, ErrInternal)
		}
		evs, err := bump(o, id, provider, p, info)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

// bump takes job id's ungranted placement on provider back: it pays for
// the seconds it held the slot (chargeHold), as a lapsed one does, and
// the job goes back to its queue at its place. A job with nothing
// committed restarts whole, as a preempted one does (requeueWhole): its
// placement is not counted against job_max_attempts, and its owner tops
// the escrow up to a whole run again, or the job ends (WaitBumpUnfunded).
// A job with committed results gets another replica in its place
// (reassign: the placement counts against its placement budget, so a
// verifying job's time stays bounded), its owner topping the escrow up
// for it, or the job goes on without it (DropBumpUnfunded).
func bump(o *Overlay, id uint64, provider address.Address, p Params, info BlockInfo) ([]Event, error) {
	j, err := mustJob(o, id)
	if err != nil {
		return nil, err
	}
	a := j.assignment(provider)
	if j.Done() || a == nil || a.slot() != tentativeSlot {
		return nil, fmt.Errorf("the ungranted placements of %s list job %d, which holds no ungranted placement there: %w", provider, id, ErrInternal)
	}
	gone := []address.Address{provider}
	now := info.Time.Unix()
	if j.committed() == 0 {
		old := j.Deadline
		all, kept, have, need, err := settleWhole(o, j, p, now)
		if err != nil {
			return nil, err
		}
		if need > 0 {
			j.State = JobFailed
			j.setWait(Wait{Code: WaitBumpUnfunded, Providers: gone, Amount: have, Needed: need})
			return finishJob(o, j, info)
		}
		if err := requeueWhole(o, j, old, resumeWait(Wait{Code: WaitRequeued, Cause: CauseBumped, Providers: gone}, j, kept)); err != nil {
			return nil, err
		}
		return []Event{jobEvent("job_requeued", j, Attr{"providers", joinAddrs(all)}, Attr{"why", CauseBumped})}, nil
	}
	if err := chargeHold(o, j, a, p, now); err != nil {
		return nil, err
	}
	events, err := reassign(o, j, gone, Wait{Cause: CauseBumped}, p, info)
	if err != nil || j.Done() || !j.queuedForReplica() {
		return events, err
	}
	// The hold of a replica the owner planned came out of the escrow,
	// which must cover the replica placed in its place.
	have, need, err := refillEscrow(o, j, p)
	if err != nil || need == 0 {
		return events, err
	}
	evs, err := dropReplicas(o, j, nil, Wait{Code: DropBumpUnfunded, Providers: gone, Amount: have, Needed: need}, p, info)
	return append(events, evs...), err
}

// settleWhole pays every replica of j (which has nothing committed), to be
// taken off its provider: each is paid for the seconds it ran, or what a
// kept checkpoint covers (keepCheckpointed), or, not started, for the slot
// it held; then the escrow is topped up from the owner's balance to cover
// a whole run again. It returns the providers, whether a checkpoint was
// kept, and, when the owner cannot pay the top-up (need > 0), what it has:
// the caller then ends the job (finishJob releases the replicas), else
// requeues it (requeueWhole).
func settleWhole(o *Overlay, j *Job, p Params, now int64) (all []address.Address, kept bool, have, need uint64, err error) {
	all = make([]address.Address, len(j.Assignments))
	for i, a := range j.Assignments {
		all[i] = a.Provider
	}
	if kept, err = keepCheckpointed(o, j, all, p); err != nil {
		return nil, false, 0, 0, err
	}
	for i := range j.Assignments {
		a := &j.Assignments[i]
		switch {
		case a.StartedAt == 0:
			err = chargeHold(o, j, a, p, now)
		case !kept:
			err = payForTime(o, j, a, min(uint64(max(now-a.StartedAt, 0)), j.RunBudget()), p)
		}
		// With a checkpoint kept, keepCheckpointed paid the seconds it
		// covers; what ran after it is lost, and the owner, who runs it
		// again, pays for it once (docs/jobspec.md, checkpoint).
		if err != nil {
			return nil, false, 0, 0, err
		}
	}
	if want := JobEscrow(&j.Spec, p); j.Escrow < want {
		owner, err := GetAccount(o, j.Owner)
		if err != nil {
			return nil, false, 0, 0, err
		}
		top := want - j.Escrow
		if owner.Balance < top {
			return all, kept, owner.Balance, top, nil
		}
		owner.Balance -= top
		setAccount(o, &owner)
		j.Escrow += top
		setUint(o, keyEscrow, Escrowed(o)+top)
	}
	return all, kept, 0, 0, nil
}

// requeueWhole releases the replicas of j, settled by settleWhole, and
// puts j back in its queue at its place, waiting for why; the placement
// it had is not a failed attempt.
func requeueWhole(o *Overlay, j *Job, oldDeadline int64, why Wait) error {
	for i := range j.Assignments {
		if err := releaseAssignment(o, j, &j.Assignments[i]); err != nil {
			return err
		}
	}
	j.Assignments = []Assignment{}
	j.State = JobQueued
	j.Attempts -= min(j.Attempts, 1)
	j.setWait(why)
	j.Deadline = 0
	enqueueJob(o, j)
	setJob(o, j, oldDeadline)
	return nil
}

// refillEscrow tops j's escrow up from its owner's balance to what j may
// still be charged (escrowNeeded). When the owner has less than that
// needs, it moves nothing and returns what the owner has and what was
// needed.
func refillEscrow(o *Overlay, j *Job, p Params) (have, need uint64, err error) {
	want := escrowNeeded(j, p)
	if j.Escrow >= want {
		return 0, 0, nil
	}
	owner, err := GetAccount(o, j.Owner)
	if err != nil {
		return 0, 0, err
	}
	top := want - j.Escrow
	if owner.Balance < top {
		return owner.Balance, top, nil
	}
	owner.Balance -= top
	setAccount(o, &owner)
	j.Escrow += top
	setUint(o, keyEscrow, Escrowed(o)+top)
	setJob(o, j, j.Deadline)
	return 0, 0, nil
}

// releaseAssignment ends a's part in job j: its provider index entry,
// and the slot it holds (granted or tentative) with its market
// reservation, if it still holds one.
func releaseAssignment(o *Overlay, j *Job, a *Assignment) error {
	o.Delete(jobProvKey(a.Provider, j.ID))
	kind := a.slot()
	if kind == noSlot {
		return nil
	}
	marketReserve(o, j, a, -1)
	if kind == tentativeSlot {
		o.Delete(tentativeKey(a.Provider, a.AssignedAt, j.ID))
	}
	return releaseSlot(o, a.Provider, kind)
}

// releaseSlot frees one slot of provider of the given kind.
func releaseSlot(o *Overlay, provider address.Address, kind slotKind) error {
	p, ok, err := GetProvider(o, provider)
	if err != nil || !ok {
		return err
	}
	switch {
	case kind == tentativeSlot && p.Tentative > 0:
		p.Tentative--
	case kind == grantedSlot && p.Jobs > 0:
		p.Jobs--
	}
	setProvider(o, p)
	return nil
}
