package ledger

import "github.com/gpunet/gpunet/internal/address"

// Why things are as they are, for programs: the ledger records a code and
// the numbers behind it, never a sentence (as Nomad's AllocMetric). A
// sentence in a hashed record would make a reworded message, or another
// rendering of a number, a fork between validators on different versions.
// internal/jobtext renders the sentences; the API serves both. The codes
// are stable: a program may switch on them, and docs/ledger.md ("Waits")
// lists each with what its numbers mean and its sentence.
//
// Text fields hold only what a party supplied (a provider's failure
// reason, an owner's eviction note), bounded where its message is
// validated; they are data, quoted inside our sentence.

// Wait says why a job, a service or a proposal is where it is: what it
// waits for, or why it ended. Which fields a code uses is in its comment;
// the others are zero.
type Wait struct {
	Code string `json:"code"`
	// Count is the number the sentence is about (replicas that reported,
	// revealed or agree; replicas added; placements made; replicas
	// failed); Of what it is out of (replicas).
	Count uint64 `json:"count,omitempty"`
	Of    uint64 `json:"of,omitempty"`
	// Distinct counts distinct results (or checkpoint states); Limit is a
	// bound that applied (max_replicas; service_stable_seconds).
	Distinct uint64 `json:"distinct,omitempty"`
	Limit    uint64 `json:"limit,omitempty"`
	// Slashed counts replicas slashed (for withholding a result or a key).
	Slashed uint64 `json:"slashed,omitempty"`
	// Amount and Needed are usync: paid, held, or reached; and what was
	// needed.
	Amount uint64 `json:"amount,omitempty"`
	Needed uint64 `json:"needed,omitempty"`
	// PPM is a governance threshold that applied (parts per million).
	PPM uint64 `json:"ppm,omitempty"`
	// Height is a block height; At and Warned block times (unix seconds);
	// Seconds a duration.
	Height  uint64 `json:"height,omitempty"`
	At      int64  `json:"at,omitempty"`
	Warned  int64  `json:"warned,omitempty"`
	Seconds uint64 `json:"seconds,omitempty"`
	// Seq is a checkpoint; ResumeSeq, when not 0, the checkpoint the job
	// resumes from and Kept the seconds of run it keeps.
	Seq       uint64 `json:"seq,omitempty"`
	ResumeSeq uint64 `json:"resume_seq,omitempty"`
	Kept      uint64 `json:"kept_seconds,omitempty"`
	// Job is another job (the one that preempted this one); Tier its
	// price tier.
	Job  uint64 `json:"job,omitempty"`
	Tier string `json:"tier,omitempty"`
	// Cause is a second code: why the providers in Providers were
	// replaced (Cause* codes), or why a passed proposal was not executed
	// (NotExecuted* codes).
	Cause     string            `json:"cause,omitempty"`
	Providers []address.Address `json:"providers,omitempty"`
	// Text is what a party supplied, quoted in the sentence: a provider's
	// failure or release reason, a declared wasm engine. Never our words.
	Text string `json:"text,omitempty"`
	// Miss is the scheduler's tally of why it could not place (WaitUnplaced).
	Miss *PlacementMiss `json:"miss,omitempty"`
}

// PlacementMiss is why the scheduler could not place a job's or a
// service's replicas: the offers it looked at and the first need each did
// not meet (the scheduler's verdict), and what it then did.
type PlacementMiss struct {
	// Seen counts the offers within the price it looked at; each of the
	// next counts those that failed on that need first.
	Seen       uint64 `json:"seen"`
	Busy       uint64 `json:"busy,omitempty"`
	Executor   uint64 `json:"executor,omitempty"`
	GPUs       uint64 `json:"gpus,omitempty"`
	VRAM       uint64 `json:"vram,omitempty"`
	ComputeCap uint64 `json:"compute_cap,omitempty"`
	CPU        uint64 `json:"cpu,omitempty"`
	RAM        uint64 `json:"ram,omitempty"`
	Disk       uint64 `json:"disk,omitempty"`
	Region     uint64 `json:"region,omitempty"`
	Network    uint64 `json:"network,omitempty"`
	// TEE counts providers without valid attestation for a trust: tee
	// job (tee.go).
	TEE   uint64 `json:"tee,omitempty" rec:"since=8"`
	Stake uint64 `json:"stake,omitempty"`
	// NVLink counts providers whose GPUs are not linked by NVLink, for a
	// job that asks for it; Sites and Together, for a gang, the sites
	// (regions) the fitting providers are in and the most in one
	// (sched.Miss).
	NVLink   uint64 `json:"nvlink,omitempty" rec:"since=8"`
	Sites    uint64 `json:"sites,omitempty" rec:"since=8"`
	Together uint64 `json:"together,omitempty" rec:"since=8"`
	// CheapestAbove is the cheapest ask above the job's max price in its
	// classes (usync per hour for the job; 0: none); Classes the classes
	// that have offers.
	CheapestAbove uint64 `json:"cheapest_above,omitempty"`
	Classes       uint64 `json:"classes,omitempty"`
	// OtherEngine and NoEngine count offers that fit but run another
	// wasm engine than Pinned (the engine its replicas run) or declare
	// none; Fitting offers fit in all, running Engines engines, no one
	// of which had enough.
	OtherEngine uint64 `json:"other_engine,omitempty"`
	NoEngine    uint64 `json:"no_engine,omitempty"`
	Pinned      string `json:"pinned,omitempty"`
	Fitting     uint64 `json:"fitting,omitempty"`
	Engines     uint64 `json:"engines,omitempty"`
	// OverMarket counts the classes whose market price for the tier is
	// above the max price; MarketPrice the cheapest of those (usync per
	// hour for the job).
	OverMarket  uint64 `json:"over_market,omitempty"`
	MarketPrice uint64 `json:"market_price,omitempty"`
	// Fit counts the providers that fit (distinct, not yet on it); Need
	// the replicas it waits for; Assigned the replicas it already has (an
	// audit, an escalation, a replacement is placed beside them).
	Fit      uint64 `json:"fit"`
	Need     uint64 `json:"need"`
	Assigned uint64 `json:"assigned,omitempty"`
	// Excluded counts, for a service, providers that fit but gave back,
	// dropped or were evicted from one of its replicas.
	Excluded uint64 `json:"excluded,omitempty"`
	// PreemptWait, when not 0, is when the slots of the spot jobs it
	// preempted free; Preempting the spot jobs it preempted just now,
	// whose slots free at PreemptAt.
	PreemptWait int64  `json:"preempt_wait,omitempty"`
	Preempting  uint64 `json:"preempting,omitempty"`
	PreemptAt   int64  `json:"preempt_at,omitempty"`
}

// Job wait codes (Job.Wait.Code). A job that waits for nothing and ended
// plainly (an unvalidated success) has no Wait.
const (
	// WaitQueued: submitted; the scheduler places it at the end of the block.
	WaitQueued = "queued"
	// WaitUnplaced: the scheduler could not place it (Miss); Job.WaitCode
	// says which Quote* case.
	WaitUnplaced = "unplaced"
	// WaitPlaced: placed; the owner grants the job key next.
	WaitPlaced = "placed"
	// WaitExtraPlaced: an extra replica (audit, escalation, replacement)
	// placed; its key comes from the owner or a committed replica's
	// handover. WaitExtraPlacedOwnerKey: only the owner can grant it (no
	// key commitment).
	WaitExtraPlaced         = "extra_placed"
	WaitExtraPlacedOwnerKey = "extra_placed_owner_key"
	// WaitKeyGranted: every replica has its key; the provider starts it
	// next. WaitKeyGrantedExtra: the same for an extra replica.
	WaitKeyGranted      = "key_granted"
	WaitKeyGrantedExtra = "key_granted_extra"
	// WaitHandoverRequested: the new replica posted its handover key and
	// waits for the job key. WaitKeyHandedOver: it got it; it starts next.
	WaitHandoverRequested = "handover_requested"
	WaitKeyHandedOver     = "key_handed_over"
	// WaitExtraRunning: the extra replica started.
	WaitExtraRunning = "extra_running"
	// WaitReported: Count of Of replicas reported a result.
	WaitReported = "reported"
	// WaitAudit: an audit was drawn; another provider re-runs the job.
	WaitAudit = "audit"
	// WaitRevealing: Count of Of replicas opened their committed results.
	WaitRevealing = "revealing"
	// WaitEscalating: the replicas disagree (Distinct results from Of);
	// replica Count of at most Limit is added.
	WaitEscalating = "escalating"
	// WaitJudging: the revealed outputs differ and are judged within the
	// job's tolerance; Count of Of judges committed their judgment in
	// round Seq. WaitJudgingReveal: Count of Of revealed it.
	WaitJudging       = "judging"
	WaitJudgingReveal = "judging_reveal"
	// WaitCheckpointDisagree: the replicas disagree at checkpoint Seq
	// (Distinct states from Of); it restarts with Count replicas, from
	// ResumeSeq if that is not 0 (Kept seconds of run kept).
	WaitCheckpointDisagree = "checkpoint_disagree"
	// WaitPreempted: a Tier job (Job) preempts it on Providers[0]; it
	// may checkpoint until At, then it is requeued.
	WaitPreempted = "preempted"
	// WaitPreemptRequeued: preempted by a higher tier on Providers;
	// requeued (from ResumeSeq if not 0, Kept seconds kept).
	WaitPreemptRequeued = "preempt_requeued"
	// WaitReplacing: Providers were replaced (Cause, Text) while other
	// replicas had committed; another replica is placed (ResumeSeq,
	// Kept as above).
	WaitReplacing = "replacing"
	// WaitRequeued: Providers were replaced (Cause, Text) before any
	// committed; it is placed again (ResumeSeq, Kept).
	WaitRequeued = "requeued"

	// Why a job ended.

	// WaitCancelled: its owner cancelled it.
	WaitCancelled = "cancelled"
	// WaitKeyNotGranted: the owner did not grant the key in time; it
	// paid Amount for the slots its providers held.
	WaitKeyNotGranted = "key_not_granted"
	// WaitGaveUp: Providers were replaced (Cause, Text) once too often:
	// Count placements (ResumeSeq, Kept as above).
	WaitGaveUp = "gave_up"
	// WaitPreemptUnfunded: preempted by a higher tier on Providers, and
	// the owner has Amount of the Needed another run needs in escrow.
	WaitPreemptUnfunded = "preempt_unfunded"
	// WaitBumpUnfunded: its ungranted placement on Providers was bumped
	// (CauseBumped), and the owner has Amount of the Needed another run
	// needs in escrow.
	WaitBumpUnfunded = "bump_unfunded"
	// WaitBadHandover: Providers[0] handed the new replica a key that is
	// not the job's, and was slashed Amount.
	WaitBadHandover = "bad_handover"
	// WaitHandoverWithheld: nobody gave the new replica the key in time;
	// Slashed committed replicas were slashed for withholding it.
	WaitHandoverWithheld = "handover_withheld"
	// WaitNoMajority: no majority among Of replicas (Distinct results);
	// Slashed replicas that did not reveal were slashed.
	WaitNoMajority = "no_majority"
	// WaitLoneResult: the one result revealed (by Count of Of replicas)
	// is not a majority and no further replica could check it; Slashed
	// as above.
	WaitLoneResult = "lone_result"
	// WaitNoneRevealed: none of the Of committed replicas revealed in
	// time (each slashed).
	WaitNoneRevealed = "none_revealed"
	// WaitCheckpointNoMajority: no majority among Of replicas at
	// checkpoint Seq (Distinct states); the rest is refunded.
	WaitCheckpointNoMajority = "checkpoint_no_majority"
	// WaitJobFailed: the delivered result failed; Text is its provider's
	// reason. Count of Of replicas agree when it was validated (Count 0:
	// not validated).
	WaitJobFailed = "job_failed"
	// WaitAgreed: it succeeded validated: Count of Of replicas agree.
	WaitAgreed = "agreed"
)

// Checkpoint note codes (Job.CheckpointWait.Code): the last thing to say
// about a job's checkpoints.
const (
	// CheckpointRefused: Providers[0] could not take checkpoint Seq; Text
	// is its reason.
	CheckpointRefused = "checkpoint_refused"
	// CheckpointFallback: Providers[0] started from checkpoint Seq (0:
	// the beginning) instead of ResumeSeq; Text is its reason.
	CheckpointFallback = "checkpoint_fallback"
	// CheckpointOutvoted: at checkpoint Seq, Providers were outvoted by
	// Count of Of and dropped.
	CheckpointOutvoted = "checkpoint_outvoted"
	// WaitCheckpointDisagree (above) is a checkpoint note too.
)

// Causes: why providers were taken off a job (Wait.Cause of
// WaitReplacing, WaitRequeued, WaitGaveUp and DropNoMoreReplacements).
const (
	CauseNotStarted    = "not_started"    // did not start in time
	CauseNoResult      = "no_result"      // did not report a result in time
	CauseOffline       = "offline"        // went offline
	CauseReleased      = "released"       // handed the job back; Text is its reason
	CauseEngineChanged = "engine_changed" // now runs another wasm engine than Text
	// CauseBumped: its placement there was not granted yet when another
	// placement's grant took the provider's slot (slots.go).
	CauseBumped = "bumped"
)

// Drop codes (Job.Dropped.Code): why a drawn audit or escalation replica
// did not run.
const (
	DropNotPlaced  = "extra_not_placed"  // no provider took it in time
	DropNotGranted = "extra_not_granted" // the owner did not grant it the key in time
	// DropNoMoreReplacements: a replica was to be replaced (Cause, Text,
	// Providers), and the job's placement budget is spent.
	DropNoMoreReplacements = "no_more_replacements"
	// DropNoKey: neither the owner nor a committed replica gave it the
	// key in time.
	DropNoKey = "no_key"
	// DropBumpUnfunded: its placement on Providers was bumped
	// (CauseBumped), and the owner has Amount of the Needed its escrow
	// must hold for another.
	DropBumpUnfunded = "bump_unfunded"
)

// Service wait codes (Service.Wait.Code); also WaitUnplaced.
const (
	// WaitBudgetRanOut: the budget ran out at At; its owner was warned at
	// Warned (0: not).
	WaitBudgetRanOut = "budget_ran_out"
	// WaitStoppedByOwner: its owner stopped it at At.
	WaitStoppedByOwner = "stopped_by_owner"
	// WaitReplicasFailed: Count replicas failed while none stayed ready
	// for Limit seconds; the last ended for Cause (an End* code) with
	// Text and Seconds as its ReplicaEnd.
	WaitReplicasFailed = "replicas_failed"
)

// Replica end codes (ReplicaEnd.Code): why a service replica ended.
const (
	EndReleased = "released"  // its provider gave it back; Text is why
	EndEvicted  = "evicted"   // its owner evicted it; Text is why
	EndDisputed = "disputed"  // its answer was outvoted in a dispute (MsgServiceDispute); it was slashed
	EndNotReady = "not_ready" // not ready within Seconds of its placement
	EndSilent   = "silent"    // its provider stopped reporting
	EndOffline  = "offline"   // its provider went offline
	// EndUnreachable: validators holding more than two thirds of the
	// voting power reported it unreachable (service_down.go): ended as
	// a silent one is, never slashed.
	EndUnreachable = "unreachable"
	// EndUnwitnessed: no quorum of witnesses saw it serve over Seconds
	// of periods in which they did see other replicas serve
	// (service_serve.go): released and replaced, never slashed.
	EndUnwitnessed    = "unwitnessed"
	EndScaledDown     = "scaled_down"     // its owner scaled the service down
	EndServiceStopped = "service_stopped" // the service stopped
	EndServiceFailed  = "service_failed"  // the service failed
	EndTEELapsed      = "tee_lapsed"      // its provider's attestation ended: expired, or its key changed (a trust: tee service)
	// EndLegacy (in WaitReplicasFailed's Cause only): the last replica
	// ended before issue 28, and Text is the sentence its record held
	// (copied, not written: the same bytes on every node).
	EndLegacy = "legacy"
)

// Proposal codes (Proposal.Wait.Code): why it ended as it did. The tally
// is the proposal's own (Proposal.Tally).
const (
	// WaitDepositShort: deposits reached Amount of the Needed usync by
	// Height.
	WaitDepositShort = "deposit_short"
	// WaitNoQuorum: less of the bonded stake voted than PPM.
	WaitNoQuorum = "no_quorum"
	// WaitVetoed: more of the votes were veto than PPM.
	WaitVetoed = "vetoed"
	// WaitAllAbstained: every vote abstained.
	WaitAllAbstained = "all_abstained"
	// WaitPassed: more yes of yes, no and veto than PPM.
	WaitPassed = "passed"
	// WaitRejected: not more yes of yes, no and veto than PPM.
	WaitRejected = "rejected"
	// WaitNotExecuted: it passed but could not be carried out (Cause).
	WaitNotExecuted = "not_executed"
)

// Why a passed proposal was not executed (Wait.Cause of WaitNotExecuted).
const (
	// NotExecutedParams: its parameter changes are not valid against the
	// parameters when it passed (bounds, step, or the whole set).
	NotExecutedParams = "params_invalid"
	// NotExecutedTreasury: the treasury holds Amount, the spend is Needed.
	NotExecutedTreasury = "treasury_short"
	// NotExecutedOverflow: the balance of Providers[0] would overflow.
	NotExecutedOverflow = "balance_overflow"
	// NotExecutedRoots: its roots of trust no longer apply to tee/roots
	// (one to add is trusted already, one to remove is not, or the list
	// would hold more than its limit): another change passed first.
	NotExecutedRoots = "attest_roots_invalid"
)

// Slash codes (SlashEvent.Code): why a provider was slashed, in job Job.
const (
	SlashOutvoted           = "outvoted"            // its result was outvoted by Count of Of replicas
	SlashUnrevealed         = "unrevealed"          // it committed a result and did not reveal it
	SlashBadHandover        = "bad_handover"        // it handed a new replica a key that is not the job's
	SlashWithheldKey        = "withheld_key"        // it did not hand the key to the replica that waited for it
	SlashCheckpointOutvoted = "checkpoint_outvoted" // its checkpoint Seq was outvoted by Count of Of replicas
	SlashHardware           = "hardware_challenge"  // it failed a hardware challenge (Challenges.LastFailure)
	SlashJudgeOutvoted      = "judge_outvoted"      // its judgment of the job's outputs was outvoted by Count of Of judges
	SlashJudgeSilent        = "judge_silent"        // it did not commit or reveal its judgment of the job's outputs
	SlashServiceOutvoted    = "service_outvoted"    // its answer to a request of service Service was outvoted by Count of Of replicas (MsgServiceDispute)
)

// setWait records why j is where it is. A record from before version 6
// may hold a sentence in Reason instead; it goes once a Wait replaces it.
func (j *Job) setWait(w Wait) {
	j.Wait, j.Reason = &w, ""
}

// clearWait records that j waits for nothing to explain.
func (j *Job) clearWait() { j.Wait, j.Reason = nil, "" }

// setCheckpointWait records the last thing to say about j's checkpoints
// (a Checkpoint* code, or WaitCheckpointDisagree). A record from before
// version 6 may hold a sentence in CheckpointNote instead; it goes too.
func (j *Job) setCheckpointWait(w Wait) {
	j.CheckpointWait, j.CheckpointNote = &w, ""
}

// setWait records why s is where it is (see Job.setWait).
func (s *Service) setWait(w *Wait) { s.Wait, s.Reason = w, "" }

// resumeWait is w with where j resumes (keepCheckpointed kept a
// checkpoint: it set ResumeSeq and Progress).
func resumeWait(w Wait, j *Job, kept bool) Wait {
	if kept {
		w.ResumeSeq, w.Kept = j.ResumeSeq, j.Progress
	}
	return w
}
