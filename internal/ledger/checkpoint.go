package ledger

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/verify"
)

// Checkpoints (issue 17): a long job survives its provider. A job whose
// spec has a checkpoint keeps its state under CheckpointSpec.Path; its
// provider bundles what is there at each interval (and when it is asked to
// stop), encrypts it to the job's owner and to the job key, uploads it and
// commits it with MsgCommitCheckpoint: a sequence number, the blob, the
// plaintext's hash and the seconds of its run it covers. When the job
// loses its provider (offline, a missed deadline, handed back), the
// checkpoint the job resumes from is the latest one every removed replica
// committed (and agreed on); each removed replica is paid for the seconds
// that checkpoint covers, through payAssignment, and the next placement
// restores it and runs only what is left of the job's timeout (Job.Progress).
// So the owner pays for work kept, once: the lost provider for the run up to
// its checkpoint, the next for its own run after it.
//
// Replicas of a checked job commit their checkpoints at the same sequence
// numbers (taken when the job asks, by CheckpointExitCode, so that the same
// sequence is the same point of the computation); a replica whose plaintext
// hash differs from the majority's at a sequence is treated as an outvoted
// replica at once, and replicas that cannot agree are restarted from the last
// checkpoint they agreed on with one more replica, up to params.max_replicas,
// as a result disagreement escalates (verification.go).

// CheckpointSpec is a job's checkpoint: where it keeps its state, and how
// often its provider takes it.
type CheckpointSpec struct {
	Path            string `json:"path"`             // guest path of the job's state directory
	IntervalSeconds uint64 `json:"interval_seconds"` // how often the provider takes it
}

// Bounds and conventions of checkpoints.
const (
	// CheckpointExitCode is what a job exits with to say "my state under
	// the checkpoint path is complete: take it, and start me again from
	// it" (HTCondor's +SuccessCheckpointExitCode). The provider commits
	// the checkpoint and restarts the job in place, with
	// GPUNET_RESUME_SEQ set.
	CheckpointExitCode = 85
	// MaxCheckpointInterval is the longest interval a spec may ask for;
	// the shortest is params.checkpoint_min_interval.
	MaxCheckpointInterval = 24 * 3600
	// CheckpointsPerProvider is how many of its latest checkpoints a job
	// keeps from each provider; MaxCheckpointsKept bounds them all.
	CheckpointsPerProvider = 3
	MaxCheckpointsKept     = 32
	// MaxCheckpointNoteLen bounds a refusal's or a fallback's reason.
	MaxCheckpointNoteLen = 512
)

// Checkpoint is a committed checkpoint of a job.
type Checkpoint struct {
	Seq       uint64          `json:"seq"`
	Provider  address.Address `json:"provider"`
	Blob      string          `json:"blob"`       // sha256:<hex> of the encrypted bundle
	PlainHash Hash            `json:"plain_hash"` // SHA-256 of the plaintext bundle, compared across replicas
	Size      uint64          `json:"size"`       // bytes of the plaintext bundle
	// Covered is the seconds of its provider's run (from its start) the
	// checkpoint covers: what the provider is paid if the job resumes
	// from it elsewhere.
	Covered uint64 `json:"covered_seconds"`
	Height  uint64 `json:"height"`
	Time    int64  `json:"time"`
	// DataAt is the API URL of the node whose gateway holds the blob.
	DataAt string `json:"data_at,omitempty"`
	// Rank is the gang member whose state it is (gang.go); 0 for a job
	// that is not a gang.
	Rank uint64 `json:"rank,omitempty" rec:"since=8"`
}

// validate checks a checkpoint spec without state; the shortest interval
// is a parameter (checkCheckpointInterval).
func (c *CheckpointSpec) validate() error {
	if err := checkGuestPath("checkpoint.path", c.Path); err != nil {
		return err
	}
	if c.Path == "/" {
		return invalid("checkpoint.path /: want a directory of its own that the job keeps its state in, e.g. /ckpt")
	}
	if c.IntervalSeconds == 0 || c.IntervalSeconds > MaxCheckpointInterval {
		return invalid("checkpoint.interval %ds out of range [params.checkpoint_min_interval, 24h]", c.IntervalSeconds)
	}
	return nil
}

// checkCheckpointInterval checks what needs the params: the interval is
// at least params.checkpoint_min_interval.
func checkCheckpointInterval(s *JobSpec, p Params) error {
	if s.Checkpoint != nil && s.Checkpoint.IntervalSeconds < p.CheckpointMinInterval {
		return fmt.Errorf("checkpoint.interval %ds is shorter than params.checkpoint_min_interval %ds: %w", s.Checkpoint.IntervalSeconds, p.CheckpointMinInterval, ErrInvalidMsg)
	}
	return nil
}

// RunBudget is the seconds a placement of the job may still run: its
// timeout less the progress its checkpoints kept (Job.Progress). At least
// one second, so that a job resumed at its very end can still finish.
func (j *Job) RunBudget() uint64 {
	if j.Progress >= j.Spec.TimeoutSeconds {
		return 1
	}
	return j.Spec.TimeoutSeconds - j.Progress
}

// ResumeCheckpoint is the checkpoint the job's current placement resumes
// from, or nil when it starts from the beginning.
func (j *Job) ResumeCheckpoint() *Checkpoint {
	if j.ResumeSeq == 0 {
		return nil
	}
	for i := range j.Checkpoints {
		if j.Checkpoints[i].Seq == j.ResumeSeq {
			return &j.Checkpoints[i]
		}
	}
	return nil
}

// MsgCommitCheckpoint is an assigned, started provider committing a
// checkpoint of its run; or, with Refused, saying why it could not take
// one (the state is larger than the job's disk), which the job records.
type MsgCommitCheckpoint struct {
	JobID          uint64 `json:"job_id"`
	Seq            uint64 `json:"seq"`
	Blob           string `json:"blob,omitempty"`
	PlainHash      Hash   `json:"plain_hash"`
	Size           uint64 `json:"size"`
	CoveredSeconds uint64 `json:"covered_seconds"`
	DataAt         string `json:"data_at,omitempty"`
	Refused        string `json:"refused,omitempty"`
}

// Type implements Msg.
func (*MsgCommitCheckpoint) Type() MsgType { return MsgTypeCommitCheckpoint }

// ValidateBasic implements Msg.
func (m *MsgCommitCheckpoint) ValidateBasic() error {
	if m.Seq == 0 {
		return invalid("seq: checkpoints are numbered from 1")
	}
	if m.Refused != "" {
		if m.Blob != "" || len(m.Refused) > MaxCheckpointNoteLen || !utf8.ValidString(m.Refused) {
			return invalid("refused: want at most %d bytes of text saying why, and no blob", MaxCheckpointNoteLen)
		}
		return nil
	}
	if !ValidBlobRef(m.Blob) {
		return invalid("blob %q: want sha256:<64 hex>", m.Blob)
	}
	return checkDataAt("data_at", m.DataAt)
}

func execCommitCheckpoint(o *Overlay, from address.Address, m *MsgCommitCheckpoint, p Params, info BlockInfo) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	switch {
	case j.Spec.Checkpoint == nil:
		return nil, fmt.Errorf("job %d's spec has no checkpoint: %w", j.ID, ErrInvalidMsg)
	case a.StartedAt == 0:
		return nil, fmt.Errorf("%s has not started job %d: %w", from, j.ID, ErrJobState)
	case a.Commitment != nil || a.Result != nil:
		return nil, fmt.Errorf("%s already committed its result for job %d: %w", from, j.ID, ErrJobState)
	}
	last := j.ResumeSeq
	var prevCovered uint64
	for _, c := range j.Checkpoints {
		if c.Provider == from && c.Seq > j.ResumeSeq {
			last, prevCovered = max(last, c.Seq), max(prevCovered, c.Covered)
		}
	}
	if m.Seq <= last {
		return nil, fmt.Errorf("checkpoint %d of job %d: sequence numbers increase, and %s is at %d: %w", m.Seq, j.ID, from, last, ErrInvalidMsg)
	}
	old := j.Deadline
	if m.Refused != "" {
		j.setCheckpointWait(Wait{Code: CheckpointRefused, Providers: []address.Address{from}, Seq: m.Seq, Text: m.Refused})
		setJob(o, j, old)
		return []Event{jobEvent("job_checkpoint_refused", j, Attr{"provider", from.String()}, Attr{"seq", strconv.FormatUint(m.Seq, 10)}, Attr{"reason", m.Refused})}, nil
	}
	if m.Size > j.Spec.Disk {
		return nil, fmt.Errorf("checkpoint %d of job %d is %d bytes, more than the job's disk (%d bytes): %w", m.Seq, j.ID, m.Size, j.Spec.Disk, ErrInvalidMsg)
	}
	// Covered time cannot exceed what the provider has had since it
	// started, nor the job's run budget, and never goes back.
	elapsed := uint64(max(info.Time.Unix()-a.StartedAt, 0)) + 1
	covered := max(prevCovered, min(m.CoveredSeconds, elapsed, j.RunBudget()))
	j.Checkpoints = append(j.Checkpoints, Checkpoint{
		Seq: m.Seq, Provider: from, Blob: m.Blob, PlainHash: m.PlainHash, Size: m.Size, Covered: covered,
		Height: uint64(info.Height), Time: info.Time.Unix(), DataAt: m.DataAt, Rank: a.Rank,
	})
	pruneCheckpoints(j)
	events := []Event{jobEvent("job_checkpoint", j, Attr{"provider", from.String()}, Attr{"seq", strconv.FormatUint(m.Seq, 10)},
		Attr{"size", strconv.FormatUint(m.Size, 10)}, Attr{"covered_seconds", strconv.FormatUint(covered, 10)})}
	if j.Spec.Gang() && gangStepComplete(j, m.Seq) {
		// Every member has committed this step: the gang can resume from it.
		events = append(events, jobEvent("job_gang_checkpoint", j, Attr{"seq", strconv.FormatUint(m.Seq, 10)}))
	}
	if j.Spec.Checked() && len(j.Assignments) > 1 {
		evs, done, err := compareCheckpoints(o, j, m.Seq, p, info)
		if err != nil || done {
			return append(events, evs...), err
		}
		events = append(events, evs...)
	}
	setJob(o, j, old)
	return events, nil
}

// pruneCheckpoints keeps each provider's CheckpointsPerProvider latest
// checkpoints, and at most MaxCheckpointsKept in all (the latest).
//
// A gang keeps each member's latest, the step it resumes from and its
// latest complete step (every member's checkpoint of each), up to
// gangCheckpointsKept: its members' checkpoints of one step are many. The
// complete step must outlive the latest: a member whose machine is gone
// commits nothing more while the others go on until the gang is found
// short of it, and the gang resumes from the last step they all committed.
func pruneCheckpoints(j *Job) {
	per := map[address.Address]int{}
	keep := make([]Checkpoint, 0, len(j.Checkpoints))
	limit, gang := MaxCheckpointsKept, j.Spec.Gang()
	var complete uint64
	if gang {
		limit = gangCheckpointsKept(&j.Spec)
		complete = latestCompleteStep(j)
	}
	for i := len(j.Checkpoints) - 1; i >= 0; i-- {
		c := j.Checkpoints[i]
		pinned := gang && c.Seq != 0 && (c.Seq == j.ResumeSeq || c.Seq == complete)
		if (per[c.Provider] >= CheckpointsPerProvider && !pinned) || len(keep) >= limit {
			continue
		}
		per[c.Provider]++
		keep = append(keep, c)
	}
	slices.Reverse(keep)
	j.Checkpoints = keep
}

// checkpointAt returns provider's checkpoint seq of the current placement
// (after the resume point), or nil.
func (j *Job) checkpointAt(provider address.Address, seq uint64) *Checkpoint {
	if seq <= j.ResumeSeq {
		return nil
	}
	for i := range j.Checkpoints {
		if c := &j.Checkpoints[i]; c.Provider == provider && c.Seq == seq {
			return c
		}
	}
	return nil
}

// agreedAt reports whether every current assignment that committed
// checkpoint seq committed the same plaintext.
//
// A gang's members are not compared: each holds its own rank's state.
func (j *Job) agreedAt(seq uint64) bool {
	if j.Spec.Gang() {
		return true
	}
	var first *Checkpoint
	for _, a := range j.Assignments {
		c := j.checkpointAt(a.Provider, seq)
		if c == nil {
			continue
		}
		if first != nil && c.PlainHash != first.PlainHash {
			return false
		}
		first = c
	}
	return true
}

// keepCheckpointed runs when the job loses the given assignments (they go,
// and the job is placed again): the job resumes from the latest checkpoint
// that each of them committed and that the current replicas agree on, and
// each is paid for the seconds that checkpoint covers. It reports whether
// a checkpoint was kept (then j.ResumeSeq and j.Progress say which and how
// much: resumeWait).
func keepCheckpointed(o *Overlay, j *Job, removed []address.Address, p Params) (bool, error) {
	if j.Spec.Checkpoint == nil || len(removed) == 0 {
		return false, nil
	}
	var best uint64
	for _, c := range j.Checkpoints {
		if c.Seq <= best || c.Seq <= j.ResumeSeq || !j.agreedAt(c.Seq) {
			continue
		}
		all := true
		for _, r := range removed {
			all = all && j.checkpointAt(r, c.Seq) != nil
		}
		if all {
			best = c.Seq
		}
	}
	if best == 0 {
		// Nothing kept: what this placement committed is lost with it.
		j.Checkpoints = slices.DeleteFunc(j.Checkpoints, func(c Checkpoint) bool { return c.Seq > j.ResumeSeq })
		return false, nil
	}
	var progress uint64
	for _, r := range removed {
		a := j.assignment(r)
		c := j.checkpointAt(r, best)
		if a == nil || c == nil {
			continue
		}
		if err := payForTime(o, j, a, c.Covered, p); err != nil {
			return false, err
		}
		progress = max(progress, c.Covered)
	}
	j.Progress = min(j.Progress+progress, j.Spec.TimeoutSeconds)
	j.ResumeSeq = best
	// What came after it is lost with its providers.
	j.Checkpoints = slices.DeleteFunc(j.Checkpoints, func(c Checkpoint) bool { return c.Seq > best })
	return true, nil
}

// resumeFallback records that a provider starting the job restored an
// earlier checkpoint than the job's resume point (seq, 0 for none), because
// the later ones were corrupt or missing, and why.
func resumeFallback(j *Job, from address.Address, seq uint64, why string) error {
	if why == "" {
		// A plain start resumes from the job's resume point; one from
		// elsewhere must say why.
		if seq != 0 && seq != j.ResumeSeq {
			return fmt.Errorf("job %d resumes from checkpoint %d; starting from %d needs a resume_note saying why: %w", j.ID, j.ResumeSeq, seq, ErrInvalidMsg)
		}
		return nil
	}
	if seq > j.ResumeSeq {
		return fmt.Errorf("job %d resumes from checkpoint %d; %s cannot resume from the later %d: %w", j.ID, j.ResumeSeq, from, seq, ErrInvalidMsg)
	}
	if j.Spec.Gang() && slices.ContainsFunc(j.Assignments, func(a Assignment) bool { return a.Provider != from && a.StartedAt != 0 }) {
		// Every member resumes from one step: once one started from the
		// gang's resume point, another cannot fall back alone.
		return fmt.Errorf("job %d is a gang some member of which started from checkpoint %d; %s cannot fall back to %d alone: hand the job back (release_job) and the gang is placed again: %w", j.ID, j.ResumeSeq, from, seq, ErrJobState)
	}
	if seq != 0 && !slices.ContainsFunc(j.Checkpoints, func(c Checkpoint) bool { return c.Seq == seq }) {
		return fmt.Errorf("job %d keeps no checkpoint %d: %w", j.ID, seq, ErrInvalidMsg)
	}
	j.setCheckpointWait(Wait{Code: CheckpointFallback, Providers: []address.Address{from}, Seq: seq, ResumeSeq: j.ResumeSeq, Text: why})
	j.ResumeSeq = seq
	j.Checkpoints = slices.DeleteFunc(j.Checkpoints, func(c Checkpoint) bool { return c.Seq > seq })
	return nil
}

// compareCheckpoints compares the replicas' checkpoints at seq, as the
// results of a vote (verification.go): replicas outvoted by a majority are
// slashed and dropped at once; replicas that can no longer reach a majority
// are restarted from their last agreed checkpoint with one more replica, or,
// at params.max_replicas, the job fails and the owner gets the rest of the
// escrow back. done reports that the job was stored (and its fate decided)
// here.
func compareCheckpoints(o *Overlay, j *Job, seq uint64, p Params, info BlockInfo) ([]Event, bool, error) {
	rs := make([]verify.Replica, len(j.Assignments))
	for i, a := range j.Assignments {
		if c := j.checkpointAt(a.Provider, seq); c != nil {
			rs[i] = verify.Replica{Revealed: true, Result: string(c.PlainHash[:])}
		}
	}
	out := verify.TallyCheckpoint(rs, p.MaxReplicas)
	return applyCheckpointTally(o, j, seq, out, p, info)
}

// applyCheckpointTally turns a checkpoint tally's outcome into state.
func applyCheckpointTally(o *Overlay, j *Job, seq uint64, out verify.CheckpointOutcome, p Params, info BlockInfo) ([]Event, bool, error) {
	n := out.N
	seqAttr := Attr{"seq", strconv.FormatUint(seq, 10)}
	switch out.Action {
	case verify.Agree, verify.Wait:
		return nil, false, nil // no disagreement, or a majority is still possible: wait for the rest
	case verify.DropMinority:
		// Outvoted: slashed and dropped now; the others go on.
		var gone []address.Address
		for _, i := range out.Minority {
			gone = append(gone, j.Assignments[i].Provider)
		}
		var events []Event
		for _, m := range gone {
			amt, err := slashFor(o, m, j.Owner, p, info, SlashEvent{Code: SlashCheckpointOutvoted, Job: j.ID, Seq: seq, Count: uint64(out.Votes), Of: uint64(n)})
			if err != nil {
				return nil, false, err
			}
			a := j.assignment(m)
			if err := recordInvalid(o, m, a.Class); err != nil {
				return nil, false, err
			}
			if err := releaseAssignment(o, j, a); err != nil {
				return nil, false, err
			}
			events = append(events, jobEvent("job_replica_slashed", j, Attr{"provider", m.String()}, Attr{"amount", strconv.FormatUint(amt, 10)}, Attr{"why", "checkpoint_minority"}))
		}
		j.Assignments = slices.DeleteFunc(j.Assignments, func(a Assignment) bool { return slices.Contains(gone, a.Provider) })
		j.Replicas = uint64(len(j.Assignments))
		j.setCheckpointWait(Wait{Code: CheckpointOutvoted, Seq: seq, Providers: gone, Count: uint64(out.Votes), Of: uint64(n)})
		events = append([]Event{jobEvent("job_checkpoint_mismatch", j, seqAttr, Attr{"outvoted", joinAddrs(gone)})}, events...)
		if j.committed() < len(j.Assignments) {
			return events, false, nil
		}
		// The replicas left had all committed their results.
		var evs []Event
		var err error
		if revealed(j) > 0 {
			evs, err = decide(o, j, p, info, true)
		} else {
			evs, err = openReveal(o, j, p, info)
		}
		return append(events, evs...), true, err
	case verify.Fail:
		mismatch := jobEvent("job_checkpoint_mismatch", j, seqAttr, Attr{"results", strconv.Itoa(out.Results)})
		for i := range j.Assignments {
			j.Assignments[i].Outcome = OutcomeNoMajority
		}
		j.Verdict = VerdictNoMajority
		j.State = JobFailed
		j.setWait(Wait{Code: WaitCheckpointNoMajority, Of: uint64(n), Seq: seq, Distinct: uint64(out.Results)})
		evs, err := finishJob(o, j, info)
		return append([]Event{mismatch}, evs...), true, err
	case verify.Restart:
		// Every replica restarts from the last agreed checkpoint, with
		// one more.
		old := j.Deadline
		all := make([]address.Address, n)
		for i, a := range j.Assignments {
			all[i] = a.Provider
		}
		mismatch := jobEvent("job_checkpoint_mismatch", j, seqAttr, Attr{"results", strconv.Itoa(out.Results)})
		kept, err := keepCheckpointed(o, j, all, p)
		if err != nil {
			return nil, false, err
		}
		for i := range j.Assignments {
			if err := releaseAssignment(o, j, &j.Assignments[i]); err != nil {
				return nil, false, err
			}
		}
		j.Assignments = []Assignment{}
		j.Replicas = uint64(out.Replicas)
		j.State = JobQueued
		j.Revealing = false
		w := resumeWait(Wait{Code: WaitCheckpointDisagree, Seq: seq, Distinct: uint64(out.Results), Of: uint64(n), Count: uint64(out.Replicas)}, j, kept)
		j.setWait(w)
		j.setCheckpointWait(w)
		j.Deadline = 0
		enqueueJob(o, j)
		setJob(o, j, old)
		return []Event{mismatch, jobEvent("job_escalated", j, Attr{"replicas", strconv.Itoa(out.Replicas)})}, true, nil
	}
	return nil, false, fmt.Errorf("job %d: checkpoint tally returned %v: %w", j.ID, out.Action, ErrInternal)
}
