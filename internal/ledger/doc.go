// Package ledger is gpunet's state machine: the rules every validator applies
// to every block, deterministically (DESIGN.md section 4).
//
// It imports nothing but the standard library and gpunet's own pure
// packages: no CometBFT, no wall clock, no randomness, no files, no
// goroutines, and it never lets map iteration order reach the state. Time is
// the block's time and the only inputs are the committed state (a KV), the
// block's header fields and its txs. The CometBFT adapter (abciapp) and the
// store live outside.
//
// One block goes through BeginBlock, DeliverTx for each tx, and End, which
// returns the sorted change set and the new app hash; the caller persists
// both atomically. The mempool runs CheckTx against its own overlay of the
// committed state.
//
// # Where things are
//
// The package is laid out one concern per file, the way a Cosmos SDK
// keeper is; a new area (governance, emissions, validators) gets files of
// its own the same way, its handlers routed in router.go, its keys in
// keys.go and its invariants registered in invariants.go.
//
// Applying blocks and txs:
//   - ledger.go: [Ledger], [Block] (BeginBlock, DeliverTx, End), CheckTx,
//     and what runs at the start and the end of every block.
//   - genesis.go: [Ledger.InitGenesis].
//   - ante.go: a tx's envelope: size, chain id, signature, sequence, fee.
//   - router.go: execute, which hands each message to its handler.
//   - tx.go: the tx wire format, message types, [DecodeTx].
//   - errors.go: the error classes and their stable codes.
//
// State:
//   - keys.go: every key prefix, and which keys the app hash covers.
//   - store.go: [KV], [Overlay], [MemKV]; codec.go and records_gen.go: the
//     binary record codec; commitment.go: the lattice hash (the app hash).
//   - invariants.go: [CheckInvariants], which runs the registered
//     invariants, one small function each.
//
// Areas, each with its messages and their handlers (exec*):
//   - accounts.go: balances and transfers (MsgSend).
//   - supply.go: the supply and the treasury.
//   - params.go: [Params] and their defaults; paramreg.go: the parameter
//     registry (each parameter's bounds and largest step per proposal),
//     from which Validate takes the bounds.
//   - gov.go: governance proposals, their records and queries;
//     msg_gov.go: submit a proposal, deposit, vote; gov_deposit.go:
//     deposits and the rising minimum deposit; gov_tally.go: the end of
//     periods, the tally and executing what passed (first thing in every
//     block); gov_weight.go: the voting weight index; gov_running.go: each
//     voting proposal's running tally; gov_invariants.go.
//   - provider.go: the provider registry and the online index;
//     msg_provider.go: register, update, set status and what a declaration
//     may claim; hardware.go and limits.go: the bounds it is held to;
//     gpubind.go: one GPU, one provider.
//   - staking.go: stake, unbonding and slashing.
//   - validators.go: the validator records and their indexes;
//     msg_validator.go: create a validator, bond, unbond, unjail;
//     validator_pop.go: a consensus key's proof of possession;
//     validatorset.go: each block's votes (downtime jailing), evidence
//     (double-sign slashing), fee share and the set returned to CometBFT.
//   - liveness.go: liveness challenges.
//   - hwchallenge.go: hardware challenges.
//   - reputation.go: reputation and the per-class verification records.
//   - spec.go: [JobSpec] and its rules.
//   - jobs.go: the job record, its indexes and the queues.
//   - slots.go: what a placement holds of its provider's slots: tentative
//     until its key is granted, then for real; bumping the ungranted
//     placements a provider's free slots can no longer carry.
//   - msg_jobs.go: submit, grant, start, commit and cancel a job.
//   - scheduler.go: placing queued jobs (applying the planner's plans),
//     and [QuoteJob]; offer.go: the offer index and indexState, the
//     planner's view of it (sched.State); classes.go: the class
//     summaries; engine.go: the one wasm engine the replicas of a
//     compared wasm job run on; service_place.go: placing services'
//     replicas, and [QuoteService]. The planner itself is the package
//     internal/ledger/sched (below).
//   - verification.go: Proof of Sync on results: audits, commit–reveal,
//     MsgRevealResult, and the verdict's apply step (decide, applyVerdict);
//     the tally itself is the subpackage verify.
//   - judgment.go: the judging round of a compare job whose outputs
//     differ: MsgCommitJudgment, MsgRevealJudgment, settling the judges'
//     vectors (verify.TallyJudgments) into the result tally.
//   - handover.go: the job key handed to an audit replica.
//   - settlement.go: escrow, paying a job's providers, finishing a job.
//   - deadlines.go: overdue jobs and reassignment.
//   - data.go: where a job's data is (data_at), URL-pinned inputs, and
//     MsgReleaseJob (a provider hands a job back).
//   - checkpoint.go: checkpoints (MsgCommitCheckpoint), the resume point,
//     paying for kept work on reassignment, applying replicas' checkpoint
//     votes (compareCheckpoints, tallied by verify.TallyCheckpoint).
//   - gang.go: gangs, jobs of several members that start together and
//     fail together (resources.nodes): their rules, MsgGangMember, a
//     member's start, per-member settlement, gang checkpoint steps; their
//     placement is sched's (gang.go there).
//   - market.go: the price index per hardware class and the tiers;
//     market_preempt.go: spot jobs preempted by higher tiers.
//   - rewards.go: each epoch's emission and who gets it (MsgClaimRewards).
//   - delegation.go, msg_delegation.go, delegation_slash.go,
//     delegation_rewards.go, delegation_invariants.go, gov_delegated.go:
//     token holders' delegations to validators and providers (MsgDelegate,
//     MsgUndelegate, MsgRedelegate, MsgSetCommission): pools and shares,
//     unbonding and redelegation entries and their queues, slashes, lazy
//     rewards, delegators' votes.
//   - query.go: read-only pages for the API.
//   - hash.go: [Hash]; arith.go: parts per million and mulDiv.
//
// Where a tx is applied: [Block.DeliverTx] (ledger.go) runs ante (ante.go),
// then execute (router.go), which calls the message's handler in its area's
// file, e.g. execSubmitJob in msg_jobs.go.
//
// Where a job is scheduled: [Block.End] (ledger.go) calls schedule
// (scheduler.go), which walks the queues (jobs.go) and calls place for
// each job. place asks the planner, sched.Place (internal/ledger/sched,
// place.go), which reads the offer index through a small sched.State
// (indexState, offer.go) and returns a sched.Plan: the picks, best first,
// and a sched.Miss (why the others were passed over, and a code). place
// then applies the plan: provider slots, assignments, market reservations,
// events, dequeueing; or, for a miss, the job's wait code and its wait
// (WaitUnplaced with a PlacementMiss, which internal/jobtext renders).
// QuoteJob, placeService and QuoteService call the same planner. sched
// imports nothing of the ledger, so it is tested alone, on an in-memory
// State.
//
// Where a verdict is tallied: internal/ledger/verify, a pure package that
// imports nothing of the ledger. verify.Tally takes each replica's facts
// (revealed? which result?) and the rules (checked, max_replicas, the
// placement budget, a replica just dropped) and returns a verify.Outcome:
// the verdict (validated, unverified, unchecked, no majority, or escalate
// to N+1 replicas), the winners, minority, silent and undecided replicas,
// who is delivered, and the counts the job's reason reports. decide
// (verification.go) builds the facts from the job's assignments, calls it,
// and applyVerdict turns the Outcome into state: payments (settlement.go),
// slashes (staking.go), per-class records (reputation.go), work for
// rewards (rewards.go), the job's verdict, reason and events. Checkpoint
// votes go the same way: verify.TallyCheckpoint, then applyCheckpointTally
// (checkpoint.go).
//
// Where settlement happens: settlement.go. Every payment to a job's
// provider goes through payAssignment, from the escrow or the treasury: a
// verdict's (decide, verification.go), a cancel's (execCancelJob,
// msg_jobs.go) and a held slot's (chargeHold, from deadlines.go and
// handover.go); finishJob refunds the rest of the escrow.
package ledger
