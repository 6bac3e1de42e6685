package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/verify"
)

// The judging round of a job whose outputs are judged within a tolerance
// (JobSpec.Compare; docs/ledger.md, "Outputs judged within a tolerance").
//
// When the revealed results of such a job differ, decide opens a round
// instead of tallying them: each replica that revealed a result (a judge)
// compares every pair of the revealed outputs with internal/compare,
// commits H(vector ‖ …) with MsgCommitJudgment and, once every judge
// committed or the commit window closed, reveals the vector with
// MsgRevealJudgment. The round settles when every committed judge revealed
// or the reveal window closed (settleJudging): verify.TallyJudgments finds
// the vector a majority of judges revealed and the class of replicas it
// judges the same; the class's members get one tally key, and verify.Tally
// and applyVerdict run as for any job. A judge that revealed another vector
// (outvoted) or none (silent) is settled as an outvoted and a silent result
// are, whatever its own output.

// The judging messages' types (80 and up: 70-71 are the TEE's).
const (
	MsgTypeCommitJudgment MsgType = 80
	MsgTypeRevealJudgment MsgType = 81
)

// Outcomes of a judge settled by its judgment (Assignment.Outcome).
const (
	OutcomeJudgeOutvoted = "judge_outvoted"
	OutcomeJudgeSilent   = "judge_silent"
)

// JudgmentCommitment is what MsgCommitJudgment carries: it binds the
// vector to the job, the round, the judge and a secret salt, so that a
// commitment neither tells another judge the vector nor can be copied.
func JudgmentCommitment(job, round, vector uint64, judge address.Address, salt Hash) Hash {
	h := sha256.New()
	h.Write([]byte("gpunet/judgment-commit/v1\x00"))
	var b [24]byte
	binary.BigEndian.PutUint64(b[:8], job)
	binary.BigEndian.PutUint64(b[8:16], round)
	binary.BigEndian.PutUint64(b[16:], vector)
	h.Write(b[:])
	h.Write(judge[:])
	h.Write(salt[:])
	var out Hash
	h.Sum(out[:0])
	return out
}

// MsgCommitJudgment commits a judge's verdict vector in the job's open
// judging round.
type MsgCommitJudgment struct {
	JobID      uint64 `json:"job_id"`
	Commitment Hash   `json:"commitment"`
}

// Type implements Msg.
func (*MsgCommitJudgment) Type() MsgType { return MsgTypeCommitJudgment }

// ValidateBasic implements Msg.
func (m *MsgCommitJudgment) ValidateBasic() error {
	if m.Commitment == (Hash{}) {
		return invalid("commitment is empty")
	}
	return nil
}

// MsgRevealJudgment opens a judge's commitment: its vector has bit
// verify.PairBit(i, j) set for each pair of judges i < j (indexes into the
// job's assignments) whose outputs it judged the same.
type MsgRevealJudgment struct {
	JobID  uint64 `json:"job_id"`
	Salt   Hash   `json:"salt"`
	Vector uint64 `json:"vector"`
}

// Type implements Msg.
func (*MsgRevealJudgment) Type() MsgType { return MsgTypeRevealJudgment }

// ValidateBasic implements Msg.
func (m *MsgRevealJudgment) ValidateBasic() error {
	if bits := m.Vector &^ verify.PairMask(allJudges[:]); bits != 0 {
		return invalid("vector %#x has bits outside the %d pairs of %d replicas", m.Vector, verify.MaxJudged*(verify.MaxJudged-1)/2, verify.MaxJudged)
	}
	return nil
}

var allJudges [verify.MaxJudged]bool

func init() {
	for i := range allJudges {
		allJudges[i] = true
	}
}

// judgeable reports whether j's revealed results go to a judging round
// rather than straight to the tally: it has a compare rule, is checked,
// has few enough replicas for a vector, and its revealed results are not
// all the same.
func judgeable(j *Job) bool {
	if j.Spec.Compare == nil || !j.Spec.Checked() || len(j.Assignments) > verify.MaxJudged {
		return false
	}
	first := ""
	for i := range j.Assignments {
		a := &j.Assignments[i]
		if !isJudge(a) {
			continue
		}
		k := resultKey(a.Result)
		if first == "" {
			first = k
		} else if k != first {
			return true
		}
	}
	return false
}

// isJudge reports whether assignment a judges in j's round: it revealed a
// result and was not settled by an earlier round's judgment.
func isJudge(a *Assignment) bool { return a.Result != nil && !judgeSettled(a) }

// judgeSettled reports whether an earlier judging round settled a (slashed
// it as an outvoted or silent judge): it takes no further part in the job.
func judgeSettled(a *Assignment) bool {
	return a.Outcome == OutcomeJudgeOutvoted || a.Outcome == OutcomeJudgeSilent
}

// judges returns the judges of j's round, by assignment index.
func judges(j *Job) []bool {
	js := make([]bool, len(j.Assignments))
	for i := range j.Assignments {
		js[i] = isJudge(&j.Assignments[i])
	}
	return js
}

// openJudging opens a judging round on j; final says the round may not end
// in an escalation (decide's mayEscalate was false).
func openJudging(o *Overlay, j *Job, p Params, info BlockInfo, final bool) ([]Event, error) {
	old := j.Deadline
	j.State = JobVerifying
	j.Revealing = false
	j.Judging, j.JudgeRevealing, j.JudgeFinal = true, false, final
	j.JudgeRound++
	for i := range j.Assignments {
		j.Assignments[i].JudgeCommitment, j.Assignments[i].Judgment = nil, nil
	}
	j.setWait(judgingWait(j))
	j.Deadline = info.Time.Unix() + int64(p.RevealTimeout)
	setJob(o, j, old)
	return []Event{jobEvent("job_judging", j, Attr{"round", strconv.FormatUint(j.JudgeRound, 10)})}, nil
}

// judgingWait says how far j's round is: Count of Of judges committed (or,
// once revealing, revealed) in round Seq.
func judgingWait(j *Job) Wait {
	w := Wait{Code: WaitJudging, Seq: j.JudgeRound}
	if j.JudgeRevealing {
		w.Code = WaitJudgingReveal
	}
	for i := range j.Assignments {
		a := &j.Assignments[i]
		if !isJudge(a) {
			continue
		}
		w.Of++
		if (!j.JudgeRevealing && a.JudgeCommitment != nil) || (j.JudgeRevealing && a.Judgment != nil) {
			w.Count++
		}
	}
	return w
}

// openJudgingReveal closes the round's commit window: judges that
// committed may reveal. A round nobody committed in is settled at once.
func openJudgingReveal(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	committed := 0
	for i := range j.Assignments {
		if a := &j.Assignments[i]; isJudge(a) && a.JudgeCommitment != nil {
			committed++
		}
	}
	if committed == 0 {
		return settleJudging(o, j, p, info)
	}
	old := j.Deadline
	j.JudgeRevealing = true
	j.setWait(judgingWait(j))
	j.Deadline = info.Time.Unix() + int64(p.RevealTimeout)
	setJob(o, j, old)
	return []Event{jobEvent("job_judging_reveal", j, Attr{"round", strconv.FormatUint(j.JudgeRound, 10)})}, nil
}

// expireJudging handles a round whose current window closed.
func expireJudging(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	if !j.JudgeRevealing {
		return openJudgingReveal(o, j, p, info)
	}
	return settleJudging(o, j, p, info)
}

func execCommitJudgment(o *Overlay, from address.Address, m *MsgCommitJudgment, p Params, info BlockInfo) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	if !j.Judging || j.JudgeRevealing {
		return nil, fmt.Errorf("job %d has no judging round taking commitments: %w", j.ID, ErrJobState)
	}
	if !isJudge(a) {
		return nil, fmt.Errorf("%s does not judge job %d: only replicas that revealed a result do: %w", from, j.ID, ErrJobState)
	}
	if a.JudgeCommitment != nil {
		return nil, fmt.Errorf("%s already committed its judgment of job %d in round %d: %w", from, j.ID, j.JudgeRound, ErrJobState)
	}
	c := m.Commitment
	a.JudgeCommitment = &c
	events := []Event{jobEvent("job_judgment_committed", j, Attr{"provider", from.String()})}
	w := judgingWait(j)
	if w.Count < w.Of {
		j.setWait(w)
		setJob(o, j, j.Deadline)
		return events, nil
	}
	evs, err := openJudgingReveal(o, j, p, info)
	return append(events, evs...), err
}

func execRevealJudgment(o *Overlay, from address.Address, m *MsgRevealJudgment, p Params, info BlockInfo) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	if !j.Judging || !j.JudgeRevealing {
		return nil, fmt.Errorf("job %d has no judging round taking reveals: wait until every judge committed: %w", j.ID, ErrJobState)
	}
	if !isJudge(a) || a.JudgeCommitment == nil {
		return nil, fmt.Errorf("%s has not committed a judgment of job %d in round %d: %w", from, j.ID, j.JudgeRound, ErrJobState)
	}
	if a.Judgment != nil {
		return nil, fmt.Errorf("%s already revealed its judgment of job %d: %w", from, j.ID, ErrJobState)
	}
	if bits := m.Vector &^ verify.PairMask(judges(j)); bits != 0 {
		return nil, fmt.Errorf("judgment of job %d has bits %#x for pairs that are not two of its judges: %w", j.ID, bits, ErrInvalidMsg)
	}
	if JudgmentCommitment(j.ID, j.JudgeRound, m.Vector, from, m.Salt) != *a.JudgeCommitment {
		return nil, fmt.Errorf("the revealed judgment of %s for job %d does not open its commitment: %w", from, j.ID, ErrInvalidMsg)
	}
	v := m.Vector
	a.Judgment = &v
	events := []Event{jobEvent("job_judgment_revealed", j, Attr{"provider", from.String()})}
	for i := range j.Assignments {
		if b := &j.Assignments[i]; isJudge(b) && b.JudgeCommitment != nil && b.Judgment == nil {
			j.setWait(judgingWait(j))
			setJob(o, j, j.Deadline)
			return events, nil
		}
	}
	evs, err := settleJudging(o, j, p, info)
	return append(events, evs...), err
}

// settleJudging ends j's round: the judges' vectors are tallied
// (verify.TallyJudgments); the class of replicas the winning vector judges
// the same gets one tally key; then the results are tallied and applied as
// for any job (verify.Tally, applyVerdict), with outvoted and silent
// judges settled like outvoted and silent results.
func settleJudging(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	js := make([]verify.Judgment, len(j.Assignments))
	for i := range j.Assignments {
		a := &j.Assignments[i]
		if !isJudge(a) {
			continue
		}
		js[i].Judge = true
		if a.Judgment != nil {
			js[i].Revealed, js[i].Vector = true, *a.Judgment
		}
	}
	jd := verify.TallyJudgments(js)
	keys := make([]string, len(j.Assignments))
	for i := range j.Assignments {
		if r := j.Assignments[i].Result; r != nil {
			keys[i] = resultKey(r)
		}
	}
	if len(jd.Class) > 0 {
		lead := j.Assignments[jd.Class[0]].Result
		same := true
		for _, i := range jd.Class {
			r := j.Assignments[i].Result
			same = same && r.ExitCode == lead.ExitCode && r.Failed == lead.Failed
		}
		if same {
			for _, i := range jd.Class {
				keys[i] = "class/" + resultKey(lead)
			}
		}
	}
	final := j.JudgeFinal
	old := j.Deadline
	j.Judging, j.JudgeRevealing, j.JudgeFinal = false, false, false
	setJob(o, j, old)
	events := []Event{jobEvent("job_judged", j, Attr{"round", strconv.FormatUint(j.JudgeRound, 10)},
		Attr{"class", strconv.Itoa(len(jd.Class))}, Attr{"decided", strconv.FormatBool(jd.Decided)})}
	out := tallyKeys(j, keys, p, !final)
	bad := map[int]string{}
	for _, i := range jd.Outvoted {
		bad[i] = OutcomeJudgeOutvoted
	}
	for _, i := range jd.Silent {
		bad[i] = OutcomeJudgeSilent
	}
	evs, err := applyJudged(o, j, out, bad, jd, p, info)
	return append(events, evs...), err
}

// tallyKeys is verify.Tally over j's assignments with the given result
// keys (empty: not revealed). Assignments an earlier round settled by
// their judgment are tallied as silent: they are neither paid nor slashed
// again (applyVerdict skips them).
func tallyKeys(j *Job, keys []string, p Params, mayEscalate bool) verify.Outcome {
	rs := make([]verify.Replica, len(j.Assignments))
	for i := range j.Assignments {
		if keys[i] != "" && !judgeSettled(&j.Assignments[i]) {
			rs[i] = verify.Replica{Revealed: true, Result: keys[i]}
		}
	}
	return verify.Tally(rs, verify.Rules{
		Checked:         j.Spec.Checked(),
		MaxReplicas:     p.MaxReplicas,
		Placements:      j.Attempts,
		PlacementBudget: p.JobMaxAttempts + p.MaxReplicas,
		ReplicaDropped:  !mayEscalate,
	})
}

// applyJudged settles the judges whose judgment lost (bad: outvoted or
// silent) and applies the result tally out: a bad judge is slashed now and
// takes no part in the verdict's payments, even when its output is in the
// winning class; the delivered output is the first winner that judged
// with the majority.
func applyJudged(o *Overlay, j *Job, out verify.Outcome, bad map[int]string, jd verify.Judging, p Params, info BlockInfo) ([]Event, error) {
	var events []Event
	for i := range j.Assignments {
		why, ok := bad[i]
		if !ok {
			continue
		}
		a := &j.Assignments[i]
		code := SlashJudgeOutvoted
		se := SlashEvent{Code: code, Job: j.ID, Count: uint64(len(jd.Agree)), Of: uint64(len(jd.Agree) + len(jd.Outvoted) + len(jd.Silent))}
		if why == OutcomeJudgeSilent {
			se = SlashEvent{Code: SlashJudgeSilent, Job: j.ID}
		}
		amt, err := slashFor(o, a.Provider, j.Owner, p, info, se)
		if err != nil {
			return nil, err
		}
		a.Outcome, a.Slashed = why, a.Slashed+amt
		record := recordInvalid
		if why == OutcomeJudgeSilent {
			record = recordUnrevealed
		}
		if err := record(o, a.Provider, a.Class); err != nil {
			return nil, err
		}
		events = append(events, jobEvent("job_replica_slashed", j, Attr{"provider", a.Provider.String()}, Attr{"amount", strconv.FormatUint(amt, 10)}, Attr{"why", why}))
	}
	evs, err := applyVerdict(o, j, withoutSettled(j, out), p, info)
	return append(events, evs...), err
}

// withoutSettled takes the judges a judging round settled (this one or an
// earlier one) out of a tally's fates, so that applyVerdict neither pays
// nor slashes them again; the delivered output is the first winner left.
func withoutSettled(j *Job, out verify.Outcome) verify.Outcome {
	drop := func(xs []int) []int {
		var kept []int
		for _, x := range xs {
			if !judgeSettled(&j.Assignments[x]) {
				kept = append(kept, x)
			}
		}
		return kept
	}
	out.Winners, out.Minority = drop(out.Winners), drop(out.Minority)
	out.Undecided, out.Unrevealed = drop(out.Undecided), drop(out.Unrevealed)
	switch {
	case out.Delivered < 0:
	case len(out.Winners) == 0:
		// Every winner judged against the majority of judges: nobody is
		// left to deliver. (A decided round's agreeing judges overlap any
		// majority of results, so this does not happen then.)
		out.Verdict, out.Delivered = verify.NoMajority, -1
	default:
		out.Delivered = out.Winners[0]
	}
	return out
}
