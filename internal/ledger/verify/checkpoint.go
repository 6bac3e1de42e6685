package verify

// CheckpointAction is what a tally of checkpoints decides.
type CheckpointAction int

// Actions of [TallyCheckpoint].
const (
	// Agree: fewer than two distinct states reported: nothing to do.
	Agree CheckpointAction = iota + 1
	// Wait: replicas disagree, but those yet to report could still make a
	// majority: nothing to do yet.
	Wait
	// DropMinority: a strict majority agrees: the replicas in Minority
	// are slashed and dropped at once; the others go on.
	DropMinority
	// Restart: no majority is possible any more: every replica restarts
	// from the last checkpoint they agreed on, with Replicas replicas.
	Restart
	// Fail: no majority is possible, at params.max_replicas: the job fails
	// and nobody is slashed.
	Fail
)

var actionNames = [...]string{"", "agree", "wait", "drop_minority", "restart", "fail"}

func (a CheckpointAction) String() string {
	if a < 0 || int(a) >= len(actionNames) {
		return "action(?)"
	}
	return actionNames[a]
}

// CheckpointOutcome is a checkpoint tally's decision.
type CheckpointOutcome struct {
	Action CheckpointAction
	// Minority, under DropMinority, are the outvoted replicas, by group
	// (in the order each state was first reported), then in order.
	Minority []int
	// Votes is the size of the largest group (the majority's under
	// DropMinority).
	Votes int
	// Replicas is, under Restart, how many replicas the job restarts with:
	// N+1, never more than the cap. 0 otherwise.
	Replicas int
	// N is the number of replicas, Reported how many reported a state,
	// Results the number of distinct states.
	N, Reported, Results int
}

// TallyCheckpoint compares the states rs of a job's replicas at one
// checkpoint (Revealed: the replica committed that checkpoint). It is the
// same count as [Tally] with other rules, because the job is still running:
// it acts only on a disagreement; it waits while the replicas yet to report
// could still make a strict majority; a replica that has not reported is
// neither slashed nor counted against anyone; and without a possible
// majority the replicas restart with one more, up to maxReplicas, whatever
// the placement budget (the restart is a new placement of the whole job,
// not an added replica).
func TallyCheckpoint(rs []Replica, maxReplicas uint64) CheckpointOutcome {
	n := len(rs)
	gs := Groups(rs)
	out := CheckpointOutcome{N: n, Results: len(gs)}
	largest := 0
	for gi, g := range gs {
		out.Reported += len(g.Members)
		if len(g.Members) > len(gs[largest].Members) {
			largest = gi
		}
	}
	if len(gs) < 2 {
		out.Action = Agree
		return out
	}
	out.Votes = len(gs[largest].Members)
	switch {
	case Majority(gs, n) >= 0: // the largest group: a majority is unique
		out.Action = DropMinority
		for gi, g := range gs {
			if gi != largest {
				out.Minority = append(out.Minority, g.Members...)
			}
		}
	case 2*(out.Votes+n-out.Reported) > n:
		out.Action = Wait
	case uint64(n) >= maxReplicas:
		out.Action = Fail
	default:
		out.Action = Restart
		out.Replicas = n + 1
	}
	return out
}
