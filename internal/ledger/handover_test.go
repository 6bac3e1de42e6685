package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

var (
	jobKeyText   = []byte("AGE-SECRET-KEY-1THEJOBKEYTHEJOBKEYTHEJOBKEYTHEJOBKEYTHEJOBKEYTHEJ")
	auditSecret  = ledger.Hash{0x42, 7}
	primaryEphem = ledger.Hash{0x55, 1}
)

// offlineOwnerAudit submits a spot job with a key commitment, grants the
// primary (what the owner's CLI does at submit) and then never sends
// another tx: the owner is offline. It runs the primary to its commit and
// returns the primary and the audit replica's assignment, the auditor
// having posted its handover key.
func offlineOwnerAudit(t *testing.T) (*lt.Chain, lt.Key, lt.Key) {
	t.Helper()
	c := verifyChain(t, 3, nil)
	kc := ledger.JobKeyCommitment(jobKeyText)
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSubmitJob{Spec: spotJob("offline"), ConsumerKey: lt.AgeKey("consumer"), KeyCommitment: &kc})})
	primary := runReplicas(t, c, 1, 100, nil)[0]
	j := job(t, c, 1)
	if !j.AuditDrawn || len(j.Assignments) != 2 || j.Assignments[1].KeyGrant != nil {
		t.Fatalf("want an audit replica waiting for the key: %+v", j)
	}
	auditor := provKey(t, j.Assignments[1].Provider)
	pub, err := ledger.HandoverPublicKey(auditSecret)
	if err != nil {
		t.Fatal(err)
	}
	must(t, []ledger.TxResult{send(t, c, auditor, &ledger.MsgRequestKeyHandover{JobID: 1, PublicKey: pub})})
	return c, primary, auditor
}

func handOver(t *testing.T, c *lt.Chain, from, to lt.Key, key []byte) ledger.TxResult {
	t.Helper()
	a := assignmentOf(job(t, c, 1), to.Addr)
	sealed, err := ledger.SealHandover(key, *a.HandoverKey, primaryEphem, 1)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, c, from, &ledger.MsgHandOverKey{JobID: 1, Provider: to.Addr, Sealed: sealed})
}

// TestAuditRunsWithOwnerOffline: after submit the owner sends nothing
// more; the primary, once committed, hands the job key to the audit
// replica, which checks it against the owner's commitment, runs, and the
// job ends validated by two replicas (before: the audit waited for the
// owner's grant and was dropped, and the job ended unverified).
func TestAuditRunsWithOwnerOffline(t *testing.T) {
	c, primary, auditor := offlineOwnerAudit(t)
	// Only a committed replica may hand over; the auditor cannot grant
	// itself.
	if r := handOver(t, c, auditor, auditor, jobKeyText); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("handover by the uncommitted auditor: %v", r.Err)
	}
	must(t, []ledger.TxResult{handOver(t, c, primary, auditor, jobKeyText)})
	a := assignmentOf(job(t, c, 1), auditor.Addr)
	if a.HandedBy == nil || *a.HandedBy != primary.Addr {
		t.Fatalf("handover not recorded: %+v", a)
	}
	got, err := ledger.OpenHandover(a.KeyGrant, auditSecret, 1)
	if err != nil || ledger.JobKeyCommitment(got) != *job(t, c, 1).KeyCommitment {
		t.Fatalf("auditor opens %q, %v; want the committed key", got, err)
	}
	// A dispute of a correct handover is refused: nobody is slashed.
	if r := send(t, c, auditor, &ledger.MsgDisputeKeyHandover{JobID: 1, Secret: auditSecret}); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("dispute of a correct handover: %v", r.Err)
	}
	runReplicas(t, c, 1, 100, nil)
	must(t, []ledger.TxResult{reveal(t, c, 1, primary, false)})
	must(t, []ledger.TxResult{reveal(t, c, 1, auditor, false)})
	j := job(t, c, 1)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || j.AuditDropped != "" {
		t.Fatalf("got %s %s (%s, dropped %q), want succeeded validated", j.State, j.Verdict, j.Reason, j.AuditDropped)
	}
	if p := provider(t, c, primary); p.Slashed != 0 {
		t.Fatalf("honest primary slashed %d", p.Slashed)
	}
}

// TestWrongKeyHandoverSlashesPrimary: a primary that seals something other
// than the committed key is slashed on the auditor's dispute, which the
// ledger checks itself; a dispute with a secret that is not the posted
// key's is refused.
func TestWrongKeyHandoverSlashesPrimary(t *testing.T) {
	c, primary, auditor := offlineOwnerAudit(t)
	must(t, []ledger.TxResult{handOver(t, c, primary, auditor, []byte("AGE-SECRET-KEY-1NOTTHEJOBKEY"))})
	if r := send(t, c, auditor, &ledger.MsgDisputeKeyHandover{JobID: 1, Secret: ledger.Hash{1}}); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("dispute with a secret that is not the posted key's: %v", r.Err)
	}
	escrow := job(t, c, 1).Escrow
	ownerBefore := c.Balance(t, consumer.Addr)
	must(t, []ledger.TxResult{send(t, c, auditor, &ledger.MsgDisputeKeyHandover{JobID: 1, Secret: auditSecret})})
	j := job(t, c, 1)
	want := uint64(stake) * ledger.DefaultParams().SlashBps / 10_000
	p := provider(t, c, primary)
	if j.State != ledger.JobFailed || p.Slashed != want || assignmentOf(j, primary.Addr).Outcome != ledger.OutcomeBadHandover {
		t.Fatalf("after the dispute: %s (%s), primary slashed %d want %d", j.State, j.Reason, p.Slashed, want)
	}
	if got := c.Balance(t, consumer.Addr) - ownerBefore; got < escrow {
		t.Fatalf("owner got back %d, want at least the escrow %d", got, escrow)
	}
}

// TestWithheldHandoverSlashesPrimary: a primary that stays silent when the
// audit asks for the key (the owner offline too) does not keep an
// unverified result: at the deadline it is slashed as a withheld reveal
// is, and the job fails saying a drawn audit was dropped.
func TestWithheldHandoverSlashesPrimary(t *testing.T) {
	c, primary, _ := offlineOwnerAudit(t)
	c.Advance(time.Duration(ledger.DefaultParams().JobGrantTimeout+1) * time.Second)
	c.ApplyBlock(t)
	j := job(t, c, 1)
	if j.State != ledger.JobFailed || j.Verdict == ledger.VerdictUnverified || j.Dropped == nil || j.Dropped.Code != ledger.DropNoKey ||
		j.Wait == nil || j.Wait.Code != ledger.WaitHandoverWithheld || j.Wait.Slashed != 1 {
		t.Fatalf("got %s verdict %q dropped %+v wait %+v", j.State, j.Verdict, j.Dropped, j.Wait)
	}
	if p := provider(t, c, primary); p.Slashed == 0 || p.Unrevealed != 1 || assignmentOf(j, primary.Addr).Paid != 0 {
		t.Fatalf("silent primary: slashed %d unrevealed %d paid %d", p.Slashed, p.Unrevealed, assignmentOf(j, primary.Addr).Paid)
	}
}

// TestDroppedAuditIsRecorded: a job without a key commitment whose owner
// never grants the audit replica ends unverified, and the record says the
// drawn audit was dropped and why, never that none was drawn.
func TestDroppedAuditIsRecorded(t *testing.T) {
	c := verifyChain(t, 3, nil)
	must(t, []ledger.TxResult{submit(t, c, spotJob("nokc"))})
	primary := runReplicas(t, c, 1, 100, nil)[0]
	c.Advance(time.Duration(ledger.DefaultParams().JobGrantTimeout+1) * time.Second)
	c.ApplyBlock(t)
	must(t, []ledger.TxResult{reveal(t, c, 1, primary, false)})
	j := job(t, c, 1)
	if j.Verdict != ledger.VerdictUnverified || !j.AuditDrawn || j.Dropped == nil || j.Dropped.Code != ledger.DropNotGranted {
		t.Fatalf("got verdict %q drawn %v dropped %+v", j.Verdict, j.AuditDrawn, j.Dropped)
	}
	// Without a commitment nobody but the owner can give the key.
	pub, _ := ledger.HandoverPublicKey(auditSecret)
	c2 := verifyChain(t, 3, nil)
	must(t, []ledger.TxResult{submit(t, c2, spotJob("nokc"))})
	runReplicas(t, c2, 1, 100, nil)
	aud := provKey(t, job(t, c2, 1).Assignments[1].Provider)
	if r := send(t, c2, aud, &ledger.MsgRequestKeyHandover{JobID: 1, PublicKey: pub}); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("handover request without a key commitment: %v", r.Err)
	}
}

// TestHandoverSealRoundTrip: only the per-job secret opens a handover.
func TestHandoverSealRoundTrip(t *testing.T) {
	pub, err := ledger.HandoverPublicKey(auditSecret)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := ledger.SealHandover(jobKeyText, pub, primaryEphem, 9)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ledger.OpenHandover(sealed, auditSecret, 9); err != nil || string(got) != string(jobKeyText) {
		t.Fatalf("open: %q, %v", got, err)
	}
	if _, err := ledger.OpenHandover(sealed, ledger.Hash{1}, 9); err == nil {
		t.Fatal("another secret opened the handover")
	}
	if _, err := ledger.OpenHandover(sealed, auditSecret, 10); err == nil {
		t.Fatal("the handover opened for another job")
	}
}
