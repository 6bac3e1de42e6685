// Package verify is the tally of Proof of Sync (DESIGN.md section 5): given
// what each replica of a job revealed, it decides the verdict (who agrees,
// who is outvoted, who stayed silent, whether to add a replica, whose
// result is delivered) as a pure function of those facts and a few
// parameters. It reads no state and changes none; the ledger applies an
// [Outcome] (internal/ledger, decide in verification.go: payments, slashes,
// reputation, events) and builds the job's reason from its counts.
//
// Two tallies share one count ([Groups], [Majority]):
//   - [Tally] ends a job's vote on its results, once every replica has
//     revealed or the reveal window has closed.
//   - [TallyCheckpoint] compares the replicas' checkpoints at one sequence
//     number while the job still runs: a provisional vote, which waits while
//     a majority is still possible and never punishes a replica that has not
//     reported yet.
//   - [TallyJudgments] settles the judging round of a job whose outputs
//     are judged within a tolerance: the judges' verdict vectors by the
//     same count, then [Class], the replicas judged the same, whose members
//     the ledger tallies as one result.
//
// The package depends on the standard library only, so that every
// validator computes the same verdict (DESIGN.md section 4).
package verify

// A Replica is what the tally knows of one replica of a job. Replicas are
// passed in the job's order (its assignments'); every index in an Outcome
// is an index into that slice.
type Replica struct {
	// Revealed reports that the replica opened its result (for a job that
	// is not checked: committed it in the clear; for a checkpoint: committed
	// one at the sequence compared).
	Revealed bool
	// Result identifies what the replica revealed: two replicas agree iff
	// their Results are equal. Ignored unless Revealed.
	Result string
}

// A Group is one distinct result and the replicas that revealed it.
type Group struct {
	Result  string
	Members []int // indexes of the replicas, in order
}

// Groups returns the distinct results revealed, in the order each was
// first revealed (by replica index), each with its replicas in order.
func Groups(rs []Replica) []Group {
	var gs []Group
	for i, r := range rs {
		if !r.Revealed {
			continue
		}
		found := false
		for gi := range gs {
			if gs[gi].Result == r.Result {
				gs[gi].Members = append(gs[gi].Members, i)
				found = true
			}
		}
		if !found {
			gs = append(gs, Group{Result: r.Result, Members: []int{i}})
		}
	}
	return gs
}

// Majority returns the index in gs of the group that more than half of n
// replicas revealed, or -1 when there is none. There is at most one.
func Majority(gs []Group, n int) int {
	win := -1
	for gi := range gs {
		if 2*len(gs[gi].Members) > n {
			win = gi
		}
	}
	return win
}
