// Package jobtext renders why a job, a service, a proposal or a slash is
// where it is as the sentences people read (the API's reason fields, the
// CLI and the dashboard). The ledger records only a code and the numbers
// behind it (ledger.Wait): a sentence in consensus state would make a
// reworded message a fork. So this package may change its words freely;
// the ledger must never import it.
//
// A record written before the ledger's record version 6 holds a sentence
// itself (Job.Reason and the like): that is returned as it is.
package jobtext

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Job says why job j is where it is: what it waits for, or why it ended;
// "" when there is nothing to say.
func Job(j *ledger.Job) string {
	if j.Reason != "" {
		return j.Reason // a record from before version 6
	}
	if j.Wait == nil || (j.Done() && !Ended(j.Wait.Code)) {
		return "" // a finished job's leftover wait says nothing about how it ended
	}
	return JobWait(j.Wait, &j.Spec)
}

// JobWait renders a job's wait w; spec is the job's (a placement miss
// names its needs).
func JobWait(w *ledger.Wait, spec *ledger.JobSpec) string {
	switch w.Code {
	case ledger.WaitQueued:
		return "waiting for the scheduler at the end of the block"
	case ledger.WaitUnplaced:
		if w.Miss == nil {
			return "waiting for a provider"
		}
		return JobMiss(w.Miss, spec)
	case ledger.WaitPlaced:
		return "placed; waiting for the owner to grant the job key"
	case ledger.WaitExtraPlaced:
		return "extra replica placed; waiting for its job key (from the owner, or handed over by a committed replica)"
	case ledger.WaitExtraPlacedOwnerKey:
		return "extra replica placed; waiting for the owner to grant it the job key"
	case ledger.WaitKeyGranted:
		return "key granted; waiting for the provider to start"
	case ledger.WaitKeyGrantedExtra:
		return "key granted; waiting for the new replica to start"
	case ledger.WaitHandoverRequested:
		return "waiting for the new replica's job key (from the owner, or handed over by a committed replica)"
	case ledger.WaitKeyHandedOver:
		return "key handed over; waiting for the new replica to start"
	case ledger.WaitExtraRunning:
		return "the extra replica is running"
	case ledger.WaitReported:
		return fmt.Sprintf("%d of %d replicas reported", w.Count, w.Of)
	case ledger.WaitAudit:
		return "audit: another provider re-runs the job to check the result"
	case ledger.WaitRevealing:
		return fmt.Sprintf("revealing: %d of %d replicas opened their results", w.Count, w.Of)
	case ledger.WaitEscalating:
		return fmt.Sprintf("replicas disagree (%d results from %d replicas); adding replica %d of at most %d", w.Distinct, w.Of, w.Count, w.Limit)
	case ledger.WaitJudging:
		return fmt.Sprintf("outputs differ; judging them within the job's tolerance (round %d): %d of %d replicas committed their judgment", w.Seq, w.Count, w.Of)
	case ledger.WaitJudgingReveal:
		return fmt.Sprintf("outputs differ; judging them within the job's tolerance (round %d): %d of %d replicas revealed their judgment", w.Seq, w.Count, w.Of)
	case ledger.WaitCheckpointDisagree:
		return fmt.Sprintf("replicas disagree at checkpoint %d (%d distinct states from %d replicas); restarting with %d replicas%s", w.Seq, w.Distinct, w.Of, w.Count, resume(w))
	case ledger.WaitPreempted:
		return fmt.Sprintf("preempted by %s job %d on %s: it may checkpoint until %d, then it is requeued", w.Tier, w.Job, addrs(w.Providers), w.At)
	case ledger.WaitPreemptRequeued:
		return fmt.Sprintf("preempted by a higher tier on %s; requeued%s", addrs(w.Providers), resume(w))
	case ledger.WaitReplacing:
		return fmt.Sprintf("%s (%s); placing another replica", cause(w), addrs(w.Providers))
	case ledger.WaitRequeued:
		return fmt.Sprintf("%s (%s); placing it again", cause(w), addrs(w.Providers))
	case ledger.WaitCancelled:
		return "cancelled by its owner"
	case ledger.WaitKeyNotGranted:
		return fmt.Sprintf("the owner did not grant the job key in time; paid %dusync for the provider slots it held", w.Amount)
	case ledger.WaitGaveUp:
		return fmt.Sprintf("%s (%s); gave up after %d placements", cause(w), addrs(w.Providers), w.Count)
	case ledger.WaitPreemptUnfunded:
		return fmt.Sprintf("preempted by a higher tier on %s, and its owner has %dusync of the %dusync another run needs in escrow; the rest is refunded", addrs(w.Providers), w.Amount, w.Needed)
	case ledger.WaitBumpUnfunded:
		return fmt.Sprintf("its placement on %s was bumped before its key was granted, and its owner has %dusync of the %dusync another run needs in escrow; the rest is refunded", addrs(w.Providers), w.Amount, w.Needed)
	case ledger.WaitBadHandover:
		return fmt.Sprintf("the new replica could not run: %s handed it a key that is not the job's (slashed %dusync); refunded", addrs(w.Providers), w.Amount)
	case ledger.WaitHandoverWithheld:
		return fmt.Sprintf("the new replica could not run: %s; %d committed replica(s) slashed for withholding the key; refunded", dropText(ledger.DropNoKey), w.Slashed)
	case ledger.WaitNoMajority:
		return fmt.Sprintf("no majority among %d replicas (%d distinct results); refunded in full, nobody who revealed slashed", w.Of, w.Distinct) + unrevealedSlashed(w)
	case ledger.WaitLoneResult:
		return fmt.Sprintf("the one result revealed (by %d of %d replicas) is not a majority and no further replica could check it; refunded in full, nobody who revealed paid or slashed", w.Count, w.Of) + unrevealedSlashed(w)
	case ledger.WaitNoneRevealed:
		return fmt.Sprintf("no replica revealed its result in time (%d committed, each slashed); refunded in full", w.Of)
	case ledger.WaitCheckpointNoMajority:
		return fmt.Sprintf("no majority among %d replicas at checkpoint %d (%d distinct states); the rest of the escrow is refunded, nobody slashed", w.Of, w.Seq, w.Distinct)
	case ledger.WaitJobFailed:
		return "the job failed: " + w.Text + agree(w, "; ")
	case ledger.WaitAgreed:
		return agree(w, "")
	}
	return unknown(w)
}

// Ended reports whether code says why a job ended (rather than what it
// waits for).
func Ended(code string) bool {
	switch code {
	case ledger.WaitCancelled, ledger.WaitKeyNotGranted, ledger.WaitGaveUp, ledger.WaitPreemptUnfunded, ledger.WaitBumpUnfunded,
		ledger.WaitBadHandover, ledger.WaitHandoverWithheld, ledger.WaitNoMajority, ledger.WaitLoneResult,
		ledger.WaitNoneRevealed, ledger.WaitCheckpointNoMajority, ledger.WaitJobFailed, ledger.WaitAgreed:
		return true
	}
	return false
}

func agree(w *ledger.Wait, sep string) string {
	if w.Count == 0 {
		return ""
	}
	return fmt.Sprintf("%s%d of %d replicas agree", sep, w.Count, w.Of)
}

func unrevealedSlashed(w *ledger.Wait) string {
	if w.Slashed == 0 {
		return ""
	}
	return fmt.Sprintf("; %d that did not reveal slashed", w.Slashed)
}

// resume is where a requeued job resumes from, as a suffix.
func resume(w *ledger.Wait) string {
	if w.ResumeSeq == 0 {
		return ""
	}
	return fmt.Sprintf("; resumes from checkpoint %d (%ds of run kept)", w.ResumeSeq, w.Kept)
}

// cause says why providers were taken off a job (Wait.Cause), with where
// it resumes from.
func cause(w *ledger.Wait) string {
	var s string
	switch w.Cause {
	case ledger.CauseNotStarted:
		s = "provider did not start in time"
	case ledger.CauseNoResult:
		s = "provider did not report a result in time"
	case ledger.CauseOffline:
		s = "provider went offline"
	case ledger.CauseReleased:
		s = "provider handed the job back: " + w.Text
	case ledger.CauseEngineChanged:
		s = "provider now runs another wasm engine than " + w.Text
	case ledger.CauseBumped:
		s = "placement bumped: another job's key was granted first and took the provider's slot"
	default:
		s = "provider replaced (" + w.Cause + ")"
	}
	return s + resume(w)
}

func addrs(as []address.Address) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.String()
	}
	return strings.Join(names, ",")
}

func unknown(w *ledger.Wait) string {
	// A code this build does not know (a newer node's): say it plainly.
	return "wait code " + w.Code
}

// Dropped says why j's drawn audit or escalation replica did not run; ""
// when none was dropped.
func Dropped(j *ledger.Job) string {
	if j.AuditDropped != "" {
		return j.AuditDropped
	}
	if j.Dropped == nil {
		return ""
	}
	w := j.Dropped
	switch w.Code {
	case ledger.DropNoMoreReplacements:
		return cause(w) + "; no more replacements"
	case ledger.DropBumpUnfunded:
		return fmt.Sprintf("its placement on %s was bumped before its key was granted, and the owner has %dusync of the %dusync its escrow must hold for another", addrs(w.Providers), w.Amount, w.Needed)
	}
	return dropText(w.Code)
}

func dropText(code string) string {
	switch code {
	case ledger.DropNotPlaced:
		return "no provider could take the extra replica in time"
	case ledger.DropNotGranted:
		return "the owner did not grant the extra replica the job key in time"
	case ledger.DropNoKey:
		return "neither the owner nor a committed replica gave the new replica the job key in time"
	}
	return "dropped (" + code + ")"
}

// CheckpointNote is the last thing to say about j's checkpoints; "" when
// there is nothing.
func CheckpointNote(j *ledger.Job) string {
	if j.CheckpointNote != "" {
		return j.CheckpointNote
	}
	if j.CheckpointWait == nil {
		return ""
	}
	return Checkpoint(j.CheckpointWait)
}

// Checkpoint renders a checkpoint note w.
func Checkpoint(w *ledger.Wait) string {
	switch w.Code {
	case ledger.CheckpointRefused:
		return fmt.Sprintf("%s could not take checkpoint %d: %s", addrs(w.Providers), w.Seq, w.Text)
	case ledger.CheckpointFallback:
		what := "the beginning"
		if w.Seq != 0 {
			what = fmt.Sprintf("checkpoint %d", w.Seq)
		}
		return fmt.Sprintf("%s started from %s instead of checkpoint %d: %s", addrs(w.Providers), what, w.ResumeSeq, w.Text)
	case ledger.CheckpointOutvoted:
		return fmt.Sprintf("replicas disagree at checkpoint %d: %s outvoted by %d of %d and dropped", w.Seq, addrs(w.Providers), w.Count, w.Of)
	case ledger.WaitCheckpointDisagree:
		return JobWait(w, nil)
	}
	return unknown(w)
}

// Released says which provider last handed j back and why; "" when none
// did.
func Released(j *ledger.Job) string {
	if j.ReleasedBy == nil {
		return j.Released // "" or, before version 6, "provider: reason"
	}
	return j.ReleasedBy.String() + ": " + j.Released
}

// Service says why service s is where it is; "" when there is nothing
// to say.
func Service(s *ledger.Service) string {
	if s.Reason != "" {
		return s.Reason
	}
	if s.Wait == nil {
		return ""
	}
	w := s.Wait
	switch w.Code {
	case ledger.WaitUnplaced:
		if w.Miss == nil {
			return "waiting for a provider"
		}
		return ServiceMiss(w.Miss, &s.Spec)
	case ledger.WaitBudgetRanOut:
		why := "the budget ran out at " + unixString(w.At)
		if w.Warned != 0 {
			why += "; its owner was warned at " + unixString(w.Warned)
		}
		return why
	case ledger.WaitStoppedByOwner:
		return "stopped by its owner at " + unixString(w.At)
	case ledger.WaitReplicasFailed:
		s := fmt.Sprintf("%d replicas failed (given back or never ready) while none stayed ready for %ds", w.Count, w.Limit)
		if w.Cause != "" {
			s += "; the last: " + endText(w.Cause, w.Text, w.Seconds)
		}
		return s
	}
	return unknown(w)
}

// ReplicaEnd says why a service replica ended.
func ReplicaEnd(e *ledger.ReplicaEnd) string {
	if e.Code == "" {
		return e.Why
	}
	return endText(e.Code, e.Text, e.Seconds)
}

func endText(code, text string, seconds uint64) string {
	with := func(s string) string {
		if text != "" {
			return s + ": " + text
		}
		return s
	}
	switch code {
	case ledger.EndReleased:
		return with("released by its provider")
	case ledger.EndEvicted:
		return with("evicted by its owner")
	case ledger.EndDisputed:
		return "its answer was outvoted by two other replicas in a dispute; slashed"
	case ledger.EndNotReady:
		return fmt.Sprintf("not ready within %ds of its placement", seconds)
	case ledger.EndSilent:
		return "provider stopped reporting"
	case ledger.EndOffline:
		return "provider went offline"
	case ledger.EndUnreachable:
		return "validators holding more than two thirds of the voting power could not reach it"
	case ledger.EndTEELapsed:
		return "provider's TEE attestation ended (expired, or its encryption key changed)"
	case ledger.EndUnwitnessed:
		return fmt.Sprintf("no quorum of witnesses saw it serve for %ds while they saw other replicas serve", seconds)
	case ledger.EndScaledDown:
		return "scaled down by its owner"
	case ledger.EndServiceStopped:
		return "service " + ledger.ServiceStopped
	case ledger.EndServiceFailed:
		return "service " + ledger.ServiceFailed
	case ledger.EndLegacy:
		return text
	}
	return with("ended (" + code + ")")
}

func unixString(t int64) string { return time.Unix(t, 0).UTC().Format(time.RFC3339) }

// Proposal says why proposal p ended as it did; "" while it is open.
func Proposal(p *ledger.Proposal) string {
	if p.Reason != "" {
		return p.Reason
	}
	if p.Wait == nil {
		return ""
	}
	w := p.Wait
	var t ledger.Tally
	if p.Tally != nil {
		t = *p.Tally
	}
	switch w.Code {
	case ledger.WaitDepositShort:
		return fmt.Sprintf("deposits reached %d of the %d usync needed by height %d", w.Amount, w.Needed, w.Height)
	case ledger.WaitNoQuorum:
		return fmt.Sprintf("no quorum: %s of the bonded stake voted, %s needed", share(t.Voted(), t.Bonded), ppmPercent(w.PPM))
	case ledger.WaitVetoed:
		return fmt.Sprintf("vetoed: %s of the votes were veto, more than %s", share(t.Veto, t.Voted()), ppmPercent(w.PPM))
	case ledger.WaitAllAbstained:
		return "every vote abstained"
	case ledger.WaitPassed:
		return fmt.Sprintf("%s yes of yes, no and veto, more than %s", share(t.Yes, t.Yes+t.No+t.Veto), ppmPercent(w.PPM))
	case ledger.WaitRejected:
		return fmt.Sprintf("%s yes of yes, no and veto, %s needed", share(t.Yes, t.Yes+t.No+t.Veto), ppmPercent(w.PPM))
	case ledger.WaitNotExecuted:
		why := "(" + w.Cause + ")"
		switch w.Cause {
		case ledger.NotExecutedParams:
			why = "its parameter changes are not valid against the parameters it passed under"
		case ledger.NotExecutedTreasury:
			why = fmt.Sprintf("the treasury holds %d usync, the spend is %d", w.Amount, w.Needed)
		case ledger.NotExecutedRoots:
			why = "its roots of trust no longer apply to the chain's: another change passed first"
		case ledger.NotExecutedOverflow:
			why = fmt.Sprintf("the balance of %s would overflow", addrs(w.Providers))
		}
		return "passed but not executed: " + why
	}
	return unknown(w)
}

// share is a of b as a percentage, as the ledger's tally computes it
// (parts per million, rounded down).
func share(a, b uint64) string {
	if b == 0 {
		return "0%"
	}
	return ppmPercent(mulDiv(a, 1_000_000, b))
}

func ppmPercent(v uint64) string {
	if v%10_000 == 0 {
		return fmt.Sprintf("%d%%", v/10_000)
	}
	return fmt.Sprintf("%d.%04d%%", v/10_000, v%10_000)
}

// mulDiv is a×b/c rounded down, as the ledger's.
func mulDiv(a, b, c uint64) uint64 {
	var x big.Int
	x.Mul(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b))
	return x.Div(&x, new(big.Int).SetUint64(c)).Uint64()
}

// Slash says why a provider was slashed.
func Slash(e *ledger.SlashEvent) string {
	switch e.Code {
	case "":
		return e.Reason
	case ledger.SlashOutvoted:
		return fmt.Sprintf("job %d: outvoted by %d of %d replicas", e.Job, e.Count, e.Of)
	case ledger.SlashUnrevealed:
		return fmt.Sprintf("job %d: committed a result and did not reveal it", e.Job)
	case ledger.SlashBadHandover:
		return fmt.Sprintf("job %d: handed a new replica a key that is not the job's", e.Job)
	case ledger.SlashWithheldKey:
		return fmt.Sprintf("job %d: did not hand the job key to the replica that waited for it", e.Job)
	case ledger.SlashCheckpointOutvoted:
		return fmt.Sprintf("job %d: checkpoint %d outvoted by %d of %d replicas", e.Job, e.Seq, e.Count, e.Of)
	case ledger.SlashJudgeOutvoted:
		return fmt.Sprintf("job %d: judged the replicas' outputs against %d of %d judges", e.Job, e.Count, e.Of)
	case ledger.SlashJudgeSilent:
		return fmt.Sprintf("job %d: did not commit or reveal its judgment of the replicas' outputs", e.Job)
	case ledger.SlashHardware:
		return "hardware challenge failed"
	case ledger.SlashServiceOutvoted:
		return fmt.Sprintf("service %d: an answer outvoted by %d of %d replicas", e.Service, e.Count, e.Of)
	}
	return "slashed (" + e.Code + ")"
}

// ChallengeFailure says why a hardware challenge was ruled failed, and on
// which device.
func ChallengeFailure(f *ledger.ChallengeFailure) string {
	dev := "the CPU"
	if f.Device > 0 {
		dev = fmt.Sprintf("gpus[%d]", f.Device-1)
		if f.DeviceUUID != "" {
			dev += fmt.Sprintf(" %q", f.DeviceUUID)
		}
	}
	switch f.Code {
	case ledger.ChallengeWrongOpening:
		return dev + ": wrong opening: " + openingCause(f.Cause)
	case ledger.ChallengeOverclaim:
		return fmt.Sprintf("%s: commit %d ms after the challenge, deadline %d ms: shows %d GOPS, claimed %d: a second proof in a row under 1/%d of the claim",
			dev, f.ElapsedMillis, f.DeadlineMillis, f.ShownGOPS, f.ClaimedGOPS, f.Factor)
	case ledger.ChallengeMissLimit:
		miss := "no opening in time"
		if f.Cause == ledger.ChallengeCauseNoCommit {
			miss = fmt.Sprintf("no commit within %d ms (deadline %d ms at the claimed %d GOPS)", f.CommitByMillis, f.DeadlineMillis, f.ClaimedGOPS)
		}
		return fmt.Sprintf("%s: %s: %d challenges missed in a row", dev, miss, f.Misses)
	}
	return dev + ": failed (" + f.Code + ")"
}

func openingCause(cause string) string {
	switch cause {
	case ledger.ChallengeCauseLeaf:
		return "an opened leaf is not the selected one"
	case ledger.ChallengeCauseProof:
		return "a Merkle proof does not lead to the committed root"
	case ledger.ChallengeCauseEntry:
		return "an opened entry is not the product A·B"
	}
	return "the opening does not verify"
}
