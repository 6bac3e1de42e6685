package ledger

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/verify"
)

// A gang at verification full (issue 30): replicating a gang means running
// the whole gang again, not re-running rank 0's declared result. The
// ledger places ReplicaGangs (2) whole gangs of N members, R × N distinct
// providers (sched's pickGangs: each gang in one site, no provider in two
// gangs), and tallies them as it tallies a single job's replicas:
//
//   - Each member runs its rank and commits, as a single job's replica
//     does, H(manifest ‖ its own address ‖ salt) of its own rank's output
//     (rank-N/ in the delivered outputs), then reveals it. The commitment
//     binds the member's address, so no member can claim another's output;
//     the ledger, not a member, combines them.
//   - A replica gang's vote is its combined result: every member's revealed
//     result, in rank order (gangResultKey). A gang one of whose members did
//     not reveal has no vote.
//   - verify.Tally decides over the gangs as over a single job's replicas:
//     the majority gangs' members are paid their metered seconds, the first
//     such gang's outputs are delivered; gangs that differ ask for one more
//     whole gang (escalation, up to params.max_replicas gangs), and without
//     a majority the job fails, its owner refunded in full.
//
// Blame. A member that lies corrupts its whole gang's results (ranks
// exchange data every step: one bad all-reduce contribution changes every
// rank's output), so an outvoted gang's honest members cannot be told from
// its cheater by their outputs. The ledger slashes only what is objective:
//
//   - outvoted gang: its members are not paid (the owner keeps that gang's
//     escrow) and each counts one invalid result in its class and
//     reputation, as a failed replica does, but none is slashed: nothing
//     shows which of them lied (OutcomeGangOutvoted). The ledger knows no
//     operators, so "the whole gang is one operator's" cannot be shown
//     either.
//   - a member that committed and did not reveal is slashed as a silent
//     single replica is (penalizeUnrevealed): that is its own act. Its
//     gang has no vote; its other members are paid if their own revealed
//     rank result equals the majority gang's result of the same rank
//     (they did their part, provably), else neither paid nor slashed
//     (OutcomeGangIncomplete).
//
// So a cheater gains nothing (it is unpaid, and marked invalid), an honest
// co-member risks its pay for that run and one invalid mark (which a
// cheater can inflict on N-1 others at the price of its own run and mark),
// and the consumer pays for R × N member-seconds (N × the single-gang
// cost per extra gang), getting back what outvoted gangs were not paid.
//
// A lost member stops its own gang. Before any member committed, the whole
// job is placed again, every replica gang with it, as a single job's
// replicas are (the results come from one placement). After, only the
// replica gangs that lost a member are placed again as whole gangs; the
// others go on and keep their commitments (reassign), as a single job's
// committed replicas do.

// Outcomes of a replicated gang's members (beside majority, unrevealed and
// no_majority).
const (
	// OutcomeGangOutvoted: its gang's combined result was outvoted;
	// unpaid, counted invalid, not slashed.
	OutcomeGangOutvoted = "gang_outvoted"
	// OutcomeGangIncomplete: it revealed, a member of its gang did not;
	// its own rank's result did not match the majority's; unpaid, not
	// slashed.
	OutcomeGangIncomplete = "gang_incomplete"
)

// gangMembers is the members of one gang of spec s, for a gang verified
// by replica gangs; 0 otherwise (sched.Request.Members).
func gangMembers(s *JobSpec) int {
	if !s.Gang() || !s.Checked() {
		return 0
	}
	return int(s.Nodes)
}

// replicated reports whether j is a gang verified by replica gangs.
func replicated(j *Job) bool { return j.Spec.Gang() && j.Spec.Checked() }

// freeGangIndexes are the replica gang indexes the next picks picks of a
// replicated gang j take, lowest first: one per gang of them. For any
// other job it is nil.
func freeGangIndexes(j *Job, picks int) []uint64 {
	if !replicated(j) {
		return nil
	}
	var out []uint64
	for g := uint64(0); len(out)*int(j.Spec.Nodes) < picks; g++ {
		if !slices.ContainsFunc(j.Assignments, func(a Assignment) bool { return a.Gang == g }) {
			out = append(out, g)
		}
	}
	return out
}

// replicaGangs groups j's assignments into its replica gangs, by gang
// index, each as assignment indexes in rank order.
func replicaGangs(j *Job) [][]int {
	var idx []uint64
	for _, a := range j.Assignments {
		if !slices.Contains(idx, a.Gang) {
			idx = append(idx, a.Gang)
		}
	}
	slices.Sort(idx)
	out := make([][]int, len(idx))
	for gi, g := range idx {
		for i, a := range j.Assignments {
			if a.Gang == g {
				out[gi] = append(out[gi], i)
			}
		}
		slices.SortFunc(out[gi], func(x, y int) int {
			return int(j.Assignments[x].Rank) - int(j.Assignments[y].Rank)
		})
	}
	return out
}

// gangResultKey is replica gang g's vote: its members' results in rank
// order; "" when one has not revealed (or the gang lacks a member).
func gangResultKey(j *Job, g []int) string {
	if uint64(len(g)) != j.Spec.Nodes {
		return ""
	}
	var b strings.Builder
	for _, i := range g {
		r := j.Assignments[i].Result
		if r == nil {
			return ""
		}
		b.WriteString(resultKey(r))
		b.WriteByte(';')
	}
	return b.String()
}

// wholeGangs is every member of the replica gangs of j that one of gone
// belongs to: a replicated gang loses members a gang at a time.
func wholeGangs(j *Job, gone []address.Address) []address.Address {
	var gangs []uint64
	for _, g := range gone {
		if a := j.assignment(g); a != nil && !slices.Contains(gangs, a.Gang) {
			gangs = append(gangs, a.Gang)
		}
	}
	out := slices.Clone(gone)
	for _, a := range j.Assignments {
		if slices.Contains(gangs, a.Gang) && !slices.Contains(out, a.Provider) {
			out = append(out, a.Provider)
		}
	}
	return out
}

// decideGang is decide for a replicated gang: the tally over its replica
// gangs' combined results, then its application to every member.
func decideGang(o *Overlay, j *Job, p Params, info BlockInfo, mayEscalate bool) ([]Event, error) {
	gangs := replicaGangs(j)
	rs := make([]verify.Replica, len(gangs))
	for gi, g := range gangs {
		if k := gangResultKey(j, g); k != "" {
			rs[gi] = verify.Replica{Revealed: true, Result: k}
		}
	}
	out := verify.Tally(rs, verify.Rules{
		Checked:         true,
		MaxReplicas:     p.MaxReplicas,
		Placements:      j.Attempts,
		PlacementBudget: p.JobMaxAttempts + p.MaxReplicas,
		ReplicaDropped:  !mayEscalate,
	})
	n := out.N
	var events []Event
	if out.Verdict == verify.Escalate {
		// One more whole gang; the revealed results stand.
		old := j.Deadline
		j.Replicas = uint64(out.Replicas) * j.Spec.Nodes
		j.Revealing = false
		j.State = JobVerifying
		j.setWait(Wait{Code: WaitEscalating, Distinct: uint64(out.Results), Of: uint64(n), Count: uint64(out.Replicas), Limit: p.MaxReplicas})
		j.Deadline = info.Time.Unix() + int64(p.JobGrantTimeout)
		enqueueJob(o, j)
		setJob(o, j, old)
		return []Event{jobEvent("job_escalated", j, Attr{"replicas", strconv.Itoa(out.Replicas)})}, nil
	}
	// silent settles the members of gang gi that did not reveal:
	// slashed, their own act.
	silent := func(gi int) error {
		for _, i := range gangs[gi] {
			if a := &j.Assignments[i]; a.Result == nil {
				ev, err := penalizeUnrevealed(o, j, a, p, info)
				if err != nil {
					return err
				}
				events = append(events, ev)
			}
		}
		return nil
	}
	pay := func(a *Assignment, n int) error {
		a.Outcome = OutcomeMajority
		paid := a.Paid
		if err := payAssignment(o, j, a, mulDiv(a.PricePerHour, a.Result.MeteredSeconds, 3600), p); err != nil {
			return err
		}
		if err := recordWork(o, j, a, a.Paid-paid); err != nil {
			return err
		}
		if n < 2 {
			return nil // unverified: nobody to agree with
		}
		return recordValidated(o, a.Provider, a.Class)
	}
	if out.Verdict != verify.Validated && out.Verdict != verify.Unverified {
		// No majority (or nothing revealed): the job fails, the owner is
		// refunded, nobody who revealed is paid or slashed.
		withheld := 0
		for gi := range gangs {
			for _, i := range gangs[gi] {
				j.Assignments[i].Outcome = OutcomeNoMajority
			}
			if err := silent(gi); err != nil {
				return nil, err
			}
		}
		for _, a := range j.Assignments {
			if a.Outcome == OutcomeUnrevealed {
				withheld++
			}
		}
		j.Verdict = VerdictNoMajority
		j.State = JobFailed
		switch out.Results {
		case 0:
			j.setWait(Wait{Code: WaitNoneRevealed, Of: uint64(n)})
		case 1:
			j.setWait(Wait{Code: WaitLoneResult, Count: uint64(len(out.Undecided)), Of: uint64(n), Slashed: uint64(withheld)})
		default:
			j.setWait(Wait{Code: WaitNoMajority, Of: uint64(n), Distinct: uint64(out.Results), Slashed: uint64(withheld)})
		}
		evs, err := finishJob(o, j, info)
		return append(events, evs...), err
	}
	win := gangs[out.Delivered]
	for gi, g := range gangs {
		switch out.Fate(gi) {
		case verify.Winner:
			for _, i := range g {
				if err := pay(&j.Assignments[i], n); err != nil {
					return nil, err
				}
			}
		case verify.Minority:
			for _, i := range g {
				a := &j.Assignments[i]
				a.Outcome = OutcomeGangOutvoted
				if err := recordInvalid(o, a.Provider, a.Class); err != nil {
					return nil, err
				}
			}
			events = append(events, jobEvent("job_gang_outvoted", j, Attr{"gang", strconv.FormatUint(j.Assignments[g[0]].Gang, 10)}))
		case verify.Unrevealed:
			if err := silent(gi); err != nil {
				return nil, err
			}
			for _, i := range g {
				a := &j.Assignments[i]
				if a.Result == nil {
					continue
				}
				// Its own rank's result is the majority's: paid.
				if a.Rank < uint64(len(win)) && resultKey(j.Assignments[win[a.Rank]].Result) == resultKey(a.Result) {
					if err := pay(a, n); err != nil {
						return nil, err
					}
					continue
				}
				a.Outcome = OutcomeGangIncomplete
			}
		}
	}
	// Unverified: the other gangs were dropped (not placed in time), as
	// a single job's lone replica left by a dropped one is.
	j.Verdict = VerdictValidated
	var agree Wait
	if out.Verdict == verify.Unverified {
		j.Verdict = VerdictUnverified
	} else {
		agree.Count, agree.Of = uint64(len(out.Winners)), uint64(n)
	}
	rank0 := j.Assignments[win[0]]
	j.Delivered = &rank0.Provider
	var failed *JobResult
	for _, i := range win {
		if r := j.Assignments[i].Result; r.Failed && failed == nil {
			failed = r
		}
	}
	if failed != nil {
		j.State = JobFailed
		agree.Code, agree.Text = WaitJobFailed, failed.Reason
		j.setWait(agree)
	} else {
		j.State = JobSucceeded
		agree.Code = WaitAgreed
		j.setWait(agree)
		if j.Verdict == VerdictUnverified {
			j.clearWait()
		}
	}
	evs, err := finishJob(o, j, info)
	return append(events, evs...), err
}

// checkReplicaGang is the start check of a replicated gang's member a:
// every member of its own replica gang posted its key (the other gangs'
// members it never reaches).
func checkReplicaGang(j *Job, a *Assignment) error {
	n, posted := uint64(0), uint64(0)
	for _, x := range j.Assignments {
		if x.Gang == a.Gang {
			n++
			if x.GangKey != nil {
				posted++
			}
		}
	}
	if n < j.Spec.Nodes || posted < n {
		return fmt.Errorf("job %d is a gang of %d: %d members of replica gang %d posted their member key (gang_member); a member starts when all have: %w", j.ID, j.Spec.Nodes, posted, a.Gang, ErrJobState)
	}
	return nil
}
