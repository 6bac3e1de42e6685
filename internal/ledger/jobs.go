package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Jobs: the record (its states, assignments and results), its indexes by
// owner, provider and deadline, and the scheduler's queues. A job's rules
// are in spec.go, its messages in msg_jobs.go, its placement in
// scheduler.go, its verification in verification.go, its payments in
// settlement.go and its deadlines in deadlines.go.

// Job states (DESIGN.md section 7).
const (
	JobQueued    = "queued"    // waiting for a provider
	JobAssigned  = "assigned"  // placed; waiting for the key grant and the provider's start
	JobRunning   = "running"   // every assigned provider started it
	JobVerifying = "verifying" // some replicas committed, waiting for the rest
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// Job is a job's state.
type Job struct {
	ID          uint64          `json:"id"`
	Owner       address.Address `json:"owner"`
	Spec        JobSpec         `json:"spec"`
	InputBlob   string          `json:"input_blob,omitempty"` // sha256:<hex> of the encrypted input bundle
	ConsumerKey string          `json:"consumer_key"`         // age recipient for outputs and logs
	State       string          `json:"state"`
	// Reason is a sentence saying why, in records written before version
	// 6; the ledger writes none now (Wait says it). The API fills it in
	// with Wait rendered (internal/jobtext) for people.
	Reason      string       `json:"reason,omitempty"`
	Escrow      uint64       `json:"escrow"` // usync still locked
	Cost        uint64       `json:"cost"`   // usync paid to providers
	Fee         uint64       `json:"fee"`    // usync paid to the treasury
	Refund      uint64       `json:"refund"` // usync returned to the owner
	SubmittedAt int64        `json:"submitted_at"`
	Height      uint64       `json:"height"` // block of submission
	FinishedAt  int64        `json:"finished_at,omitempty"`
	Attempts    uint64       `json:"attempts"` // placements so far
	Assignments []Assignment `json:"assignments"`
	Deadline    int64        `json:"deadline,omitempty"` // block time by which the current step must happen
	// Replicas is how many providers the job wants now: the planned
	// replicas, plus audit and escalation replicas (verification.go).
	Replicas   uint64 `json:"replicas"`
	AuditDrawn bool   `json:"audit_drawn,omitempty"` // a spot job's audit was drawn
	Revealing  bool   `json:"revealing,omitempty"`   // committed replicas may reveal
	Verdict    string `json:"verdict,omitempty"`     // validated, unverified, unchecked, no_majority
	// Delivered is the provider whose outputs the owner gets.
	Delivered *address.Address `json:"delivered,omitempty"`
	AuditCost uint64           `json:"audit_cost,omitempty"` // usync the treasury paid extra replicas
	// KeyCommitment is JobKeyCommitment of the job key, from the owner at
	// submit: what lets a committed replica hand the key to an audit
	// replica checkably while the owner is offline (handover.go).
	KeyCommitment *Hash `json:"key_commitment,omitempty"`
	// AuditDropped says why a drawn audit (or escalation) replica did not
	// run, in a sentence, in records written before version 6 (Dropped
	// says it now; the API fills this in from it).
	AuditDropped string `json:"audit_dropped,omitempty"`
	// WaitCode says, for programs, which case of Quote* codes keeps the
	// scheduler from placing the replicas the job waits for, e.g.
	// QuoteNoEngine (Wait has the numbers). Empty when it waits for none.
	WaitCode string `json:"wait_code,omitempty" rec:"since=3"`
	// DataAt is the API URL of the node whose blob gateway the owner
	// uploaded the module and inputs to (data.go); other gateways fetch
	// them from there. Empty from an older client.
	DataAt string `json:"data_at,omitempty" rec:"since=4"`
	// Released is the reason the provider that last handed the job back
	// (MsgReleaseJob) gave; ReleasedBy that provider (before version 6:
	// none, and Released is "provider: reason"). Empty when none did.
	Released string `json:"released,omitempty" rec:"since=4"`
	// Checkpoints are the latest checkpoints its providers committed
	// (checkpoint.go), oldest first; ResumeSeq the one the current
	// placement resumes from (0: the beginning); Progress the seconds of
	// run the checkpoints it resumed from kept, already paid for, which
	// the job's timeout no longer has (RunBudget); CheckpointNote the last
	// thing to say about them (a refusal, a fallback, a disagreement).
	Checkpoints    []Checkpoint `json:"checkpoints,omitempty" rec:"since=4"`
	ResumeSeq      uint64       `json:"resume_seq,omitempty" rec:"since=4"`
	Progress       uint64       `json:"progress_seconds,omitempty" rec:"since=4"`
	CheckpointNote string       `json:"checkpoint_note,omitempty" rec:"since=4"`
	// Preempted counts the times a higher tier preempted the job (a spot
	// job: market_preempt.go); PreemptWait, on a job that preempted
	// others, is the block time until which it waits for their slots
	// rather than preempting more.
	Preempted   uint64 `json:"preempted,omitempty" rec:"since=4"`
	PreemptWait int64  `json:"preempt_wait,omitempty" rec:"since=4"`
	// Wait says why the job is where it is: what it waits for, or why it
	// ended (wait.go; nil: nothing to say). Dropped says why a drawn
	// audit or escalation replica did not run (Drop* codes).
	// CheckpointWait is the last thing to say about its checkpoints (the
	// Checkpoint* codes; before version 6, CheckpointNote said it in a
	// sentence). ReleasedBy: see Released.
	Wait           *Wait            `json:"wait,omitempty" rec:"since=6"`
	Dropped        *Wait            `json:"dropped,omitempty" rec:"since=6"`
	CheckpointWait *Wait            `json:"checkpoint_wait,omitempty" rec:"since=6"`
	ReleasedBy     *address.Address `json:"released_by,omitempty" rec:"since=6"`
	// Judging: a judging round is open on the job's differing outputs
	// (judgment.go); JudgeRevealing: its commit window has closed and its
	// judges reveal; JudgeRound counts the rounds opened (the round in
	// JudgmentCommitment); JudgeFinal: the round may not end in an
	// escalation (it was opened after an extra replica was dropped).
	Judging        bool   `json:"judging,omitempty" rec:"since=8"`
	JudgeRevealing bool   `json:"judge_revealing,omitempty" rec:"since=8"`
	JudgeRound     uint64 `json:"judge_round,omitempty" rec:"since=8"`
	JudgeFinal     bool   `json:"judge_final,omitempty" rec:"since=8"`
}

// Assignment is one provider's part in a job.
type Assignment struct {
	Provider     address.Address `json:"provider"`
	PricePerHour uint64          `json:"price_per_hour"` // agreed at placement: the ask × units, usync per hour
	AssignedAt   int64           `json:"assigned_at"`    // block time, unix seconds
	KeyGrant     []byte          `json:"key_grant,omitempty"`
	StartedAt    int64           `json:"started_at,omitempty"`
	// Class is the hardware class the job was matched in ("cpu" for a
	// CPU job): verification records are kept per class.
	Class string `json:"class"`
	// WasmEngine is the wasm engine the provider declared when the job was
	// placed on it (ProviderInfo.WasmEngine), for a wasm job; it stays
	// what it was if the provider declares another later. Every replica
	// of a wasm job whose results are compared has the same one.
	WasmEngine string `json:"wasm_engine,omitempty" rec:"since=3"`
	// Commitment is H(manifest ‖ provider ‖ salt), for a checked job;
	// Metered the seconds the provider reported with it.
	Commitment *Hash  `json:"commitment,omitempty"`
	Metered    uint64 `json:"metered_seconds,omitempty"`
	// Result is the revealed result (committed in the clear for a job
	// that is not checked).
	Result *JobResult `json:"result,omitempty"`
	// Extra marks an audit or escalation replica: the treasury pays it,
	// not the job's escrow.
	Extra   bool   `json:"extra,omitempty"`
	Outcome string `json:"outcome,omitempty"` // in the verdict: majority, minority, unrevealed, no_majority, bad_handover, withheld_key
	Slashed uint64 `json:"slashed,omitempty"`
	Paid    uint64 `json:"paid"`
	// HandoverKey is the X25519 public key an extra replica made for this
	// job to receive the job key from a committed replica (handover.go);
	// HandedBy the committed replica whose handover is its KeyGrant.
	HandoverKey *Hash            `json:"handover_key,omitempty"`
	HandedBy    *address.Address `json:"handed_by,omitempty"`
	// PreemptAt, when set, is the block time at which a higher tier takes
	// this spot assignment's slot: the provider has until then to
	// checkpoint, then the job is requeued (market_preempt.go).
	PreemptAt int64 `json:"preempt_at,omitempty" rec:"since=4"`
	// JudgeCommitment is JudgmentCommitment of the provider's verdict
	// vector in the job's current judging round, Judgment the vector it
	// revealed; both cleared when a round opens.
	JudgeCommitment *Hash   `json:"judge_commitment,omitempty" rec:"since=8"`
	Judgment        *uint64 `json:"judgment,omitempty" rec:"since=8"`
	// Rank is the member this assignment runs of a gang (0..nodes-1, in
	// the order the gang was placed; gang.go); 0 for any other job.
	// GangKey is the public key of the member's end of the gang's private
	// network and GangEndpoint where the others may reach it, as the
	// member posted them (MsgGangMember).
	Rank         uint64 `json:"rank,omitempty" rec:"since=8"`
	GangKey      *Hash  `json:"gang_key,omitempty" rec:"since=8"`
	GangEndpoint string `json:"gang_endpoint,omitempty" rec:"since=8"`
	// Gang is the replica gang this member belongs to, for a gang at
	// verification full (0, 1, …; gang_verify.go): its members form
	// their own private network, and its ranks' results are one vote.
	// Placement is the job's placement (Job.Attempts once it was made)
	// that placed this member: a replica gang replaced later has a newer
	// one, its members' runs do not stop for it. Both 0 for other jobs.
	Gang      uint64 `json:"gang,omitempty" rec:"since=8"`
	Placement uint64 `json:"placement,omitempty" rec:"since=8"`
}

// JobResult is what a provider reports when its run ends.
type JobResult struct {
	ManifestHash   Hash   `json:"manifest_hash"` // SHA-256 of the plaintext output archive
	OutputBlob     string `json:"output_blob"`   // sha256:<hex> of the encrypted outputs
	LogBlob        string `json:"log_blob,omitempty"`
	MeteredSeconds uint64 `json:"metered_seconds"`
	ExitCode       int64  `json:"exit_code"`
	Failed         bool   `json:"failed"`
	Reason         string `json:"reason,omitempty"`
	Height         uint64 `json:"height"`
	// DataAt is the API URL of the node whose gateway the provider
	// uploaded the outputs and log to (data.go). Empty from an older
	// provider.
	DataAt string `json:"data_at,omitempty" rec:"since=4"`
}

// DeliveredResult is the result whose outputs a finished job delivers.
func (j *Job) DeliveredResult() *JobResult {
	if j.Delivered == nil {
		return nil
	}
	if a := j.assignment(*j.Delivered); a != nil {
		return a.Result
	}
	return nil
}

// Done reports whether the job reached a final state.
func (j *Job) Done() bool {
	return j.State == JobSucceeded || j.State == JobFailed || j.State == JobCancelled
}

func (j *Job) assignment(p address.Address) *Assignment {
	for i := range j.Assignments {
		if j.Assignments[i].Provider == p {
			return &j.Assignments[i]
		}
	}
	return nil
}

// committed counts the assignments that have committed (or, unchecked,
// reported) their result.
func (j *Job) committed() int {
	n := 0
	for _, a := range j.Assignments {
		if a.Commitment != nil || a.Result != nil {
			n++
		}
	}
	return n
}

// queuedForReplica reports whether the job waits for the scheduler.
func (j *Job) queuedForReplica() bool { return uint64(len(j.Assignments)) < j.Replicas }

func allGranted(j *Job) bool {
	for _, a := range j.Assignments {
		if a.KeyGrant == nil {
			return false
		}
	}
	return true
}

// holdsSlot reports whether the assignment still occupies one of its
// provider's max_jobs slots: a replica frees its slot when it commits (it
// no longer computes; it only has to reveal).
func (a *Assignment) holdsSlot() bool { return a.Commitment == nil && a.Result == nil }

func jobKey(id uint64) []byte { return u64(slices.Clone(prefixJob), id) }

// GetJob reads a job; ok is false if there is none with that id.
func GetJob(kv KV, id uint64) (*Job, bool, error) {
	b := kv.Get(jobKey(id))
	if b == nil {
		return nil, false, nil
	}
	j := &Job{}
	if err := decodeRecord(b, j); err != nil {
		return nil, false, fmt.Errorf("job %d: corrupt record: %w: %w", id, err, ErrInternal)
	}
	return j, true, nil
}

func mustJob(kv KV, id uint64) (*Job, error) {
	j, ok, err := GetJob(kv, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no job %d: %w", id, ErrUnknownJob)
	}
	return j, nil
}

// setJob stores j and keeps its deadline index in step. A job that waits
// for no replica keeps no WaitCode.
func setJob(o *Overlay, j *Job, oldDeadline int64) {
	if j.WaitCode != "" && (j.Done() || !j.queuedForReplica()) {
		j.WaitCode = ""
	}
	if at := j.preemptAt(); at != 0 && !j.Done() && (j.Deadline == 0 || j.Deadline > at) {
		// A preempted assignment's grace ends first (market_preempt.go).
		j.Deadline = at
	}
	if oldDeadline != 0 {
		o.Delete(jobDueKey(oldDeadline, j.ID))
	}
	if j.Deadline != 0 && !j.Done() {
		o.Set(jobDueKey(j.Deadline, j.ID), []byte{1})
	}
	o.Set(jobKey(j.ID), encodeRecord(j))
}

func jobOwnerKey(a address.Address, id uint64) []byte {
	return u64(append(slices.Clone(prefixJobOwner), a[:]...), id)
}

// JobsOf calls fn for addr's jobs, newest first, until fn returns false.
func JobsOf(kv KV, owner address.Address, fn func(id uint64) bool) {
	newestFirst(kv, append(slices.Clone(prefixJobOwner), owner[:]...), fn)
}

// newestFirst calls fn with the ids under an owner index prefix p (keys
// p + 8-byte id), highest first, until fn returns false.
func newestFirst(kv KV, p []byte, fn func(id uint64) bool) {
	var ids []uint64
	kv.Iterate(p, prefixEnd(p), func(k, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(k[len(p):]))
		return true
	})
	for i := len(ids) - 1; i >= 0; i-- {
		if !fn(ids[i]) {
			return
		}
	}
}

func jobProvKey(a address.Address, id uint64) []byte {
	return u64(append(slices.Clone(prefixJobProv), a[:]...), id)
}

// ActiveJobsOf returns the ids of the jobs assigned to provider addr that
// are not finished, oldest first.
func ActiveJobsOf(kv KV, provider address.Address) []uint64 {
	p := append(slices.Clone(prefixJobProv), provider[:]...)
	var ids []uint64
	kv.Iterate(p, prefixEnd(p), func(k, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(k[len(p):]))
		return true
	})
	return ids
}

func hasActiveJobs(kv KV, provider address.Address) bool {
	p := append(slices.Clone(prefixJobProv), provider[:]...)
	found := false
	kv.Iterate(p, prefixEnd(p), func(_, _ []byte) bool { found = true; return false })
	return found
}

func jobDueKey(at int64, id uint64) []byte {
	return u64(u64(slices.Clone(prefixJobDue), uint64(max(at, 0))), id)
}

func jobQueueKey(id uint64) []byte { return u64(slices.Clone(prefixJobQueue), id) }

func verifyQueueKey(id uint64) []byte { return u64(slices.Clone(prefixVerifyQ), id) }

func priorityQueueKey(id uint64) []byte { return u64(slices.Clone(prefixPriorityQ), id) }

// queueKey is the queue j waits in: the verification queue when it already
// has committed results, the priority queue for a priority-tier job, else
// the main queue.
func queueKey(j *Job) []byte {
	switch {
	case j.committed() > 0:
		return verifyQueueKey(j.ID)
	case j.Spec.Tier == TierPriority:
		return priorityQueueKey(j.ID)
	}
	return jobQueueKey(j.ID)
}

// enqueueJob puts a job in the scheduler's queue (if it is not there): the
// verification queue when it already has committed results (it waits for
// an audit, escalation or replacement replica), else the main queue.
func enqueueJob(o *Overlay, j *Job) {
	k := queueKey(j)
	dequeueJob(o, j.ID)
	o.Set(k, []byte{1})
	setUint(o, keyQueueLen, QueueLen(o)+1)
}

// dequeueJob takes a job out of the scheduler's queues (if it is there).
func dequeueJob(o *Overlay, id uint64) {
	for _, k := range [][]byte{jobQueueKey(id), verifyQueueKey(id), priorityQueueKey(id)} {
		if o.Get(k) != nil {
			o.Delete(k)
			setUint(o, keyQueueLen, QueueLen(o)-1)
		}
	}
}

// QueueLen is the number of jobs waiting for a provider.
func QueueLen(kv KV) uint64 { return getUint(kv, keyQueueLen) }

var jobEventAttrName = "job"

func jobAttrs(j *Job, more ...Attr) []Attr {
	return append([]Attr{{jobEventAttrName, strconv.FormatUint(j.ID, 10)}}, more...)
}

func jobEvent(typ string, j *Job, more ...Attr) Event {
	return Event{Type: typ, Attrs: jobAttrs(j, more...)}
}
