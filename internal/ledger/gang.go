package ledger

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// Gangs (issue 30): a job of resources.nodes N > 1 runs as N members, each
// on its own provider with the job's resources, that start together, talk
// over a private network and fail together. The ledger's part:
//
//   - Placement (scheduler.go, sched's pick): all N in one block or none,
//     on N distinct providers that share one region (the "site": one
//     operator's machines in one site are placed together on purpose;
//     nothing spreads a gang apart), each member's assignment with its
//     rank, 0..N-1, in the order the planner ranked them (rank 0 the best).
//     A member is one provider: a job that wants several GPUs on one
//     machine asks for gpu.count, not for nodes.
//   - Meeting: each member, once its key is granted, posts the public key
//     of its end of the private network (and, if it has one, an endpoint
//     others may reach it at) with MsgGangMember; a member may start only
//     when every member has posted one, so a running gang's members can all
//     find each other (MASTER_ADDR is rank 0's address on that network).
//   - Starting together: the job runs when every member started; the start
//     window is the single job's (params.job_start_timeout after the last
//     grant). A member that does not start in time, a member lost (its
//     provider offline), a member that hands the job back, or a member that
//     does not report its end in time stops the whole gang: every member is
//     released and the gang is queued again as a whole (from its last
//     complete checkpoint), or fails after params.job_max_attempts
//     placements (reassign, deadlines.go). A member that had already
//     reported its end is released with the others.
//   - Billing per member-second: the escrow covers N members at the job's
//     max price (per member) for its timeout; at the end each member is
//     paid its own metered seconds at its own agreed price (settleGang).
//     When the gang is stopped, each member is paid the seconds that the
//     gang's last complete checkpoint covers of its own run, and nothing
//     for the rest, as a single job's lost provider is (keepCheckpointed).
//   - Checkpoints: each member commits its own checkpoint (its rank's
//     state); step S of the gang is complete only when every member has
//     committed S, and a stopped gang resumes from the latest complete
//     step, each new member from its rank's checkpoint
//     (Job.ResumeCheckpointOf).
//   - Verification: a gang at verification none is settled on its
//     members' word (settleGang), its verdict unchecked. A deterministic
//     gang at full runs as whole replica gangs whose combined results are
//     tallied as a single job's replicas are (gang_verify.go).

// Interconnects a job may ask for between each member's GPUs
// (JobSpec.Interconnect) and a provider may declare (Inventory.Interconnect).
const (
	InterconnectNVLink = "nvlink" // every pair of the provider's GPUs is linked by NVLink
	InterconnectPCIe   = "pcie"   // GPUs share PCIe only; asked for, it matches any provider
)

// MaxGangNodes bounds a gang's members.
const MaxGangNodes = 64

// MaxGangEndpointLen bounds a member's endpoint (host:port).
const MaxGangEndpointLen = 255

// Gang reports whether a job of this spec runs as several members.
func (s *JobSpec) Gang() bool { return s.Nodes > 1 }

// ReplicaGangs is how many whole gangs a gang job of this spec runs from
// the start: 2 at verification full (gang_verify.go), else 1.
func (s *JobSpec) ReplicaGangs() uint64 {
	if s.Gang() && s.Verification == VerifyFull {
		return 2
	}
	return 1
}

// validateGang checks what a gang may be: an oci job (members talk over a
// network; a wasm module has none), verification none or full (full
// replicates the whole gang, gang_verify.go; spot's audit of one replica
// is not defined for a gang), at full deterministic, compared exactly and
// without checkpoints, not a trusted-execution job (its attestation is per
// provider and the private network would leave the enclave), and without
// network access (a member's namespace reaches only the other members).
func (s *JobSpec) validateGang() error {
	if !s.Gang() {
		return nil
	}
	switch {
	case s.Executor != ExecutorOCI:
		return invalid("resources.nodes %d: a gang's members talk over a private network, which only oci jobs have; this job's executor is %s", s.Nodes, s.Executor)
	case s.Verification != VerifyNone && s.Verification != VerifyFull:
		return invalid("resources.nodes %d with verification %s: a gang is verified by running whole replica gangs (verification: full, deterministic) or not at all (verification: none); spot's audit of one replica is not defined for a gang", s.Nodes, s.Verification)
	case s.Verification == VerifyFull && !s.Deterministic:
		return invalid("resources.nodes %d with verification full: replica gangs are compared output for output, which needs deterministic: true; set it, or verification: none", s.Nodes)
	case s.Verification == VerifyFull && s.Compare != nil:
		return invalid("resources.nodes %d with verification full and compare: replica gangs are compared exactly (their ranks' output roots); drop compare", s.Nodes)
	case s.Verification == VerifyFull && s.Checkpoint != nil:
		return invalid("resources.nodes %d with verification full and checkpoint: a replicated gang does not resume from checkpoints yet (a replica gang that loses a member runs again from the start); drop checkpoint, or set verification: none", s.Nodes)
	case s.Trust != "":
		return invalid("resources.nodes %d with trust %s: a gang's private network leaves each member's enclave; run a trusted job on one node", s.Nodes, s.Trust)
	case s.Network:
		return invalid("resources.nodes %d with network: true: a gang's members run in a namespace that reaches only the other members, over their private network; give URL inputs (the provider fetches them) instead of network access", s.Nodes)
	}
	return nil
}

// MsgGangMember is an assigned member of a gang, once its key is granted
// and before it starts, posting the public key of its end of the gang's
// private network (a WireGuard Curve25519 key) and, optionally, an
// endpoint (host:port) where the other members may reach it. It may post
// again, replacing both, until it starts.
type MsgGangMember struct {
	JobID     uint64 `json:"job_id"`
	PublicKey Hash   `json:"public_key"`
	Endpoint  string `json:"endpoint,omitempty"`
}

// Type implements Msg.
func (*MsgGangMember) Type() MsgType { return MsgTypeGangMember }

// ValidateBasic implements Msg.
func (m *MsgGangMember) ValidateBasic() error {
	if m.PublicKey == (Hash{}) {
		return invalid("public_key: want the member's 32-byte private network public key, not zeros")
	}
	return checkGangEndpoint(m.Endpoint)
}

// checkGangEndpoint checks a member's endpoint: empty, or host:port with a
// port in 1..65535.
func checkGangEndpoint(e string) error {
	if e == "" {
		return nil
	}
	if len(e) > MaxGangEndpointLen {
		return invalid("endpoint: %d bytes, at most %d", len(e), MaxGangEndpointLen)
	}
	// host:port, or [IPv6]:port; parsed here (the ledger imports no net).
	i := strings.LastIndexByte(e, ':')
	if i < 0 {
		return invalid("endpoint %q: want host:port", e)
	}
	host, port := e[:i], e[i+1:]
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.ContainsAny(host, ":[]") {
		return invalid("endpoint %q: want host:port, an IPv6 address in brackets", e)
	}
	if host == "" {
		return invalid("endpoint %q: want host:port", e)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return invalid("endpoint %q: port %q: want 1 to 65535", e, port)
	}
	for _, c := range []byte(host) {
		if c <= ' ' || c >= 0x7f {
			return invalid("endpoint %q: the host has a space or non-ASCII byte", e)
		}
	}
	return nil
}

func execGangMember(o *Overlay, from address.Address, m *MsgGangMember) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	switch {
	case !j.Spec.Gang():
		return nil, fmt.Errorf("job %d is not a gang (resources.nodes is 1): %w", j.ID, ErrInvalidMsg)
	case a.KeyGrant == nil:
		return nil, fmt.Errorf("job %d's key has not been granted to %s yet: %w", j.ID, from, ErrJobState)
	case a.StartedAt != 0:
		return nil, fmt.Errorf("%s already started job %d: its member key is fixed: %w", from, j.ID, ErrJobState)
	}
	k := m.PublicKey
	for _, x := range j.Assignments {
		if x.Provider != from && x.GangKey != nil && *x.GangKey == k {
			return nil, fmt.Errorf("job %d: rank %d already posted public key %s: %w", j.ID, x.Rank, k, ErrInvalidMsg)
		}
	}
	a.GangKey, a.GangEndpoint = &k, m.Endpoint
	setJob(o, j, j.Deadline)
	return []Event{jobEvent("job_gang_member", j, Attr{"provider", from.String()}, Attr{"rank", strconv.FormatUint(a.Rank, 10)})}, nil
}

// gangMembersPosted counts j's members that posted their member key.
func gangMembersPosted(j *Job) int {
	n := 0
	for _, a := range j.Assignments {
		if a.GangKey != nil {
			n++
		}
	}
	return n
}

// checkGangStart refuses a member's start while some member of its gang
// has not posted its key: it could not reach them.
func checkGangStart(j *Job, a *Assignment) error {
	if !j.Spec.Gang() {
		return nil
	}
	if replicated(j) {
		return checkReplicaGang(j, a) // gang_verify.go
	}
	if n := gangMembersPosted(j); n < len(j.Assignments) || uint64(n) < j.Spec.Nodes {
		return fmt.Errorf("job %d is a gang of %d: %d members posted their member key (gang_member); a member starts when all have: %w", j.ID, j.Spec.Nodes, n, ErrJobState)
	}
	return nil
}

// settleGang ends a gang every member of which reported its end: each is
// paid its own metered seconds at its own agreed price, rank 0's outputs
// are the delivered ones (every member's are in its own result), and the
// job failed if any member's run failed (the first such rank says why).
func settleGang(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	var failed *JobResult
	for i := range j.Assignments {
		a := &j.Assignments[i]
		if a.Result == nil {
			return nil, fmt.Errorf("job %d: settling a gang whose rank %d has no result: %w", j.ID, a.Rank, ErrInternal)
		}
		a.Outcome = OutcomeMajority
		paid := a.Paid
		if err := payForTime(o, j, a, a.Result.MeteredSeconds, p); err != nil {
			return nil, err
		}
		if err := recordWork(o, j, a, a.Paid-paid); err != nil {
			return nil, err
		}
		if a.Rank == 0 {
			j.Delivered = &a.Provider
		}
		if a.Result.Failed && (failed == nil || a.Rank < gangRankOf(j, failed)) {
			failed = a.Result
		}
	}
	j.Verdict = VerdictUnchecked
	if failed != nil {
		j.State = JobFailed
		j.setWait(Wait{Code: WaitJobFailed, Text: failed.Reason})
	} else {
		j.State = JobSucceeded
		j.clearWait()
	}
	return finishJob(o, j, info)
}

// gangRankOf is the rank of the member whose result r is.
func gangRankOf(j *Job, r *JobResult) uint64 {
	for _, a := range j.Assignments {
		if a.Result == r {
			return a.Rank
		}
	}
	return 0
}

// gangStepComplete reports whether every current member of gang j has
// committed checkpoint seq.
func gangStepComplete(j *Job, seq uint64) bool {
	if uint64(len(j.Assignments)) < j.Spec.Nodes {
		return false
	}
	for _, a := range j.Assignments {
		if j.checkpointAt(a.Provider, seq) == nil {
			return false
		}
	}
	return true
}

// latestCompleteStep is the latest step after the resume point that every
// current member of gang j has committed, or 0.
func latestCompleteStep(j *Job) uint64 {
	if uint64(len(j.Assignments)) < j.Spec.Nodes {
		return 0
	}
	// A member commits each seq once (they increase), so a step that
	// as many current members as there are committed is complete.
	members := make(map[address.Address]bool, len(j.Assignments))
	for _, a := range j.Assignments {
		members[a.Provider] = true
	}
	count := map[uint64]int{}
	var best uint64
	for _, c := range j.Checkpoints {
		if c.Seq <= j.ResumeSeq || !members[c.Provider] {
			continue
		}
		if count[c.Seq]++; count[c.Seq] == len(members) && c.Seq > best {
			best = c.Seq
		}
	}
	return best
}

// ResumeCheckpointOf is the checkpoint the member of rank rank resumes
// from in the job's current placement, or nil when it starts from the
// beginning. For a job that is not a gang it is ResumeCheckpoint.
func (j *Job) ResumeCheckpointOf(rank uint64) *Checkpoint {
	if !j.Spec.Gang() {
		return j.ResumeCheckpoint()
	}
	if j.ResumeSeq == 0 {
		return nil
	}
	for i := range j.Checkpoints {
		if c := &j.Checkpoints[i]; c.Seq == j.ResumeSeq && c.Rank == rank {
			return c
		}
	}
	return nil
}

// gangCheckpointsKept is how many checkpoints a gang's record keeps: each
// member's latest CheckpointsPerProvider, the step it resumes from and its
// latest complete step.
func gangCheckpointsKept(s *JobSpec) int {
	return max(MaxCheckpointsKept, int(s.Nodes)*(CheckpointsPerProvider+2))
}
