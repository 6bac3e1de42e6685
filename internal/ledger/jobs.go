package ledger

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// The market: jobs, their escrow, assignments and settlement. The scheduler
// that places queued jobs is in scheduler.go.

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

// JobSpec is the on-chain part of a job spec: what the scheduler matches and
// what providers run. Inputs travel as one encrypted blob.
type JobSpec struct {
	Name     string            `json:"name"`
	Executor string            `json:"executor"`
	Module   string            `json:"module,omitempty"` // wasm: blob "sha256:<hex>" of the module
	Image    string            `json:"image,omitempty"`  // oci: registry/repo@sha256:<hex>
	Command  []string          `json:"command,omitempty"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Inputs   []string          `json:"inputs,omitempty"` // guest paths the input bundle provides
	Outputs  []string          `json:"outputs"`
	// Resources.
	CPUMilli      uint64   `json:"cpu_milli"` // thousandths of a core
	Memory        uint64   `json:"memory"`    // bytes
	Disk          uint64   `json:"disk"`      // bytes
	GPUCount      uint64   `json:"gpu_count"`
	GPUModels     []string `json:"gpu_models,omitempty"`
	MinVRAM       uint64   `json:"min_vram,omitempty"` // bytes
	MinComputeCap string   `json:"min_compute_cap,omitempty"`
	// MaxPricePerHour is the ceiling, usync per hour for the whole job
	// (per replica).
	MaxPricePerHour uint64 `json:"max_price_per_hour"`
	TimeoutSeconds  uint64 `json:"timeout_seconds"`
	Verification    string `json:"verification"` // none | spot | full
	Deterministic   bool   `json:"deterministic"`
	Region          string `json:"region,omitempty"`
	RegionRequired  bool   `json:"region_required,omitempty"`
	// Network asks for network access: only providers that allow it
	// (ProviderInfo.Network) take the job; oci only.
	Network bool `json:"network,omitempty"`
}

var (
	jobNameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	blobRefRE   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	imageRefRE  = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:/-]{0,254}@sha256:[0-9a-f]{64}$`)
	envKeyRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	maxJobItems = 128
)

// MinJobDisk is the least disk, in bytes, a job may ask for: the minimum
// that the job spec (jobspec.MinDisk) enforces, so that the ledger refuses
// what the CLI refuses. A provider budgets a job's files against it; a
// spec without it would leave the provider to guess.
const MinJobDisk = 1 << 20

// PlannedReplicas is how many providers run a job of this verification
// level from the start.
func (s *JobSpec) PlannedReplicas() uint64 {
	if s.Verification == "full" {
		return 2
	}
	return 1
}

// Units is what a provider's ask multiplies by: GPUs for a GPU job, whole
// cores for a CPU job.
func (s *JobSpec) Units() uint64 {
	if s.GPUCount > 0 {
		return s.GPUCount
	}
	return max(1, (s.CPUMilli+999)/1000)
}

func checkGuestPath(field, p string) error {
	if !strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") || len(p) > 4096 {
		return invalid("%s %q: want an absolute path", field, p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return invalid("%s %q: must not contain ..", field, p)
		}
	}
	return nil
}

// Validate checks what the ledger can check of a spec without state.
func (s *JobSpec) Validate() error {
	if !jobNameRE.MatchString(s.Name) {
		return invalid("name %q: want 1-64 of a-z 0-9 . _ -, starting with a letter or digit", s.Name)
	}
	switch s.Executor {
	case "wasm":
		if !blobRefRE.MatchString(s.Module) {
			return invalid("module %q: a wasm job names its module by blob hash (sha256:<64 hex>)", s.Module)
		}
		if s.Image != "" {
			return invalid("image is for oci jobs; this job's executor is wasm")
		}
	case "oci":
		if !imageRefRE.MatchString(s.Image) {
			return invalid("image %q: an oci job names its image by digest, registry/repo@sha256:<64 hex>", s.Image)
		}
		if s.Module != "" {
			return invalid("module is for wasm jobs; this job's executor is oci")
		}
	default:
		return invalid("executor %q: want wasm or oci", s.Executor)
	}
	if len(s.Args)+len(s.Command) > maxJobItems || len(s.Env) > maxJobItems || len(s.Inputs) > maxJobItems || len(s.Outputs) > maxJobItems {
		return invalid("too many args, env entries, inputs or outputs (at most %d each)", maxJobItems)
	}
	for k := range s.Env {
		if !envKeyRE.MatchString(k) {
			return invalid("env key %q: want [A-Za-z_][A-Za-z0-9_]*", k)
		}
	}
	for i, p := range s.Inputs {
		if err := checkGuestPath(fmt.Sprintf("inputs[%d]", i), p); err != nil {
			return err
		}
	}
	if len(s.Outputs) == 0 {
		return invalid("outputs is empty: name at least one path the job writes, e.g. /out")
	}
	for i, p := range s.Outputs {
		if err := checkGuestPath(fmt.Sprintf("outputs[%d]", i), p); err != nil {
			return err
		}
	}
	switch {
	case s.CPUMilli == 0 || s.CPUMilli > 1024_000:
		return invalid("resources.cpu out of range (0, 1024] cores")
	case s.Memory == 0 || s.Memory > maxRAM:
		return invalid("resources.memory %d bytes out of range (0, 64 TiB]", s.Memory)
	case s.Disk < MinJobDisk:
		return invalid("resources.disk %d bytes is below the minimum %d (1 MiB): a job's disk is the scratch space for its inputs, files and outputs, and 0 does not mean unlimited", s.Disk, MinJobDisk)
	case s.Disk > maxDisk:
		return invalid("resources.disk %d bytes is more than 1 PiB", s.Disk)
	case s.GPUCount > uint64(maxGPUs):
		return invalid("resources.gpu.count %d is more than %d", s.GPUCount, maxGPUs)
	case s.GPUCount == 0 && (len(s.GPUModels) > 0 || s.MinVRAM > 0 || s.MinComputeCap != ""):
		return invalid("resources.gpu sets models, min_vram or min_compute_cap but count is 0")
	case s.MinComputeCap != "" && !computeCapRE.MatchString(s.MinComputeCap):
		return invalid("resources.gpu.min_compute_cap %q: want MAJOR.MINOR", s.MinComputeCap)
	case s.MaxPricePerHour == 0 || s.MaxPricePerHour > maxPriceHour*uint64(maxGPUs):
		return invalid("max_price %d usync/hour out of range", s.MaxPricePerHour)
	case s.TimeoutSeconds == 0 || s.TimeoutSeconds > 7*24*3600:
		return invalid("timeout %ds out of range [1s, 7 days]", s.TimeoutSeconds)
	}
	for _, m := range s.GPUModels {
		if !classRE.MatchString(m) {
			return invalid("resources.gpu.models: %q is not a hardware class like RTX_4090", m)
		}
	}
	switch s.Verification {
	case "none", "spot":
	case "full":
		if !s.Deterministic {
			return invalid("verification full compares replicas' outputs, so the job must be deterministic")
		}
	default:
		return invalid("verification %q: want none, spot or full", s.Verification)
	}
	if s.Region != "" && !regionRE.MatchString(s.Region) {
		return invalid("region %q: want lower-case letters, digits and -", s.Region)
	}
	if s.RegionRequired && s.Region == "" {
		return invalid("region_required without a region")
	}
	if s.Network && s.Executor != "oci" {
		return invalid("network: only oci jobs can have network access")
	}
	return nil
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
}

// Job is a job's state.
type Job struct {
	ID          uint64          `json:"id"`
	Owner       address.Address `json:"owner"`
	Spec        JobSpec         `json:"spec"`
	InputBlob   string          `json:"input_blob,omitempty"` // sha256:<hex> of the encrypted input bundle
	ConsumerKey string          `json:"consumer_key"`         // age recipient for outputs and logs
	State       string          `json:"state"`
	Reason      string          `json:"reason,omitempty"`
	Escrow      uint64          `json:"escrow"` // usync still locked
	Cost        uint64          `json:"cost"`   // usync paid to providers
	Fee         uint64          `json:"fee"`    // usync paid to the treasury
	Refund      uint64          `json:"refund"` // usync returned to the owner
	SubmittedAt int64           `json:"submitted_at"`
	Height      uint64          `json:"height"` // block of submission
	FinishedAt  int64           `json:"finished_at,omitempty"`
	Attempts    uint64          `json:"attempts"` // placements so far
	Assignments []Assignment    `json:"assignments"`
	Deadline    int64           `json:"deadline,omitempty"` // block time by which the current step must happen
	// Replicas is how many providers the job wants now: the planned
	// replicas, plus audit and escalation replicas (verify.go).
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
	// run; empty when none was dropped.
	AuditDropped string `json:"audit_dropped,omitempty"`
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

var (
	keyNextJob       = []byte("jobs/next")
	keyEscrow        = []byte("chain/escrow")
	prefixJob        = []byte("job/")
	prefixJobQueue   = []byte("jobq/")  // new and restarted jobs, in id order
	prefixVerifyQ    = []byte("jobvq/") // jobs waiting for a verification replica: placed first
	prefixJobOwner   = []byte("jobown/")
	prefixJobProv    = []byte("jobprov/")
	prefixJobDue     = []byte("jobdue/")
	keyQueueCursor   = []byte("jobs/cursor")
	keyQueueLen      = []byte("jobs/queued")
	jobEventAttrName = "job"
)

func u64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func jobKey(id uint64) []byte         { return u64(slices.Clone(prefixJob), id) }
func jobQueueKey(id uint64) []byte    { return u64(slices.Clone(prefixJobQueue), id) }
func verifyQueueKey(id uint64) []byte { return u64(slices.Clone(prefixVerifyQ), id) }

// enqueueJob puts a job in the scheduler's queue (if it is not there): the
// verification queue when it already has committed results (it waits for
// an audit, escalation or replacement replica), else the main queue.
func enqueueJob(o *Overlay, j *Job) {
	k := jobQueueKey(j.ID)
	if j.committed() > 0 {
		k = verifyQueueKey(j.ID)
	}
	dequeueJob(o, j.ID)
	o.Set(k, []byte{1})
	setUint(o, keyQueueLen, QueueLen(o)+1)
}

// dequeueJob takes a job out of the scheduler's queues (if it is there).
func dequeueJob(o *Overlay, id uint64) {
	for _, k := range [][]byte{jobQueueKey(id), verifyQueueKey(id)} {
		if o.Get(k) != nil {
			o.Delete(k)
			setUint(o, keyQueueLen, QueueLen(o)-1)
		}
	}
}

// QueueLen is the number of jobs waiting for a provider.
func QueueLen(kv KV) uint64 { return getUint(kv, keyQueueLen) }
func jobOwnerKey(a address.Address, id uint64) []byte {
	return u64(append(slices.Clone(prefixJobOwner), a[:]...), id)
}
func jobProvKey(a address.Address, id uint64) []byte {
	return u64(append(slices.Clone(prefixJobProv), a[:]...), id)
}
func jobDueKey(at int64, id uint64) []byte {
	return u64(u64(slices.Clone(prefixJobDue), uint64(max(at, 0))), id)
}
func jobAttrs(j *Job, more ...Attr) []Attr {
	return append([]Attr{{jobEventAttrName, strconv.FormatUint(j.ID, 10)}}, more...)
}
func jobEvent(typ string, j *Job, more ...Attr) Event {
	return Event{Type: typ, Attrs: jobAttrs(j, more...)}
}

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

// setJob stores j and keeps its deadline index in step.
func setJob(o *Overlay, j *Job, oldDeadline int64) {
	if oldDeadline != 0 {
		o.Delete(jobDueKey(oldDeadline, j.ID))
	}
	if j.Deadline != 0 && !j.Done() {
		o.Set(jobDueKey(j.Deadline, j.ID), []byte{1})
	}
	o.Set(jobKey(j.ID), encodeRecord(j))
}

// Escrowed returns the total usync locked in job escrow.
func Escrowed(kv KV) uint64 { return getUint(kv, keyEscrow) }

// JobsOf calls fn for addr's jobs, newest first, until fn returns false.
func JobsOf(kv KV, owner address.Address, fn func(id uint64) bool) {
	p := append(slices.Clone(prefixJobOwner), owner[:]...)
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

func hasActiveJobs(kv KV, provider address.Address) bool {
	p := append(slices.Clone(prefixJobProv), provider[:]...)
	found := false
	kv.Iterate(p, prefixEnd(p), func(_, _ []byte) bool { found = true; return false })
	return found
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

// JobEscrow is what SubmitJob locks: the most the job can cost (max price ×
// its chargeable seconds × planned replicas) plus the protocol fee on that.
func JobEscrow(s *JobSpec, p Params) uint64 {
	most := mulDiv(s.MaxPricePerHour, chargeableSeconds(s, p), 3600) * s.PlannedReplicas()
	return most + mulDiv(most, p.ProtocolFeeBps, 10_000)
}

// chargeableSeconds is the most seconds one replica of the job can be
// charged: its run (the timeout) or, if the owner never grants the key,
// the slot it held until the grant deadline (holdCharge).
func chargeableSeconds(s *JobSpec, p Params) uint64 {
	return max(s.TimeoutSeconds, p.JobGrantTimeout)
}

// holdSeconds is how long a's slot has been held for a job that did not
// start it: from its placement to now, at most the grant timeout (after
// that the job no longer holds it).
func holdSeconds(a *Assignment, p Params, now int64) uint64 {
	return min(uint64(max(now-a.AssignedAt, 0)), p.JobGrantTimeout)
}

// chargeHold pays a provider whose slot a job held without running it (the
// owner did not grant the key in time, or cancelled first) for the seconds
// it was held at its agreed price: from the escrow, with the protocol fee,
// for a replica the owner planned; from the treasury for an audit or
// escalation replica, as that replica's run would have been. Holding a
// slot thus costs what running in it costs, so blocking providers is no
// cheaper than using them.
func chargeHold(o *Overlay, j *Job, a *Assignment, p Params, now int64) error {
	cost := mulDiv(a.PricePerHour, holdSeconds(a, p, now), 3600)
	if a.Extra {
		return payFromTreasury(o, j, a, cost)
	}
	return payProvider(o, j, a, min(cost, mulDiv(j.Escrow, 10_000, 10_000+p.ProtocolFeeBps)), p)
}

// mulDiv returns a×b/c rounded down, computed in 128 bits; a result that
// does not fit 64 bits saturates (no job can be that expensive: escrow
// would fail first).
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// Messages.

// MsgSubmitJob submits a job and locks its escrow.
type MsgSubmitJob struct {
	Spec        JobSpec `json:"spec"`
	InputBlob   string  `json:"input_blob,omitempty"`
	ConsumerKey string  `json:"consumer_key"`
	// KeyCommitment is JobKeyCommitment of the job key; without it only
	// the owner can give an audit replica the key.
	KeyCommitment *Hash `json:"key_commitment,omitempty"`
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

// MsgStartJob is an assigned provider saying it has started the job.
type MsgStartJob struct {
	JobID uint64 `json:"job_id"`
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
	if m.InputBlob != "" && !blobRefRE.MatchString(m.InputBlob) {
		return invalid("input_blob %q: want sha256:<64 hex>", m.InputBlob)
	}
	if len(m.Spec.Inputs) > 0 && m.InputBlob == "" {
		return invalid("the spec has inputs but input_blob is empty")
	}
	if hrp, key, err := address.DecodeBech32(m.ConsumerKey); err != nil || hrp != "age" || len(key) != 32 {
		return invalid("consumer_key %q is not an age X25519 recipient (age1…)", m.ConsumerKey)
	}
	return nil
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
func (m *MsgStartJob) ValidateBasic() error { return nil }

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
		ID: id, Owner: from, Spec: m.Spec, InputBlob: m.InputBlob, ConsumerKey: m.ConsumerKey,
		State: JobQueued, Reason: "waiting for the scheduler at the end of the block", Escrow: escrow,
		SubmittedAt: info.Time.Unix(), Height: uint64(info.Height), Assignments: []Assignment{},
		Replicas: m.Spec.PlannedReplicas(), KeyCommitment: m.KeyCommitment,
	}
	setJob(o, j, 0)
	enqueueJob(o, j)
	o.Set(jobOwnerKey(from, id), []byte{1})
	return []Event{jobEvent("job_submitted", j, Attr{"owner", from.String()}, Attr{"escrow", strconv.FormatUint(escrow, 10)})}, nil
}

func (j *Job) assignment(p address.Address) *Assignment {
	for i := range j.Assignments {
		if j.Assignments[i].Provider == p {
			return &j.Assignments[i]
		}
	}
	return nil
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
		a := j.assignment(g.Provider)
		if a == nil {
			return nil, fmt.Errorf("%s is not assigned to job %d: %w", g.Provider, j.ID, ErrNotJobParty)
		}
		a.KeyGrant = slices.Clone(g.WrappedKey)
		a.HandedBy = nil // the owner's grant, not a handover anyone can dispute
	}
	old := j.Deadline
	if allGranted(j) {
		j.Reason = "key granted; waiting for the provider to start"
		if j.committed() > 0 {
			j.Reason = "key granted; waiting for the new replica to start"
		}
		j.Deadline = info.Time.Unix() + int64(p.JobStartTimeout)
	}
	setJob(o, j, old)
	return []Event{jobEvent("job_key_granted", j)}, nil
}

func allGranted(j *Job) bool {
	for _, a := range j.Assignments {
		if a.KeyGrant == nil {
			return false
		}
	}
	return true
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
	a.StartedAt = info.Time.Unix()
	old := j.Deadline
	started := true
	for _, x := range j.Assignments {
		started = started && x.StartedAt != 0
	}
	if started {
		if j.committed() > 0 {
			j.State, j.Reason = JobVerifying, "the extra replica is running"
		} else {
			j.State, j.Reason = JobRunning, ""
		}
		j.Deadline = info.Time.Unix() + int64(j.Spec.TimeoutSeconds) + int64(p.JobResultGrace)
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
	// Metered time cannot exceed the job's timeout nor the time the
	// provider has had since it started.
	elapsed := uint64(max(info.Time.Unix()-a.StartedAt, 0)) + 1
	a.Metered = min(m.MeteredSeconds, j.Spec.TimeoutSeconds, elapsed)
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
	if err := releaseSlot(o, from); err != nil {
		return nil, err
	}
	old := j.Deadline
	events := []Event{jobEvent("job_result", j, Attr{"provider", from.String()}, Attr{"metered_seconds", strconv.FormatUint(a.Metered, 10)})}
	if n := j.committed(); n < len(j.Assignments) || j.queuedForReplica() {
		j.State, j.Reason = JobVerifying, fmt.Sprintf("%d of %d replicas reported", n, j.Replicas)
		setJob(o, j, old)
		return events, nil
	}
	if revealed(j) > 0 && checked {
		// An escalation round: the earlier replicas revealed already.
		evs, err := openReveal(o, j, p, info)
		return append(events, evs...), err
	}
	evs, err := afterCommits(o, j, p, info)
	return append(events, evs...), err
}

// payProvider moves cost (capped by what the escrow holds) and its fee out
// of the job's escrow.
func payProvider(o *Overlay, j *Job, a *Assignment, cost uint64, p Params) error {
	fee := mulDiv(cost, p.ProtocolFeeBps, 10_000)
	if cost+fee > j.Escrow {
		return fmt.Errorf("job %d: escrow %d cannot cover %d + fee %d: %w", j.ID, j.Escrow, cost, fee, ErrInternal)
	}
	acct, err := GetAccount(o, a.Provider)
	if err != nil {
		return err
	}
	acct.Balance += cost
	setAccount(o, &acct)
	if pr, ok, err := GetProvider(o, a.Provider); err != nil {
		return err
	} else if ok {
		pr.Earned += cost
		setProvider(o, pr)
	}
	setUint(o, keyTreasury, Treasury(o)+fee)
	setUint(o, keyEscrow, Escrowed(o)-cost-fee)
	j.Escrow -= cost + fee
	j.Cost += cost
	j.Fee += fee
	a.Paid += cost
	return nil
}

// finishJob refunds what is left of the escrow and releases the providers.
func finishJob(o *Overlay, j *Job, info BlockInfo) ([]Event, error) {
	old := j.Deadline
	owner, err := GetAccount(o, j.Owner)
	if err != nil {
		return nil, err
	}
	owner.Balance += j.Escrow
	setAccount(o, &owner)
	setUint(o, keyEscrow, Escrowed(o)-j.Escrow)
	j.Refund += j.Escrow
	j.Escrow = 0
	j.FinishedAt = info.Time.Unix()
	j.Deadline = 0
	for _, a := range j.Assignments {
		if err := releaseProvider(o, a.Provider, j.ID, a.holdsSlot()); err != nil {
			return nil, err
		}
	}
	dequeueJob(o, j.ID)
	setJob(o, j, old)
	return []Event{jobEvent("job_"+j.State, j, Attr{"cost", strconv.FormatUint(j.Cost, 10)}, Attr{"refund", strconv.FormatUint(j.Refund, 10)})}, nil
}

// holdsSlot reports whether the assignment still occupies one of its
// provider's max_jobs slots: a replica frees its slot when it commits (it
// no longer computes; it only has to reveal).
func (a *Assignment) holdsSlot() bool { return a.Commitment == nil && a.Result == nil }

// releaseProvider ends a provider's part in a job, and frees its slot if
// the assignment still held one.
func releaseProvider(o *Overlay, provider address.Address, id uint64, slot bool) error {
	o.Delete(jobProvKey(provider, id))
	if !slot {
		return nil
	}
	return releaseSlot(o, provider)
}

func releaseSlot(o *Overlay, provider address.Address) error {
	p, ok, err := GetProvider(o, provider)
	if err != nil || !ok {
		return err
	}
	if p.Jobs > 0 {
		p.Jobs--
	}
	setProvider(o, p)
	return nil
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
	// reported, if they did), replicas the owner planned from the escrow,
	// extra ones from the treasury.
	for i := range j.Assignments {
		a := &j.Assignments[i]
		if a.StartedAt == 0 {
			// Placed and not started: it held its slot for this job.
			if err := chargeHold(o, j, a, p, info.Time.Unix()); err != nil {
				return nil, err
			}
			continue
		}
		secs := min(uint64(max(info.Time.Unix()-a.StartedAt, 0)), j.Spec.TimeoutSeconds)
		if a.Commitment != nil || a.Result != nil {
			secs = a.Metered
		}
		cost := mulDiv(a.PricePerHour, secs, 3600)
		if a.Extra {
			if err := payFromTreasury(o, j, a, cost); err != nil {
				return nil, err
			}
			continue
		}
		// What the escrow can still cover, fee included.
		cost = min(cost, mulDiv(j.Escrow, 10_000, 10_000+p.ProtocolFeeBps))
		if err := payProvider(o, j, a, cost, p); err != nil {
			return nil, err
		}
	}
	j.State, j.Reason = JobCancelled, "cancelled by its owner"
	return finishJob(o, j, info)
}

// expireJobs handles jobs whose current step is overdue at block time now.
func expireJobs(o *Overlay, now int64, p Params, info BlockInfo) ([]Event, error) {
	var due []uint64
	o.Iterate(prefixJobDue, jobDueKey(now+1, 0), func(k, _ []byte) bool {
		due = append(due, binary.BigEndian.Uint64(k[len(prefixJobDue)+8:]))
		return true
	})
	var events []Event
	for _, id := range due {
		j, err := mustJob(o, id)
		if err != nil {
			return nil, err
		}
		var evs []Event
		switch {
		case j.Done():
			o.Delete(jobDueKey(j.Deadline, id))
			continue
		case j.Revealing:
			// Replicas that did not open their commitment in time do not
			// vote.
			evs, err = decide(o, j, p, info)
		case j.queuedForReplica() && j.committed() > 0:
			// No provider took the extra replica in time: go on with the
			// replicas there are.
			evs, err = dropReplicas(o, j, nil, "no provider could take the extra replica in time", p, info)
		case !allGranted(j) && j.committed() == 0:
			// Every provider placed on it held a slot until now: the
			// owner pays for that time, and gets the rest back.
			for i := range j.Assignments {
				if err := chargeHold(o, j, &j.Assignments[i], p, now); err != nil {
					return nil, err
				}
			}
			j.State = JobFailed
			j.Reason = fmt.Sprintf("the owner did not grant the job key in time; paid %dusync for the provider slots it held", j.Cost)
			evs, err = finishJob(o, j, info)
		case !allGranted(j) && j.KeyCommitment != nil && slices.ContainsFunc(j.Assignments, func(a Assignment) bool { return a.waitsForHandover() }):
			evs, err = failWithheldHandover(o, j, p, info)
		case !allGranted(j):
			var ungranted []address.Address
			for i := range j.Assignments {
				a := &j.Assignments[i]
				if a.KeyGrant == nil {
					if err := chargeHold(o, j, a, p, now); err != nil {
						return nil, err
					}
					ungranted = append(ungranted, a.Provider)
				}
			}
			evs, err = dropReplicas(o, j, ungranted, "the owner did not grant the extra replica the job key in time", p, info)
		default:
			var late []address.Address
			for _, a := range j.Assignments {
				if a.Commitment == nil && a.Result == nil {
					late = append(late, a.Provider)
				}
			}
			what := "did not start"
			if j.State != JobAssigned {
				what = "did not report a result"
			}
			evs, err = reassign(o, j, late, fmt.Sprintf("provider %s in time", what), p, info)
		}
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

// reassign takes the job away from the given providers (they are not paid)
// and queues it for others, or gives up when it has been placed too often.
// Replicas that already committed keep their place: only the gone ones are
// replaced.
func reassign(o *Overlay, j *Job, gone []address.Address, why string, p Params, info BlockInfo) ([]Event, error) {
	if j.committed() > 0 {
		if j.Attempts >= p.JobMaxAttempts+p.MaxReplicas {
			return dropReplicas(o, j, gone, why+"; no more replacements", p, info)
		}
		old := j.Deadline
		for _, g := range gone {
			if err := releaseProvider(o, g, j.ID, true); err != nil {
				return nil, err
			}
		}
		j.Assignments = slices.DeleteFunc(j.Assignments, func(a Assignment) bool { return slices.Contains(gone, a.Provider) })
		j.State = JobVerifying
		j.Reason = fmt.Sprintf("%s (%s); placing another replica", why, joinAddrs(gone))
		j.Deadline = info.Time.Unix() + int64(p.JobGrantTimeout)
		enqueueJob(o, j)
		setJob(o, j, old)
		return []Event{jobEvent("job_reassigned", j, Attr{"providers", joinAddrs(gone)})}, nil
	}
	old := j.Deadline
	for _, g := range gone {
		if err := releaseProvider(o, g, j.ID, true); err != nil {
			return nil, err
		}
	}
	names := joinAddrs(gone)
	if j.Attempts >= p.JobMaxAttempts {
		j.State = JobFailed
		j.Reason = fmt.Sprintf("%s (%s); gave up after %d placements", why, names, j.Attempts)
		return finishJob(o, j, info)
	}
	// Nothing committed yet: every replica restarts, so that the results
	// come from one placement.
	for _, a := range j.Assignments {
		if !slices.Contains(gone, a.Provider) {
			if err := releaseProvider(o, a.Provider, j.ID, true); err != nil {
				return nil, err
			}
		}
	}
	j.Assignments = []Assignment{}
	j.State = JobQueued
	j.Reason = fmt.Sprintf("%s (%s); placing it again", why, names)
	j.Deadline = 0
	enqueueJob(o, j)
	setJob(o, j, old)
	return []Event{jobEvent("job_reassigned", j, Attr{"providers", names})}, nil
}

// dropReplicas gives up on extra replicas that did not commit: the job goes
// on with the replicas that did.
func dropReplicas(o *Overlay, j *Job, gone []address.Address, why string, p Params, info BlockInfo) ([]Event, error) {
	for _, g := range gone {
		if err := releaseProvider(o, g, j.ID, true); err != nil {
			return nil, err
		}
	}
	j.Assignments = slices.DeleteFunc(j.Assignments, func(a Assignment) bool { return slices.Contains(gone, a.Provider) })
	j.Replicas = uint64(len(j.Assignments))
	j.AuditDropped = why
	dequeueJob(o, j.ID)
	events := []Event{jobEvent("job_replicas_dropped", j, Attr{"providers", joinAddrs(gone)}, Attr{"why", why})}
	var evs []Event
	var err error
	if revealed(j) > 0 || !j.Spec.Checked() {
		evs, err = decide(o, j, p, info)
	} else {
		evs, err = openReveal(o, j, p, info)
	}
	return append(events, evs...), err
}

func joinAddrs(as []address.Address) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = a.String()
	}
	return strings.Join(names, ",")
}

// reassignJobsOf moves the unfinished jobs of a provider that went offline.
func reassignJobsOf(o *Overlay, provider address.Address, p Params, info BlockInfo) ([]Event, error) {
	var events []Event
	for _, id := range ActiveJobsOf(o, provider) {
		j, err := mustJob(o, id)
		if err != nil {
			return nil, err
		}
		if j.Done() {
			o.Delete(jobProvKey(provider, id))
			continue
		}
		if a := j.assignment(provider); a != nil && (a.Commitment != nil || a.Result != nil) {
			continue // it delivered; waiting for the other replicas
		}
		evs, err := reassign(o, j, []address.Address{provider}, "provider went offline", p, info)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

// failWithheldHandover settles a job whose extra replica posted its handover
// key and got the job key from nobody by the deadline: the owner did not
// grant it, and no committed replica handed it over. Every committed
// replica could have (handover.go), so each is treated as one that
// withholds its reveal: slashed, unpaid, counted invalid. Otherwise a
// primary with a wrong result would stay silent whenever an audit is drawn
// and keep its unverified pay. The extra replicas are paid for the slot
// they held; the job fails and the owner gets the rest back.
func failWithheldHandover(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	var events []Event
	withheld := 0
	for i := range j.Assignments {
		a := &j.Assignments[i]
		switch {
		case a.KeyGrant == nil:
			if err := chargeHold(o, j, a, p, info.Time.Unix()); err != nil {
				return nil, err
			}
		case a.Commitment != nil:
			withheld++
			a.Outcome = OutcomeWithheldKey
			amt, err := slash(o, a.Provider, j.Owner, p, info, fmt.Sprintf("job %d: did not hand the job key to the audit replica", j.ID))
			if err != nil {
				return nil, err
			}
			a.Slashed = amt
			if err := recordUnrevealed(o, a.Provider, a.Class); err != nil {
				return nil, err
			}
			events = append(events, jobEvent("job_replica_slashed", j, Attr{"provider", a.Provider.String()}, Attr{"amount", strconv.FormatUint(amt, 10)}, Attr{"why", OutcomeWithheldKey}))
		}
	}
	j.AuditDropped = "neither the owner nor a committed replica gave the audit replica the job key in time"
	j.State = JobFailed
	j.Reason = fmt.Sprintf("the audit could not run: %s; %d committed replica(s) slashed for withholding the key; refunded", j.AuditDropped, withheld)
	evs, err := finishJob(o, j, info)
	return append(events, evs...), err
}
