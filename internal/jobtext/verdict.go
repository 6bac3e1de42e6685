package jobtext

import (
	"fmt"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Verified says how j's result was checked and what came of it, for the
// "verified:" line people read; "" before the job has a verdict.
//
// For a spot job the ledger records a lottery, not its outcome, in one
// field: AuditDrawn is set when the lottery is held, whether or not it
// picks the job. It picked the job when an audit replica exists (an Extra
// assignment) or was dropped (Dropped, or AuditDropped in an older
// record); otherwise the job ran once, unaudited, as the lottery decided.
func Verified(j *ledger.Job) string {
	switch j.Verdict {
	case "":
		return ""
	case ledger.VerdictValidated:
		agreed, outvoted := 0, 0
		for _, a := range j.Assignments {
			switch a.Outcome {
			case ledger.OutcomeMajority:
				agreed++
			case ledger.OutcomeMinority:
				outvoted++
			}
		}
		s := fmt.Sprintf("%d of %d replicas returned the same result", agreed, len(j.Assignments))
		if outvoted > 0 {
			s += fmt.Sprintf(" (%d outvoted)", outvoted)
		}
		if AuditPicked(j) {
			if len(j.Assignments) == 2 && agreed == 2 {
				return "yes: the audit lottery picked this job, and the audit replica returned the same result (2 of 2 replicas agree)"
			}
			return "yes: the audit lottery picked this job; " + s
		}
		return "yes, " + s
	case ledger.VerdictUnverified:
		switch {
		case AuditPicked(j) && Dropped(j) != "":
			return "no: the audit lottery picked this job, but its audit replica did not run (" + Dropped(j) + "); one replica's result, unchecked"
		case AuditPicked(j):
			return "no: the audit lottery picked this job, but its audit replica did not run; one replica's result, unchecked"
		case j.AuditDrawn:
			return "no: one replica; the spot audit lottery did not pick this job"
		}
		return "no: one replica, no audit lottery held (spot)"
	case ledger.VerdictUnchecked:
		return "not checked (verification none, or not deterministic)"
	case ledger.VerdictNoMajority:
		return "no majority among the replicas"
	}
	return j.Verdict
}

// AuditPicked reports whether the spot audit lottery picked j: an audit
// (or, after it, an escalation) replica was placed, or one was dropped.
// A job with verification full has its replicas planned; none is an
// audit.
func AuditPicked(j *ledger.Job) bool {
	if !j.AuditDrawn {
		return false
	}
	if j.Dropped != nil || j.AuditDropped != "" {
		return true
	}
	for _, a := range j.Assignments {
		if a.Extra {
			return true
		}
	}
	return false
}
