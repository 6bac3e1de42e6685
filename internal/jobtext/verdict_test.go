package jobtext

import (
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestVerified: the verified line says what happened to a spot job's audit
// lottery: not picked, picked and agreed, picked and outvoted someone,
// picked and not run (and why). A lottery that did not pick the job is
// never reported as an audit that was drawn (issue 33).
func TestVerified(t *testing.T) {
	a3 := address.Address{3}
	one := []ledger.Assignment{{Provider: a1, Outcome: ledger.OutcomeMajority}}
	audited := []ledger.Assignment{{Provider: a1, Outcome: ledger.OutcomeMajority}, {Provider: a2, Extra: true, Outcome: ledger.OutcomeMajority}}
	escalated := []ledger.Assignment{{Provider: a1, Outcome: ledger.OutcomeMinority}, {Provider: a2, Extra: true, Outcome: ledger.OutcomeMajority}, {Provider: a3, Extra: true, Outcome: ledger.OutcomeMajority}}
	full := []ledger.Assignment{{Provider: a1, Outcome: ledger.OutcomeMajority}, {Provider: a2, Outcome: ledger.OutcomeMajority}}
	for _, c := range []struct {
		name string
		j    ledger.Job
		want string
	}{
		{"no verdict yet", ledger.Job{State: ledger.JobRunning, AuditDrawn: true}, ""},
		{"lottery held, not picked", ledger.Job{Verdict: ledger.VerdictUnverified, AuditDrawn: true, Assignments: one},
			"no: one replica; the spot audit lottery did not pick this job"},
		{"picked, not placed", ledger.Job{Verdict: ledger.VerdictUnverified, AuditDrawn: true, Assignments: one, Dropped: &ledger.Wait{Code: ledger.DropNotPlaced}},
			"no: the audit lottery picked this job, but its audit replica did not run (no provider could take the extra replica in time); one replica's result, unchecked"},
		{"picked, not placed (older record)", ledger.Job{Verdict: ledger.VerdictUnverified, AuditDrawn: true, Assignments: one, AuditDropped: "nobody took it"},
			"no: the audit lottery picked this job, but its audit replica did not run (nobody took it); one replica's result, unchecked"},
		{"no lottery", ledger.Job{Verdict: ledger.VerdictUnverified, Assignments: one},
			"no: one replica, no audit lottery held (spot)"},
		{"picked, ran, agreed", ledger.Job{Verdict: ledger.VerdictValidated, AuditDrawn: true, Assignments: audited},
			"yes: the audit lottery picked this job, and the audit replica returned the same result (2 of 2 replicas agree)"},
		{"picked, disagreed, escalated", ledger.Job{Verdict: ledger.VerdictValidated, AuditDrawn: true, Assignments: escalated},
			"yes: the audit lottery picked this job; 2 of 3 replicas returned the same result (1 outvoted)"},
		{"full", ledger.Job{Verdict: ledger.VerdictValidated, Assignments: full},
			"yes, 2 of 2 replicas returned the same result"},
		{"unchecked", ledger.Job{Verdict: ledger.VerdictUnchecked, Assignments: one}, "not checked (verification none, or not deterministic)"},
		{"no majority", ledger.Job{Verdict: ledger.VerdictNoMajority, Assignments: full}, "no majority among the replicas"},
	} {
		if got := Verified(&c.j); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
