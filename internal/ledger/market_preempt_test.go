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
	spot := job(t, c, 1)
	if spot.State != ledger.JobQueued || spot.Preempted != 1 || spot.ResumeSeq != 2 || spot.Progress != 101 {
		t.Fatalf("spot job after the grace: %s preempted %d resume_seq %d progress %d (%s)", spot.State, spot.Preempted, spot.ResumeSeq, spot.Progress, spot.Reason)
	}
	want := 2 * 36_000 * uint64(101) / 3600 // spot at the floor pays the ask
	if got := provider(t, c, prov1).Earned - earned; got != want {
		t.Fatalf("provider paid %d, want %d: the 101 s its checkpoint covers, once", got, want)
	}
	if spot.Cost != want || spot.Escrow != ledger.JobEscrow(&spot.Spec, p) {
		t.Fatalf("spot job cost %d (want %d), escrow %d (want a whole run's %d)", spot.Cost, want, spot.Escrow, ledger.JobEscrow(&spot.Spec, p))
	}
}
