package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/verify"
)

// Proof of Sync, result side (DESIGN.md section 5): replicated runs of
// deterministic jobs, commit–reveal, majority verdicts, slashing and the
// per-class records that drive adaptive replication.
//
// A checked job (deterministic, verification spot or full) goes through:
//
//  1. run: each assigned provider runs it and sends MsgCommitResult with
//     H(manifest ‖ provider ‖ salt) and its metered seconds. Nothing in a
//     commitment helps another replica: it is salted and bound to its
//     sender.
//  2. audit draw (spot only, once): when every replica has committed, the
//     block's seed decides whether an extra replica re-runs the job: always
//     while the provider has fewer than params.spot_warmup consecutive
//     validated results in the job's hardware class, then with probability
//     max(spot_floor, 1/consecutive). The draw comes after the commit, so a
//     provider cannot know while it runs whether it will be checked.
//  3. reveal: every committed replica opens its commitment with
//     MsgRevealResult (salt and full result) before the reveal deadline.
//  4. verdict: a result that more than half of the committed replicas
//     revealed wins. With one replica (spot, not audited) it is accepted
//     unverified. Without a majority the job gets one more replica, up to
//     params.max_replicas, and goes back to 1; at that many, or when that
//     replica could not be added (no provider took it in time, or it did
//     not commit and could not be replaced: dropReplicas), it fails, the
//     owner is refunded in full and nobody who revealed is paid or
//     slashed. The same holds for a lone result whose only check went
//     silent: a committed replica that does not reveal never makes another
//     replica's result count, or a provider would gain by killing (or
//     being) the replica that checks it.
//
// Winners are paid their metered time at their agreed price: the replicas
// the owner planned for (1 for spot, 2 for full) from the job's escrow,
// audit and escalation replicas from the treasury. Replicas in the
// minority of a decided vote are slashed params.slash_bps of their stake;
// params.slash_compensation_bps of that goes to the job's owner, the rest
// to the treasury. A replica that committed but did not reveal by the time
// the job is decided (the others decided it, or the reveal window closed)
// is treated exactly like an outvoted one: not paid, slashed the same, and
// counted as invalid for its reputation. Otherwise a provider that knows its
// result is wrong would withhold it rather than reveal and be outvoted, and
// honesty (revealing, even a minority result) would cost more than silence.
//
// Jobs that are not checked (verification none, or not deterministic)
// commit their result in the clear and are settled at once.
//
// Step 4 is two steps in the code: verify.Tally (internal/ledger/verify)
// decides from the replicas' revealed results alone, without state, and
// applyVerdict below applies its Outcome (payments, slashes, records,
// the job's verdict, wait and events).

// Verdicts of a finished job.
const (
	VerdictValidated  = "validated"   // a majority of two or more replicas agreed
	VerdictUnverified = "unverified"  // one replica, not audited
	VerdictUnchecked  = "unchecked"   // verification none or not deterministic
	VerdictNoMajority = "no_majority" // replicas disagreed up to max_replicas
)

// Outcomes of an assignment in a verdict.
const (
	OutcomeMajority   = "majority"
	OutcomeMinority   = "minority"
	OutcomeUnrevealed = "unrevealed"
	OutcomeNoMajority = "no_majority"
	// OutcomeBadHandover: it handed an audit replica a key that is not
	// the job's (handover.go); OutcomeWithheldKey: it handed over nothing
	// while an audit replica waited for the key.
	OutcomeBadHandover = "bad_handover"
	OutcomeWithheldKey = "withheld_key"
)

// AuditRatePPM is the probability, in parts per million, that a spot job
// whose replica has consecutive validated results in its class is audited.
func AuditRatePPM(consecutive uint64, p Params) uint64 {
	if consecutive < p.SpotWarmup {
		return ppm
	}
	return max(p.SpotFloorPPM, ppm/max(consecutive, 1))
}

// ResultCommitment is what MsgCommitResult carries for a checked job.
func ResultCommitment(manifest Hash, provider address.Address, salt Hash) Hash {
	h := sha256.New()
	h.Write([]byte("gpunet/result-commit/v1\x00"))
	h.Write(manifest[:])
	h.Write(provider[:])
	h.Write(salt[:])
	var out Hash
	h.Sum(out[:0])
	return out
}

// MsgRevealResult opens a replica's commitment.
type MsgRevealResult struct {
	JobID  uint64    `json:"job_id"`
	Salt   Hash      `json:"salt"`
	Result JobResult `json:"result"`
}

// Type implements Msg.
func (*MsgRevealResult) Type() MsgType { return MsgTypeRevealResult }

// ValidateBasic implements Msg.
func (m *MsgRevealResult) ValidateBasic() error { return validateResult(&m.Result) }

func validateResult(r *JobResult) error {
	if !ValidBlobRef(r.OutputBlob) {
		return invalid("result.output_blob %q: want sha256:<64 hex>", r.OutputBlob)
	}
	if r.LogBlob != "" && !ValidBlobRef(r.LogBlob) {
		return invalid("result.log_blob %q: want sha256:<64 hex>", r.LogBlob)
	}
	if len(r.Reason) > 512 {
		return invalid("result.reason is longer than 512 bytes")
	}
	if r.Height != 0 {
		return invalid("result.height is set by the ledger")
	}
	return checkDataAt("result.data_at", r.DataAt)
}

// afterCommits runs when every wanted replica has committed.
func afterCommits(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	if !j.Spec.Checked() {
		return decide(o, j, p, info, true)
	}
	if j.Spec.Verification == VerifySpot && !j.AuditDrawn && len(j.Assignments) > 0 {
		j.AuditDrawn = true
		a := &j.Assignments[0]
		pr, err := mustProvider(o, a.Provider)
		if err != nil {
			return nil, err
		}
		rate := AuditRatePPM(pr.Consecutive(a.Class), p)
		if draw(info.Seed, "audit", j.ID)%ppm < rate && uint64(len(j.Assignments)) < p.MaxReplicas {
			old := j.Deadline
			j.Replicas++
			j.Revealing = false
			j.State = JobVerifying
			j.setWait(Wait{Code: WaitAudit})
			j.Deadline = info.Time.Unix() + int64(p.JobGrantTimeout) // to be placed, else it goes on without
			enqueueJob(o, j)
			setJob(o, j, old)
			return []Event{jobEvent("job_audit", j, Attr{"rate_ppm", strconv.FormatUint(rate, 10)})}, nil
		}
	}
	return openReveal(o, j, p, info)
}

// openReveal asks every committed replica to open its commitment.
func openReveal(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	old := j.Deadline
	j.State = JobVerifying
	j.Revealing = true
	j.setWait(revealingWait(j))
	j.Deadline = info.Time.Unix() + int64(p.RevealTimeout)
	setJob(o, j, old)
	return []Event{jobEvent("job_reveal", j)}, nil
}

// revealingWait says how many of j's replicas opened their results.
func revealingWait(j *Job) Wait {
	return Wait{Code: WaitRevealing, Count: uint64(revealed(j)), Of: uint64(len(j.Assignments))}
}

func revealed(j *Job) int {
	n := 0
	for _, a := range j.Assignments {
		if a.Result != nil {
			n++
		}
	}
	return n
}

// draw returns 8 bytes of the block's randomness for (what, id).
func draw(seed Hash, what string, id uint64) uint64 {
	h := sha256.New()
	h.Write([]byte("gpunet/draw/v1\x00" + what + "\x00"))
	h.Write(seed[:])
	h.Write(binary.BigEndian.AppendUint64(nil, id))
	var s [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(s[:0]))
}

func execRevealResult(o *Overlay, from address.Address, m *MsgRevealResult, p Params, info BlockInfo) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	if a.Commitment == nil {
		return nil, fmt.Errorf("%s has not committed a result for job %d: %w", from, j.ID, ErrJobState)
	}
	if a.Result != nil {
		return nil, fmt.Errorf("%s already revealed its result for job %d: %w", from, j.ID, ErrJobState)
	}
	if !j.Revealing {
		return nil, fmt.Errorf("job %d is not revealing yet: wait until every replica committed: %w", j.ID, ErrJobState)
	}
	if ResultCommitment(m.Result.ManifestHash, from, m.Salt) != *a.Commitment {
		return nil, fmt.Errorf("the revealed result of %s for job %d does not open its commitment: %w", from, j.ID, ErrInvalidMsg)
	}
	r := m.Result
	r.Height = uint64(info.Height)
	r.MeteredSeconds = a.Metered
	a.Result = &r
	events := []Event{jobEvent("job_revealed", j, Attr{"provider", from.String()})}
	if revealed(j) < len(j.Assignments) {
		old := j.Deadline
		j.setWait(revealingWait(j))
		setJob(o, j, old)
		return events, nil
	}
	evs, err := decide(o, j, p, info, true)
	return append(events, evs...), err
}

// resultKey identifies a revealed result in the tally: two replicas agree
// iff their keys are equal.
func resultKey(r *JobResult) string {
	return fmt.Sprintf("%x/%d/%t", r.ManifestHash[:], r.ExitCode, r.Failed)
}

// decide ends the vote among the committed replicas: the tally
// (verify.Tally, internal/ledger/verify) decides from the replicas' revealed
// results alone, and applyVerdict makes it so. mayEscalate is false when
// the job has just lost the replica an escalation asked for (dropReplicas):
// asking again with the same replicas would decide the same way at every
// deadline, and the job would stay verifying for as long as no provider is
// free. Every escalation is also a placement, so the job's placement budget
// (job_max_attempts + max_replicas, as for replacements) bounds them.
//
// A job with a compare rule whose revealed results differ goes to a
// judging round first (judgment.go); its settlement tallies and applies
// the results in the same way.
func decide(o *Overlay, j *Job, p Params, info BlockInfo, mayEscalate bool) ([]Event, error) {
	if replicated(j) {
		return decideGang(o, j, p, info, mayEscalate) // gang_verify.go
	}
	if judgeable(j) {
		return openJudging(o, j, p, info, !mayEscalate)
	}
	keys := make([]string, len(j.Assignments))
	for i, a := range j.Assignments {
		if a.Result != nil {
			keys[i] = resultKey(a.Result)
		}
	}
	return applyVerdict(o, j, withoutSettled(j, tallyKeys(j, keys, p, mayEscalate)), p, info)
}

// applyVerdict turns a tally's outcome into state: the majority is paid and
// delivered, the minority slashed; without a majority the job gets another
// replica or fails. It is the only place a result verdict touches staking,
// settlement, reputation and rewards.
func applyVerdict(o *Overlay, j *Job, out verify.Outcome, p Params, info BlockInfo) ([]Event, error) {
	n := out.N
	var events []Event
	switch out.Verdict {
	case verify.Escalate:
		// One more replica; the revealed results stand.
		old := j.Deadline
		j.Replicas = uint64(out.Replicas)
		j.Revealing = false
		j.State = JobVerifying
		j.setWait(Wait{Code: WaitEscalating, Distinct: uint64(out.Results), Of: uint64(n), Count: uint64(out.Replicas), Limit: p.MaxReplicas})
		j.Deadline = info.Time.Unix() + int64(p.JobGrantTimeout) // to be placed, else it is decided without
		enqueueJob(o, j)
		setJob(o, j, old)
		return []Event{jobEvent("job_escalated", j, Attr{"replicas", strconv.Itoa(out.Replicas)})}, nil
	case verify.NoMajority:
		// No majority, and no replica can be added (the cap, the
		// placement budget, or the one asked for was dropped), or nobody
		// revealed: the job fails, the owner gets everything back, nobody
		// who revealed is paid or slashed; a replica that withheld its
		// result is slashed (penalizeUnrevealed). A lone result (every
		// revealed replica agrees, the others are silent) ends so too:
		// paying or delivering it would let its provider gain by
		// silencing the replica that checks it.
		for i := range j.Assignments {
			a := &j.Assignments[i]
			if judgeSettled(a) {
				continue // slashed already by a judging round
			}
			a.Outcome = OutcomeNoMajority
			if out.Fate(i) == verify.Unrevealed {
				ev, err := penalizeUnrevealed(o, j, a, p, info)
				if err != nil {
					return nil, err
				}
				events = append(events, ev)
			}
		}
		j.Verdict = VerdictNoMajority
		j.State = JobFailed
		withheld := uint64(len(out.Unrevealed))
		switch out.Results {
		case 0:
			j.setWait(Wait{Code: WaitNoneRevealed, Of: uint64(n)})
		case 1:
			j.setWait(Wait{Code: WaitLoneResult, Count: uint64(len(out.Undecided)), Of: uint64(n), Slashed: withheld})
		default:
			j.setWait(Wait{Code: WaitNoMajority, Of: uint64(n), Distinct: uint64(out.Results), Slashed: withheld})
		}
		evs, err := finishJob(o, j, info)
		return append(events, evs...), err
	case verify.Unchecked:
		j.Verdict = VerdictUnchecked
	case verify.Unverified:
		j.Verdict = VerdictUnverified
	case verify.Validated:
		j.Verdict = VerdictValidated
	default:
		return nil, fmt.Errorf("job %d: tally returned verdict %v: %w", j.ID, out.Verdict, ErrInternal)
	}
	votes := len(out.Winners)
	winner := j.Assignments[out.Delivered]
	j.Delivered = &winner.Provider
	for i := range j.Assignments {
		a := &j.Assignments[i]
		switch out.Fate(i) {
		case verify.Winner:
			a.Outcome = OutcomeMajority
			paid := a.Paid
			if err := payAssignment(o, j, a, mulDiv(a.PricePerHour, a.Result.MeteredSeconds, 3600), p); err != nil {
				return nil, err
			}
			if err := recordWork(o, j, a, a.Paid-paid); err != nil {
				return nil, err
			}
			if n >= 2 {
				if err := recordValidated(o, a.Provider, a.Class); err != nil {
					return nil, err
				}
			}
		case verify.Unrevealed:
			ev, err := penalizeUnrevealed(o, j, a, p, info)
			if err != nil {
				return nil, err
			}
			events = append(events, ev)
		case verify.Minority:
			a.Outcome = OutcomeMinority
			amt, err := slashFor(o, a.Provider, j.Owner, p, info, SlashEvent{Code: SlashOutvoted, Job: j.ID, Count: uint64(votes), Of: uint64(n)})
			if err != nil {
				return nil, err
			}
			a.Slashed = amt
			if err := recordInvalid(o, a.Provider, a.Class); err != nil {
				return nil, err
			}
			events = append(events, jobEvent("job_replica_slashed", j, Attr{"provider", a.Provider.String()}, Attr{"amount", strconv.FormatUint(amt, 10)}))
		}
	}
	// Count of Of replicas agree only when the verdict is validated: an
	// unverified or unchecked result has nobody to agree with.
	validated := j.Verdict == VerdictValidated
	var agree Wait
	if validated {
		agree.Count, agree.Of = uint64(votes), uint64(n)
	}
	switch r := winner.Result; {
	case r.Failed:
		j.State = JobFailed
		agree.Code, agree.Text = WaitJobFailed, r.Reason
		j.setWait(agree)
	case validated:
		j.State = JobSucceeded
		agree.Code = WaitAgreed
		j.setWait(agree)
	default:
		j.State = JobSucceeded
		j.clearWait()
	}
	evs, err := finishJob(o, j, info)
	return append(events, evs...), err
}

// penalizeUnrevealed settles a replica that committed a result and did not
// open it by the time the job was decided: it is slashed as an outvoted
// replica is (params.slash_bps, the compensation share to the job's owner)
// and counts as invalid in its class and in its reputation ceiling. Silence
// must never be cheaper than revealing a result that loses the vote.
func penalizeUnrevealed(o *Overlay, j *Job, a *Assignment, p Params, info BlockInfo) (Event, error) {
	a.Outcome = OutcomeUnrevealed
	amt, err := slashFor(o, a.Provider, j.Owner, p, info, SlashEvent{Code: SlashUnrevealed, Job: j.ID})
	if err != nil {
		return Event{}, err
	}
	a.Slashed = amt
	if err := recordUnrevealed(o, a.Provider, a.Class); err != nil {
		return Event{}, err
	}
	return jobEvent("job_replica_slashed", j, Attr{"provider", a.Provider.String()}, Attr{"amount", strconv.FormatUint(amt, 10)}, Attr{"why", OutcomeUnrevealed}), nil
}
