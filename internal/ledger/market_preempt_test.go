package ledger_test

import (
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestSpotPreemptedResumesFromCheckpoint: a preempted spot job that
// checkpointed within the grace is requeued to resume from that
// checkpoint, and its provider is paid for the seconds the checkpoint
// covers, once: not for those again as seconds it ran (an earlier
// version paid both), nor for the grace it sat out after stopping, which
// the owner would otherwise pay for twice when the job runs them again.
func TestSpotPreemptedResumesFromCheckpoint(t *testing.T) {
	c := marketChain(t, 1, nil)
	p, _ := ledger.GetParams(c.KV)
	spec := cpuJob("spot", 2, 1_000_000, ledger.TierSpot)
	spec.Checkpoint = &ledger.CheckpointSpec{Path: "/ckpt", IntervalSeconds: 60}
	must(t, []ledger.TxResult{submit(t, c, spec)})
	grantStart(t, c, 1)
	c.Advance(100 * time.Second)
	must(t, []ledger.TxResult{send(t, c, prov1, ckptMsg(1, 1, 60, 1))})
	earned := provider(t, c, prov1).Earned
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSubmitJob{Spec: cpuJob("prio", 2, 1_000_000, ledger.TierPriority), ConsumerKey: lt.AgeKey("consumer")})})
	// The agent checkpoints when it sees PreemptAt, then stops.
	must(t, []ledger.TxResult{send(t, c, prov1, ckptMsg(1, 2, 101, 2))})
	c.Advance(time.Duration(p.PreemptGraceSeconds) * time.Second)
	c.ApplyBlock(t)
	// Requeued, it waits: the slot its preemption freed is the priority
	// job's, whose placement waits there for its key; a spot placement
	// beside it, granted first, would take the slot and bump the priority
	// job, which would then preempt it again (offer.go,
	// yieldsToHigherTier).
	spot := job(t, c, 1)
	if spot.State != ledger.JobQueued || spot.Preempted != 1 || spot.ResumeSeq != 2 || spot.Progress != 101 {
		t.Fatalf("spot job after the grace: %s preempted %d resume_seq %d progress %d (%s)", spot.State, spot.Preempted, spot.ResumeSeq, spot.Progress, spot.Reason)
	}
	if prio := job(t, c, 2); prio.State != ledger.JobAssigned || len(prio.Assignments) != 1 || prio.Assignments[0].Provider != prov1.Addr {
		t.Fatalf("priority job after the grace: %s %+v, want placed on the freed slot", prio.State, prio.Assignments)
	}
	grantStart(t, c, 2)
	c.ApplyBlock(t)
	if spot := job(t, c, 1); spot.State != ledger.JobQueued || spot.Preempted != 1 {
		t.Fatalf("spot job once the priority job runs: %s preempted %d (%s)", spot.State, spot.Preempted, spot.Reason)
	}
	spot = job(t, c, 1)
	want := 2 * 36_000 * uint64(101) / 3600 // spot at the floor pays the ask
	if got := provider(t, c, prov1).Earned - earned; got != want {
		t.Fatalf("provider paid %d, want %d: the 101 s its checkpoint covers, once", got, want)
	}
	if spot.Cost != want || spot.Escrow != ledger.JobEscrow(&spot.Spec, p) {
		t.Fatalf("spot job cost %d (want %d), escrow %d (want a whole run's %d)", spot.Cost, want, spot.Escrow, ledger.JobEscrow(&spot.Spec, p))
	}
}

// TestPreemptedJobWhoseOwnerCannotRefillEnds: a preempted spot job whose
// owner cannot top its escrow up to a whole run again ends
// (preempt_unfunded), its provider paid for the seconds it ran. Its
// replica is released once: before, the requeue released it and then
// finishing the job released it again, and the market's reserved units
// went out of step with the records (the invariants caught it).
func TestPreemptedJobWhoseOwnerCannotRefillEnds(t *testing.T) {
	c := marketChain(t, 2, nil)
	must(t, []ledger.TxResult{submit(t, c, cpuJob("spot", 2, 1_000_000, ledger.TierSpot))})
	grantStart(t, c, 1)
	must(t, []ledger.TxResult{submit(t, c, cpuJob("other", 1, 1_000_000, ""))})
	grantStart(t, c, 2)
	c.Advance(100 * time.Second)
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSubmitJob{Spec: cpuJob("prio", 2, 1_000_000, ledger.TierPriority), ConsumerKey: lt.AgeKey("consumer")})})
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSend{To: prov2.Addr, Amount: ledger.Amount(c.Balance(t, consumer.Addr))})})
	p, _ := ledger.GetParams(c.KV)
	c.Advance(time.Duration(p.PreemptGraceSeconds) * time.Second)
	c.ApplyBlock(t) // the invariants hold after it
	spot := job(t, c, 1)
	if spot.State != ledger.JobFailed || spot.Wait == nil || spot.Wait.Code != ledger.WaitPreemptUnfunded || spot.Cost == 0 || spot.Escrow != 0 {
		t.Fatalf("preempted job of a broke owner: %s %+v cost %d escrow %d", spot.State, spot.Wait, spot.Cost, spot.Escrow)
	}
	if pr := provider(t, c, prov1); pr.Jobs != 1 || pr.Tentative != 1 {
		t.Fatalf("provider counts %d granted, %d ungranted; want the other job's and the priority job's placements", pr.Jobs, pr.Tentative)
	}
}
