package verify

import "slices"

// Verdict is what a tally of results decides.
type Verdict int

// Verdicts of [Tally]. Escalate is the only one that does not end the job.
const (
	// Escalate: no majority yet, and another replica may be added: the
	// job gets Outcome.Replicas replicas; the revealed results stand and
	// are tallied again with the new one's. Nobody is paid or slashed.
	Escalate Verdict = iota + 1
	// Validated: a strict majority of two or more replicas of a checked
	// job agree.
	Validated
	// Unverified: the one replica of a checked job (spot, not audited)
	// revealed its result.
	Unverified
	// Unchecked: a job whose results are not compared (verification none,
	// or not deterministic); its result stands as its majority.
	Unchecked
	// NoMajority: no strict majority and no replica can be added (the cap,
	// the placement budget, a replica just dropped, or not checked), or
	// nobody revealed. The job fails; nobody who revealed is paid or
	// slashed; the silent are slashed.
	NoMajority
)

var verdictNames = [...]string{"", "escalate", "validated", "unverified", "unchecked", "no_majority"}

func (v Verdict) String() string {
	if v < 0 || int(v) >= len(verdictNames) {
		return "verdict(?)"
	}
	return verdictNames[v]
}

// Final reports whether the verdict ends the job's vote.
func (v Verdict) Final() bool { return v != Escalate }

// Rules are the parameters and the job's circumstances the tally needs.
type Rules struct {
	// Checked: the job's results are compared (deterministic, spot or
	// full). A job that is not checked is never escalated.
	Checked bool
	// MaxReplicas is params.max_replicas: an escalation never asks for
	// more.
	MaxReplicas uint64
	// Placements is how many placements the job has had (Job.Attempts),
	// PlacementBudget how many it may have (job_max_attempts +
	// max_replicas): every escalation is a placement.
	Placements, PlacementBudget uint64
	// ReplicaDropped: the job has just lost the replica an escalation asked
	// for (no provider took it, or it did not commit). Asking again with
	// the same replicas would decide the same way at every deadline, so
	// the tally does not escalate.
	ReplicaDropped bool
}

// Fate is what a verdict does to one replica.
type Fate int

// Fates of a replica in an [Outcome].
const (
	// Winner: in the majority: paid its metered time; the first is
	// delivered.
	Winner Fate = iota + 1
	// Minority: revealed a result other than the majority's: slashed.
	Minority
	// Unrevealed: committed and did not reveal. Under a final verdict it
	// is slashed as an outvoted replica is, majority or not: silence must
	// never be cheaper than losing the vote. Under Escalate it may still
	// reveal.
	Unrevealed
	// Undecided: revealed, and no majority was found (NoMajority or
	// Escalate): neither paid nor slashed.
	Undecided
)

// Outcome is a tally's decision. Winners, Minority, Unrevealed and
// Undecided partition the replicas (every index in exactly one); Winners
// and Minority are empty without a majority, Undecided is empty with one.
type Outcome struct {
	Verdict Verdict
	// Replicas is, under Escalate, how many replicas the job gets: N+1,
	// never more than Rules.MaxReplicas. 0 otherwise.
	Replicas int
	// Winners are the majority's replicas, Minority the outvoted, Unrevealed
	// the silent, Undecided those who revealed without a majority; each in
	// order.
	Winners, Minority, Unrevealed, Undecided []int
	// Delivered is the replica whose result the owner gets: the first
	// winner; -1 without a majority.
	Delivered int
	// N is the number of replicas, Results the number of distinct results
	// revealed: with len(Winners) and len(Undecided) they are the counts
	// the job's reason reports.
	N, Results int
}

// Fate returns what the outcome does to replica i (0 when i is not one of
// its replicas).
func (o Outcome) Fate(i int) Fate {
	switch {
	case slices.Contains(o.Winners, i):
		return Winner
	case slices.Contains(o.Minority, i):
		return Minority
	case slices.Contains(o.Unrevealed, i):
		return Unrevealed
	case slices.Contains(o.Undecided, i):
		return Undecided
	}
	return 0
}

// Tally decides the vote on a job's results among its replicas rs (every
// one of which committed a result): a result that more than half of them
// revealed wins; without one the job gets one more replica, while it is
// checked, something was revealed, the replica cap and the placement budget
// allow it and the last one asked for was not dropped; otherwise it fails
// with no majority.
func Tally(rs []Replica, r Rules) Outcome {
	n := len(rs)
	gs := Groups(rs)
	out := Outcome{N: n, Results: len(gs), Delivered: -1}
	win := Majority(gs, n)
	switch {
	case win >= 0 && !r.Checked:
		out.Verdict = Unchecked
	case win >= 0 && n == 1:
		out.Verdict = Unverified
	case win >= 0:
		out.Verdict = Validated
	case r.Checked && !r.ReplicaDropped && uint64(n) < r.MaxReplicas && r.Placements < r.PlacementBudget && len(gs) > 0:
		out.Verdict = Escalate
		out.Replicas = n + 1
	default:
		out.Verdict = NoMajority
	}
	for i := range rs {
		switch {
		case !rs[i].Revealed:
			out.Unrevealed = append(out.Unrevealed, i)
		case win < 0:
			out.Undecided = append(out.Undecided, i)
		case rs[i].Result == gs[win].Result:
			out.Winners = append(out.Winners, i)
		default:
			out.Minority = append(out.Minority, i)
		}
	}
	if win >= 0 {
		out.Delivered = out.Winners[0]
	}
	return out
}
