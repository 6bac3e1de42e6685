package ledger

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/address"
)

// The messages of a job's life, from its owner (submit, grant, cancel) and
// from its providers (start, commit), and their handlers. The reveal is in
// verification.go, key handover in handover.go.

// MsgSubmitJob submits a job and locks its escrow.
type MsgSubmitJob struct {
	Spec        JobSpec `json:"spec"`
	InputBlob   string  `json:"input_blob,omitempty"`
	ConsumerKey string  `json:"consumer_key"`
	// KeyCommitment is JobKeyCommitment of the job key; without it only
	// the owner can give an audit replica the key.
	KeyCommitment *Hash `json:"key_commitment,omitempty"`
	// DataAt is the API URL of the gateway the module and inputs were
	// uploaded to (Job.DataAt); empty from an older client.
	DataAt string `json:"data_at,omitempty"`
}

// Grant is a job key wrapped to one assigned provider.
type Grant struct {
	Provider   address.Address `json:"provider"`
	WrappedKey []byte          `json:"wrapped_key"`
}

// MsgGrantKey hands the job key to the assigned providers.
type MsgGrantKey struct {
	JobID  uint64  `json:"job_id"`
	Grants []Grant `json:"grants"`
}

// MsgStartJob is an assigned provider saying it has started the job. A
// provider that resumes a job from an earlier checkpoint than the job's
// resume point (its blob was corrupt or missing) says which (ResumeSeq, 0
// for the beginning) and why (ResumeNote); the job records it.
type MsgStartJob struct {
	JobID      uint64 `json:"job_id"`
	ResumeSeq  uint64 `json:"resume_seq,omitempty"`
	ResumeNote string `json:"resume_note,omitempty"`
}

// MsgCommitResult is an assigned provider reporting the end of its run:
// for a checked job, a commitment to its result (ResultCommitment) and its
// metered seconds, opened later by MsgRevealResult; for a job that is not
// checked, the result itself.
type MsgCommitResult struct {
	JobID          uint64     `json:"job_id"`
	Commitment     *Hash      `json:"commitment,omitempty"`
	MeteredSeconds uint64     `json:"metered_seconds"`
	Result         *JobResult `json:"result,omitempty"`
}

// MsgCancelJob is the owner cancelling a job.
type MsgCancelJob struct {
	JobID uint64 `json:"job_id"`
}

// Type implements Msg.
func (*MsgSubmitJob) Type() MsgType { return MsgTypeSubmitJob }

// Type implements Msg.
func (*MsgGrantKey) Type() MsgType { return MsgTypeGrantKey }

// Type implements Msg.
func (*MsgStartJob) Type() MsgType { return MsgTypeStartJob }

// Type implements Msg.
func (*MsgCommitResult) Type() MsgType { return MsgTypeCommitResult }

// Type implements Msg.
func (*MsgCancelJob) Type() MsgType { return MsgTypeCancelJob }

// ValidateBasic implements Msg.
func (m *MsgSubmitJob) ValidateBasic() error {
	if err := m.Spec.Validate(); err != nil {
		return err
	}
	if m.InputBlob != "" && !ValidBlobRef(m.InputBlob) {
		return invalid("input_blob %q: want sha256:<64 hex>", m.InputBlob)
	}
	if len(m.Spec.Inputs) > 0 && m.InputBlob == "" {
		return invalid("the spec has inputs but input_blob is empty")
	}
	if hrp, key, err := address.DecodeBech32(m.ConsumerKey); err != nil || hrp != "age" || len(key) != 32 {
		return invalid("consumer_key %q is not an age X25519 recipient (age1…)", m.ConsumerKey)
	}
	return checkDataAt("data_at", m.DataAt)
}

// ValidateBasic implements Msg.
func (m *MsgGrantKey) ValidateBasic() error {
	if len(m.Grants) == 0 || len(m.Grants) > 8 {
		return invalid("grants: want 1 to 8, got %d", len(m.Grants))
	}
	for i, g := range m.Grants {
		if len(g.WrappedKey) == 0 || len(g.WrappedKey) > 4096 {
			return invalid("grants[%d].wrapped_key: want 1 to 4096 bytes", i)
		}
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgStartJob) ValidateBasic() error {
	if len(m.ResumeNote) > MaxCheckpointNoteLen || !utf8.ValidString(m.ResumeNote) {
		return invalid("resume_note: want at most %d bytes of text", MaxCheckpointNoteLen)
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgCommitResult) ValidateBasic() error {
	switch {
	case (m.Commitment == nil) == (m.Result == nil):
		return invalid("commit_result carries a commitment (checked jobs) or a result (unchecked jobs), exactly one")
	case m.Result != nil:
		if m.Result.MeteredSeconds != m.MeteredSeconds {
			return invalid("result.metered_seconds %d != metered_seconds %d", m.Result.MeteredSeconds, m.MeteredSeconds)
		}
		return validateResult(m.Result)
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgCancelJob) ValidateBasic() error { return nil }

func execSubmitJob(o *Overlay, from address.Address, m *MsgSubmitJob, p Params, info BlockInfo) ([]Event, error) {
	if err := checkCheckpointInterval(&m.Spec, p); err != nil {
		return nil, err
	}
	spec, err := judgeFuel(m.Spec, p)
	if err != nil {
		return nil, err
	}
	escrow := JobEscrow(&m.Spec, p)
	acct, err := GetAccount(o, from)
	if err != nil {
		return nil, err
	}
	if acct.Balance < escrow {
		return nil, fmt.Errorf("%s has %dusync, the job's escrow is %dusync (max price × timeout × %d replica(s) + fee): %w",
			from, acct.Balance, escrow, m.Spec.PlannedReplicas(), ErrInsufficientFunds)
	}
	acct.Balance -= escrow
	setAccount(o, &acct)
	setUint(o, keyEscrow, Escrowed(o)+escrow)
	id := getUint(o, keyNextJob) + 1
	setUint(o, keyNextJob, id)
	j := &Job{
		ID: id, Owner: from, Spec: spec, InputBlob: m.InputBlob, ConsumerKey: m.ConsumerKey, DataAt: m.DataAt,
		State: JobQueued, Wait: &Wait{Code: WaitQueued}, Escrow: escrow,
		SubmittedAt: info.Time.Unix(), Height: uint64(info.Height), Assignments: []Assignment{},
		Replicas: m.Spec.PlannedReplicas(), KeyCommitment: m.KeyCommitment,
	}
	setJob(o, j, 0)
	enqueueJob(o, j)
	o.Set(jobOwnerKey(from, id), []byte{1})
	return []Event{jobEvent("job_submitted", j, Attr{"owner", from.String()}, Attr{"escrow", strconv.FormatUint(escrow, 10)})}, nil
}

func execGrantKey(o *Overlay, from address.Address, m *MsgGrantKey, p Params, info BlockInfo) ([]Event, error) {
	j, err := mustJob(o, m.JobID)
	if err != nil {
		return nil, err
	}
	if j.Owner != from {
		return nil, fmt.Errorf("job %d belongs to %s, not %s: %w", j.ID, j.Owner, from, ErrNotJobParty)
	}
	if j.Done() || allGranted(j) {
		return nil, fmt.Errorf("job %d is %s and waits for no key: %w", j.ID, j.State, ErrJobState)
	}
	for _, g := range m.Grants {
		if j.assignment(g.Provider) == nil {
			return nil, fmt.Errorf("%s is not assigned to job %d: %w", g.Provider, j.ID, ErrNotJobParty)
		}
		if err := checkTEEGrant(o, j, g.Provider, info); err != nil {
			return nil, err
		}
	}
	var events []Event
	for _, g := range m.Grants {
		a := j.assignment(g.Provider)
		// The first placement granted takes the slot for real, bumping
		// ungranted ones the provider can no longer carry (slots.go).
		evs, err := grantSlot(o, j, a, p, info)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
		a.KeyGrant = slices.Clone(g.WrappedKey)
		a.HandedBy = nil // the owner's grant, not a handover anyone can dispute
	}
	old := j.Deadline
	if allGranted(j) {
		j.setWait(Wait{Code: WaitKeyGranted})
		if j.committed() > 0 {
			j.setWait(Wait{Code: WaitKeyGrantedExtra})
		}
		j.Deadline = info.Time.Unix() + int64(p.JobStartTimeout)
	}
	setJob(o, j, old)
	return append([]Event{jobEvent("job_key_granted", j)}, events...), nil
}

// jobParty returns job id, which must be running, and from's assignment
// in it: the first check of every message a job's provider sends.
func jobParty(o *Overlay, id uint64, from address.Address) (*Job, *Assignment, error) {
	j, err := mustJob(o, id)
	if err != nil {
		return nil, nil, err
	}
	a := j.assignment(from)
	if a == nil || j.Done() {
		return nil, nil, fmt.Errorf("%s has no part in job %d: %w", from, j.ID, ErrNotJobParty)
	}
	return j, a, nil
}

func execStartJob(o *Overlay, from address.Address, m *MsgStartJob, p Params, info BlockInfo) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	if a.KeyGrant == nil {
		return nil, fmt.Errorf("job %d's key has not been granted to %s yet: %w", j.ID, from, ErrJobState)
	}
	if a.StartedAt != 0 {
		return nil, fmt.Errorf("%s already started job %d: %w", from, j.ID, ErrJobState)
	}
	if err := checkGangStart(j, a); err != nil {
		return nil, err
	}
	if j.Spec.Checkpoint != nil {
		if err := resumeFallback(j, from, m.ResumeSeq, m.ResumeNote); err != nil {
			return nil, err
		}
	}
	a.StartedAt = info.Time.Unix()
	old := j.Deadline
	started := true
	for _, x := range j.Assignments {
		started = started && x.StartedAt != 0
	}
	if started {
		if j.committed() > 0 {
			j.State = JobVerifying
			j.setWait(Wait{Code: WaitExtraRunning})
		} else {
			j.State = JobRunning
			j.clearWait()
		}
		j.Deadline = info.Time.Unix() + int64(j.RunBudget()) + int64(p.JobResultGrace)
	}
	setJob(o, j, old)
	return []Event{jobEvent("job_started", j, Attr{"provider", from.String()})}, nil
}

func execCommitResult(o *Overlay, from address.Address, m *MsgCommitResult, p Params, info BlockInfo) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	if a.StartedAt == 0 {
		return nil, fmt.Errorf("%s has not started job %d: %w", from, j.ID, ErrJobState)
	}
	if a.Commitment != nil || a.Result != nil {
		return nil, fmt.Errorf("%s already committed a result for job %d: %w", from, j.ID, ErrJobState)
	}
	checked := j.Spec.Checked()
	if checked && m.Commitment == nil {
		return nil, fmt.Errorf("job %d is checked by replication: commit a commitment to the result, reveal it later: %w", j.ID, ErrInvalidMsg)
	}
	if !checked && m.Result == nil {
		return nil, fmt.Errorf("job %d is not checked: commit the result itself: %w", j.ID, ErrInvalidMsg)
	}
	// Metered time cannot exceed the job's timeout (less what checkpoints
	// it resumed from kept) nor the time the provider has had since it
	// started.
	elapsed := uint64(max(info.Time.Unix()-a.StartedAt, 0)) + 1
	a.Metered = min(m.MeteredSeconds, j.RunBudget(), elapsed)
	if checked {
		c := *m.Commitment
		a.Commitment = &c
	} else {
		r := *m.Result
		r.Height = uint64(info.Height)
		r.MeteredSeconds = a.Metered
		a.Result = &r
	}
	// Its run is over: the slot is free for other jobs.
	marketReserve(o, j, a, -1)
	if err := releaseSlot(o, from, grantedSlot); err != nil {
		return nil, err
	}
	old := j.Deadline
	events := []Event{jobEvent("job_result", j, Attr{"provider", from.String()}, Attr{"metered_seconds", strconv.FormatUint(a.Metered, 10)})}
	if n := j.committed(); n < len(j.Assignments) || j.queuedForReplica() {
		j.State = JobVerifying
		j.setWait(Wait{Code: WaitReported, Count: uint64(n), Of: j.Replicas})
		setJob(o, j, old)
		return events, nil
	}
	if j.Spec.Gang() && !checked {
		// Every member reported: each is paid its own seconds (gang.go);
		// a replicated gang is revealed and tallied (gang_verify.go).
		evs, err := settleGang(o, j, p, info)
		return append(events, evs...), err
	}
	if revealed(j) > 0 && checked {
		// An escalation round: the earlier replicas revealed already.
		evs, err := openReveal(o, j, p, info)
		return append(events, evs...), err
	}
	evs, err := afterCommits(o, j, p, info)
	return append(events, evs...), err
}

func execCancelJob(o *Overlay, from address.Address, m *MsgCancelJob, p Params, info BlockInfo) ([]Event, error) {
	j, err := mustJob(o, m.JobID)
	if err != nil {
		return nil, err
	}
	if j.Owner != from {
		return nil, fmt.Errorf("job %d belongs to %s, not %s: %w", j.ID, j.Owner, from, ErrNotJobParty)
	}
	if j.Done() {
		return nil, fmt.Errorf("job %d is already %s: %w", j.ID, j.State, ErrJobState)
	}
	// Providers that started are paid for the time they ran (what they
	// reported, if they did); those placed and not started for the slot
	// they held (payForTime, settlement.go).
	now := info.Time.Unix()
	for i := range j.Assignments {
		a := &j.Assignments[i]
		var err error
		switch {
		case a.StartedAt == 0:
			err = chargeHold(o, j, a, p, now)
		case a.Commitment != nil || a.Result != nil:
			err = payForTime(o, j, a, a.Metered, p)
		default:
			err = payForTime(o, j, a, min(uint64(max(now-a.StartedAt, 0)), j.RunBudget()), p)
		}
		if err != nil {
			return nil, err
		}
	}
	j.State = JobCancelled
	j.setWait(Wait{Code: WaitCancelled})
	return finishJob(o, j, info)
}
