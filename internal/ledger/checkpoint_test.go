package ledger_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// ckptJob is a wasm job of an hour at most 72,000 usync/hour that
// checkpoints /ckpt every minute.
func ckptJob(name string) ledger.JobSpec {
	s := lt.WasmJob(name, 72_000, 3600)
	s.Checkpoint = &ledger.CheckpointSpec{Path: "/ckpt", IntervalSeconds: 60}
	return s
}

func ckptMsg(id, seq, covered uint64, h byte) *ledger.MsgCommitCheckpoint {
	return &ledger.MsgCommitCheckpoint{JobID: id, Seq: seq, Blob: fmt.Sprintf("sha256:%064x", seq*1000+uint64(h)), PlainHash: ledger.Hash{h, byte(seq)}, Size: 4096, CoveredSeconds: covered}
}

// grantStart grants the key to every assignment without one and starts
// every assignment not started, from the job's resume point.
func grantStart(t *testing.T, c *lt.Chain, id uint64) {
	t.Helper()
	j := job(t, c, id)
	var grants []ledger.Grant
	for _, a := range j.Assignments {
		if a.KeyGrant == nil {
			grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("wrapped")})
		}
	}
	if len(grants) > 0 {
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: id, Grants: grants})})
	}
	for _, a := range job(t, c, id).Assignments {
		if a.StartedAt == 0 {
			must(t, []ledger.TxResult{send(t, c, provKey(t, a.Provider), &ledger.MsgStartJob{JobID: id, ResumeSeq: j.ResumeSeq})})
		}
	}
}

func TestCommitCheckpointRules(t *testing.T) {
	c := verifyChain(t, 2, nil)
	must(t, []ledger.TxResult{submit(t, c, ckptJob("ck"))})
	p := provKey(t, job(t, c, 1).Assignments[0].Provider)
	other := prov2
	if p.Addr == prov2.Addr {
		other = prov1
	}
	if r := send(t, c, p, ckptMsg(1, 1, 10, 1)); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("before the start: %v", r.Err)
	}
	grantStart(t, c, 1)
	c.Advance(30 * time.Second)
	if r := send(t, c, other, ckptMsg(1, 1, 10, 1)); !errors.Is(r.Err, ledger.ErrNotJobParty) {
		t.Fatalf("from a provider not assigned: %v", r.Err)
	}
	// Covered is at most the time since the start (+1).
	must(t, []ledger.TxResult{send(t, c, p, ckptMsg(1, 2, 1000, 1))})
	j := job(t, c, 1)
	if len(j.Checkpoints) != 1 || j.Checkpoints[0].Seq != 2 || j.Checkpoints[0].Covered > 35 || j.Checkpoints[0].Provider != p.Addr {
		t.Fatalf("after the first checkpoint: %+v", j.Checkpoints)
	}
	for _, seq := range []uint64{1, 2} {
		if r := send(t, c, p, ckptMsg(1, seq, 20, 1)); !errors.Is(r.Err, ledger.ErrInvalidMsg) || !strings.Contains(r.Err.Error(), "increase") {
			t.Fatalf("seq %d after 2: %v", seq, r.Err)
		}
	}
	big := ckptMsg(1, 3, 20, 1)
	big.Size = 2 << 30
	if r := send(t, c, p, big); !errors.Is(r.Err, ledger.ErrInvalidMsg) || !strings.Contains(r.Err.Error(), "disk") {
		t.Fatalf("larger than the disk: %v", r.Err)
	}
	refused := "the state is 2 GiB, more than the job's disk of 1 GiB"
	must(t, []ledger.TxResult{send(t, c, p, &ledger.MsgCommitCheckpoint{JobID: 1, Seq: 3, Refused: refused})})
	j = job(t, c, 1)
	if len(j.Checkpoints) != 1 {
		t.Fatalf("a refusal is recorded, not kept: %+v", j.Checkpoints)
	}
	checkWait(t, "refused checkpoint", j.CheckpointWait, ledger.Wait{Code: ledger.CheckpointRefused, Providers: []address.Address{p.Addr}, Seq: 3, Text: refused})
	// Covered never goes back.
	must(t, []ledger.TxResult{send(t, c, p, ckptMsg(1, 5, 0, 1))})
	if j := job(t, c, 1); j.Checkpoints[1].Covered != j.Checkpoints[0].Covered {
		t.Fatalf("covered went back: %+v", j.Checkpoints)
	}
	// Bounded: the latest CheckpointsPerProvider.
	for seq := uint64(6); seq < 12; seq++ {
		must(t, []ledger.TxResult{send(t, c, p, ckptMsg(1, seq, seq*2, 1))})
	}
	if j := job(t, c, 1); len(j.Checkpoints) != ledger.CheckpointsPerProvider || j.Checkpoints[0].Seq != 9 {
		t.Fatalf("kept %+v", j.Checkpoints)
	}
	runJobTail(t, c, 1, p, 40)
	if r := send(t, c, p, ckptMsg(1, 20, 50, 1)); !errors.Is(r.Err, ledger.ErrNotJobParty) {
		t.Fatalf("after the result: %v", r.Err)
	}

	// A job without a checkpoint takes none.
	must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("plain", 72_000, 600))})
	grantStart(t, c, 2)
	q := provKey(t, job(t, c, 2).Assignments[0].Provider)
	if r := send(t, c, q, ckptMsg(2, 1, 1, 1)); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("no checkpoint in the spec: %v", r.Err)
	}
}

func TestCheckpointSpecBounds(t *testing.T) {
	c := verifyChain(t, 1, func(p *ledger.Params) { p.CheckpointMinInterval = 120 })
	for _, tc := range []struct {
		ck   ledger.CheckpointSpec
		want string
	}{
		{ledger.CheckpointSpec{Path: "/ckpt", IntervalSeconds: 60}, "checkpoint_min_interval"},
		{ledger.CheckpointSpec{Path: "/ckpt", IntervalSeconds: 25 * 3600}, "24h"},
		{ledger.CheckpointSpec{Path: "/ckpt", IntervalSeconds: 0}, "out of range"},
		{ledger.CheckpointSpec{Path: "/", IntervalSeconds: 600}, "directory of its own"},
		{ledger.CheckpointSpec{Path: "ckpt", IntervalSeconds: 600}, "absolute"},
		{ledger.CheckpointSpec{Path: "/a/../b", IntervalSeconds: 600}, ".."},
	} {
		s := ckptJob("b")
		s.Checkpoint = &tc.ck
		if r := submit(t, c, s); r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error naming %q", tc.ck, r.Err, tc.want)
		}
	}
	s := ckptJob("ok")
	s.Checkpoint.IntervalSeconds = 120
	must(t, []ledger.TxResult{submit(t, c, s)})
}

// runJobTail commits an unchecked result of metered seconds for p.
func runJobTail(t *testing.T, c *lt.Chain, id uint64, p lt.Key, metered uint64) {
	t.Helper()
	c.Advance(time.Duration(metered) * time.Second)
	must(t, []ledger.TxResult{send(t, c, p, &ledger.MsgCommitResult{JobID: id, MeteredSeconds: metered, Result: &ledger.JobResult{
		ManifestHash: ledger.Hash{7}, OutputBlob: "sha256:" + strings.Repeat("ab", 32), MeteredSeconds: metered,
	}})})
}

// TestCheckpointBillingOnReassign: the provider that loses the job is paid
// for what its last checkpoint covers, the next one runs from it and is
// paid for its own run, within the rest of the timeout.
func TestCheckpointBillingOnReassign(t *testing.T) {
	c := verifyChain(t, 2, nil)
	must(t, []ledger.TxResult{submit(t, c, ckptJob("ck"))})
	escrow := job(t, c, 1).Escrow
	grantStart(t, c, 1)
	first := provKey(t, job(t, c, 1).Assignments[0].Provider)
	c.Advance(100 * time.Second)
	must(t, []ledger.TxResult{send(t, c, first, ckptMsg(1, 1, 100, 1))})
	c.Advance(200 * time.Second)
	must(t, []ledger.TxResult{send(t, c, first, ckptMsg(1, 2, 300, 1))})
	c.Advance(250 * time.Second) // lost: 250 s after checkpoint 2
	before := c.Balance(t, first.Addr)
	must(t, []ledger.TxResult{send(t, c, first, &ledger.MsgReleaseJob{JobID: 1, Reason: "going away"})})
	j := job(t, c, 1)
	price := uint64(36_000)
	if first.Addr == prov2.Addr {
		price = 72_000
	}
	want := price * 300 / 3600
	if got := c.Balance(t, first.Addr) - before; got != want || j.Cost != want {
		t.Fatalf("lost provider paid %d (job cost %d), want %d for the 300 s checkpoint 2 covers", got, j.Cost, want)
	}
	if j.ResumeSeq != 2 || j.Progress != 300 || j.RunBudget() != 3300 {
		t.Fatalf("resume point: seq %d progress %d budget %d (%+v)", j.ResumeSeq, j.Progress, j.RunBudget(), j.Wait)
	}
	grantStart(t, c, 1)
	// The escrow left covers what the resumed run may still be charged,
	// at the dearer provider's price too (escrowCoversCharges).
	if err := ledger.CheckInvariants(c.KV); err != nil {
		t.Fatal(err)
	}
	j = job(t, c, 1)
	next := provKey(t, j.Assignments[0].Provider)
	if d := j.Deadline - j.Assignments[0].StartedAt; d != 3300+int64(ledger.DefaultParams().JobResultGrace) {
		t.Fatalf("deadline %d s after the start, want the rest of the timeout + grace", d)
	}
	// Its sequence goes on from the resume point.
	if r := send(t, c, next, ckptMsg(1, 2, 10, 1)); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("seq 2 again after resuming from 2: %v", r.Err)
	}
	// Metered beyond the rest of the timeout is not paid.
	runJobTail(t, c, 1, next, 3400)
	j = job(t, c, 1)
	nextPrice := j.Assignments[0].PricePerHour
	wantCost := want + nextPrice*3300/3600
	fee := j.Fee
	if j.State != ledger.JobSucceeded || j.Cost != wantCost || j.Cost+fee+j.Refund != escrow || j.Escrow != 0 {
		t.Fatalf("settled %s: cost %d (want %d) fee %d refund %d, escrow %d", j.State, j.Cost, wantCost, fee, j.Refund, escrow)
	}
}

// TestCheckpointBillingProperty: a job interrupted at random points (a
// release, a missed deadline), resumed each time from its last checkpoint:
// what the owner pays is exactly the covered seconds of the checkpoints
// it resumed from and the last run, at each provider's price; the escrow
// is conserved (and the chain's invariants, checked after every block,
// hold).
func TestCheckpointBillingProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 17))
	for round := range 12 {
		c := verifyChain(t, 3, func(p *ledger.Params) { p.JobMaxAttempts = 10 })
		must(t, []ledger.TxResult{submit(t, c, ckptJob("prop"))})
		escrow := job(t, c, 1).Escrow
		var wantCost uint64
		var progress uint64
		seq := uint64(0)
		interruptions := 1 + rng.IntN(4)
		for i := 0; ; i++ {
			grantStart(t, c, 1)
			j := job(t, c, 1)
			p := provKey(t, j.Assignments[0].Provider)
			price := j.Assignments[0].PricePerHour
			budget := j.RunBudget()
			if budget != 3600-progress {
				t.Fatalf("round %d: budget %d, want %d", round, budget, 3600-progress)
			}
			if i == interruptions {
				metered := 1 + uint64(rng.IntN(int(budget)))
				runJobTail(t, c, 1, p, metered)
				wantCost += price * metered / 3600
				break
			}
			var covered uint64
			for k := rng.IntN(3); k > 0; k-- {
				step := uint64(1 + rng.IntN(int(budget)/8))
				c.Advance(time.Duration(step) * time.Second)
				covered += step
				seq += 1 + uint64(rng.IntN(2))
				must(t, []ledger.TxResult{send(t, c, p, ckptMsg(1, seq, covered, 1))})
				covered = job(t, c, 1).Checkpoints[len(job(t, c, 1).Checkpoints)-1].Covered
			}
			c.Advance(time.Duration(rng.IntN(100)) * time.Second) // work lost
			if rng.IntN(2) == 0 {
				must(t, []ledger.TxResult{send(t, c, p, &ledger.MsgReleaseJob{JobID: 1, Reason: "interrupted"})})
			} else {
				c.Advance(time.Duration(budget+ledger.DefaultParams().JobResultGrace) * time.Second)
				c.ApplyBlock(t)
			}
			j = job(t, c, 1)
			if j.State != ledger.JobQueued && j.State != ledger.JobAssigned {
				t.Fatalf("round %d: after the interruption %s (%+v)", round, j.State, j.Wait)
			}
			wantCost += price * covered / 3600
			progress += covered
			if j.Progress != progress {
				t.Fatalf("round %d: progress %d, want %d", round, j.Progress, progress)
			}
		}
		j := job(t, c, 1)
		if j.State != ledger.JobSucceeded || j.Cost != wantCost || j.Cost+j.Fee+j.Refund != escrow || j.Escrow != 0 {
			t.Fatalf("round %d: %s cost %d want %d; cost+fee+refund %d, escrow %d", round, j.State, j.Cost, wantCost, j.Cost+j.Fee+j.Refund, escrow)
		}
	}
}

func TestResumeFallback(t *testing.T) {
	c := verifyChain(t, 2, nil)
	must(t, []ledger.TxResult{submit(t, c, ckptJob("fb"))})
	grantStart(t, c, 1)
	p := provKey(t, job(t, c, 1).Assignments[0].Provider)
	for seq := uint64(1); seq <= 3; seq++ {
		c.Advance(10 * time.Second)
		must(t, []ledger.TxResult{send(t, c, p, ckptMsg(1, seq, seq*10, 1))})
	}
	must(t, []ledger.TxResult{send(t, c, p, &ledger.MsgReleaseJob{JobID: 1, Reason: "bye"})})
	if j := job(t, c, 1); j.ResumeSeq != 3 {
		t.Fatalf("resume seq %d", j.ResumeSeq)
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: job(t, c, 1).Assignments[0].Provider, WrappedKey: []byte("w")}}})})
	q := provKey(t, job(t, c, 1).Assignments[0].Provider)
	if r := send(t, c, q, &ledger.MsgStartJob{JobID: 1, ResumeSeq: 4}); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("resume from a later checkpoint: %v", r.Err)
	}
	must(t, []ledger.TxResult{send(t, c, q, &ledger.MsgStartJob{JobID: 1, ResumeSeq: 2, ResumeNote: "checkpoint 3's blob does not match its hash"})})
	j := job(t, c, 1)
	if j.ResumeSeq != 2 || j.Checkpoints[len(j.Checkpoints)-1].Seq != 2 {
		t.Fatalf("after the fallback: seq %d kept %+v", j.ResumeSeq, j.Checkpoints)
	}
	checkWait(t, "after the fallback", j.CheckpointWait, ledger.Wait{Code: ledger.CheckpointFallback, Providers: []address.Address{q.Addr}, Seq: 2, ResumeSeq: 3, Text: "checkpoint 3's blob does not match its hash"})
	// Its next checkpoint is 3 again.
	c.Advance(5 * time.Second)
	must(t, []ledger.TxResult{send(t, c, q, ckptMsg(1, 3, 5, 2))})
}

// fullCkptJob is a checked job (two replicas from the start) that
// checkpoints.
func fullCkptJob() ledger.JobSpec {
	s := ckptJob("full")
	s.Verification = "full"
	s.MaxPricePerHour = 200_000
	return s
}

// TestCheckpointMismatchEscalates: two replicas whose checkpoints differ
// at a sequence cannot have a majority: both restart from the last
// checkpoint they agreed on, paid for what it covers, with a third
// replica.
func TestCheckpointMismatchEscalates(t *testing.T) {
	c := verifyChain(t, 4, nil)
	must(t, []ledger.TxResult{submit(t, c, fullCkptJob())})
	grantStart(t, c, 1)
	j := job(t, c, 1)
	a, b := provKey(t, j.Assignments[0].Provider), provKey(t, j.Assignments[1].Provider)
	c.Advance(60 * time.Second)
	must(t, []ledger.TxResult{send(t, c, a, ckptMsg(1, 1, 60, 1))})
	must(t, []ledger.TxResult{send(t, c, b, ckptMsg(1, 1, 60, 1))})
	if j := job(t, c, 1); j.State != ledger.JobRunning {
		t.Fatalf("agreeing checkpoints: %s %+v", j.State, j.Wait)
	}
	c.Advance(60 * time.Second)
	must(t, []ledger.TxResult{send(t, c, a, ckptMsg(1, 2, 120, 1))})
	res := send(t, c, b, ckptMsg(1, 2, 120, 0xBB))
	must(t, []ledger.TxResult{res})
	if !hasEvent(res, "job_checkpoint_mismatch") {
		t.Fatalf("no mismatch event: %+v", res.Events)
	}
	j = job(t, c, 1)
	if j.Replicas != 3 || j.ResumeSeq != 1 {
		t.Fatalf("after the mismatch: replicas %d resume %d state %s", j.Replicas, j.ResumeSeq, j.State)
	}
	checkWait(t, "after the mismatch", j.CheckpointWait, ledger.Wait{Code: ledger.WaitCheckpointDisagree, Seq: 2, Distinct: 2, Of: 2, Count: 3, ResumeSeq: 1, Kept: j.Progress})
	if len(j.Assignments) != 3 || j.State != ledger.JobAssigned {
		t.Fatalf("want three replicas placed at the end of the block: %d, %s", len(j.Assignments), j.State)
	}
	if j.Cost == 0 {
		t.Fatalf("the replicas were not paid for the agreed checkpoint 1")
	}
	// The three resume from 1; one disagrees at 2 and is outvoted.
	grantStart(t, c, 1)
	j = job(t, c, 1)
	c.Advance(30 * time.Second)
	var bad lt.Key
	for i, as := range j.Assignments {
		k := provKey(t, as.Provider)
		h := byte(1)
		if i == 2 {
			h, bad = 0xCC, k
		}
		must(t, []ledger.TxResult{send(t, c, k, ckptMsg(1, 2, 30, h))})
	}
	j = job(t, c, 1)
	if len(j.Assignments) != 2 || assignmentOf(j, bad.Addr) != nil || j.Replicas != 2 || provider(t, c, bad).Stake >= stake {
		t.Fatalf("outvoted replica kept: %d assignments, replicas %d, its stake %d", len(j.Assignments), j.Replicas, provider(t, c, bad).Stake)
	}
	checkWait(t, "outvoted at checkpoint 2", j.CheckpointWait, ledger.Wait{Code: ledger.CheckpointOutvoted, Seq: 2, Providers: []address.Address{bad.Addr}, Count: 2, Of: 3})
	if got := lastSlash(t, c, bad); got.Code != ledger.SlashCheckpointOutvoted || got.Job != 1 || got.Seq != 2 || got.Count != 2 || got.Of != 3 || got.Reason != "" {
		t.Errorf("outvoted replica's slash event %+v, want code %s, job 1, checkpoint 2, by 2 of 3", got, ledger.SlashCheckpointOutvoted)
	}
}

// TestCheckpointMismatchAtCapFails: at max_replicas without a majority
// the job fails and the rest of the escrow goes back.
func TestCheckpointMismatchAtCapFails(t *testing.T) {
	c := verifyChain(t, 4, func(p *ledger.Params) { p.MaxReplicas = 3 })
	must(t, []ledger.TxResult{submit(t, c, fullCkptJob())})
	grantStart(t, c, 1)
	j := job(t, c, 1)
	c.Advance(10 * time.Second)
	for i, as := range j.Assignments {
		must(t, []ledger.TxResult{send(t, c, provKey(t, as.Provider), ckptMsg(1, 1, 10, byte(i+1)))})
	}
	grantStart(t, c, 1) // three replicas from the beginning
	j = job(t, c, 1)
	if len(j.Assignments) != 3 {
		t.Fatalf("escalation placed %d", len(j.Assignments))
	}
	c.Advance(10 * time.Second)
	for i, as := range j.Assignments {
		must(t, []ledger.TxResult{send(t, c, provKey(t, as.Provider), ckptMsg(1, 1, 10, byte(i+1)))})
	}
	j = job(t, c, 1)
	if j.State != ledger.JobFailed || j.Verdict != ledger.VerdictNoMajority || j.Escrow != 0 || j.Cost != 0 {
		t.Fatalf("at the cap: %s %+v verdict %s cost %d", j.State, j.Wait, j.Verdict, j.Cost)
	}
	checkWait(t, "at the cap", j.Wait, ledger.Wait{Code: ledger.WaitCheckpointNoMajority, Of: 3, Seq: 1, Distinct: 3})
}

func hasEvent(r ledger.TxResult, typ string) bool {
	for _, e := range r.Events {
		if e.Type == typ {
			return true
		}
	}
	return false
}

var _ = address.Address{}

// TestResumedEscrowInvariant: a job resumed from a checkpoint that covers
// most of its timeout, on a dearer provider than the one it lost, keeps
// escrowCoversCharges true: what it may still be charged is the rest of
// its timeout, not all of it (a node checking invariants halted here).
func TestResumedEscrowInvariant(t *testing.T) {
	c := verifyChain(t, 2, nil)
	must(t, []ledger.TxResult{submit(t, c, ckptJob("ck"))})
	grantStart(t, c, 1)
	first := provKey(t, job(t, c, 1).Assignments[0].Provider)
	c.Advance(3000 * time.Second)
	must(t, []ledger.TxResult{send(t, c, first, ckptMsg(1, 1, 3000, 1))})
	must(t, []ledger.TxResult{send(t, c, first, &ledger.MsgSetProviderStatus{Online: false})})
	grantStart(t, c, 1)
	j := job(t, c, 1)
	if j.Assignments[0].Provider == first.Addr || j.Progress != 3000 {
		t.Fatalf("not resumed elsewhere: %+v progress %d", j.Assignments[0].Provider, j.Progress)
	}
	if err := ledger.CheckInvariants(c.KV); err != nil {
		t.Fatal(err)
	}
}
