package ledger

import (
	"fmt"

	"github.com/gpunet/gpunet/internal/challenge"
)

// The parameter registry: every field of Params has one entry here, with
// its bounds and the largest step one governance proposal may move it by.
// Params.Validate takes each field's bounds from here (one source of
// truth); only the rules that tie two parameters together stay in
// Validate. TestEveryParamRegistered fails when a field has no entry.

// ParamSpec describes one parameter.
type ParamSpec struct {
	// Name is the parameter's JSON key in Params (and in GET /v1/params).
	Name string `json:"name"`
	// Kind says what the value counts: blocks, seconds, millis, usync,
	// ppm (parts per million), bps (basis points), permille, bytes or
	// count. Every parameter is a uint64.
	Kind string `json:"kind"`
	// Min and Max bound the value, both included.
	Min uint64 `json:"min"`
	Max uint64 `json:"max"`
	// MaxStep and MaxStepPPM bound one proposal's change of the value:
	// |new − old| ≤ max(MaxStep, old × MaxStepPPM / 10⁶). The absolute
	// part lets a parameter at or near 0 move at all.
	MaxStep    uint64 `json:"max_step_abs"`
	MaxStepPPM uint64 `json:"max_step_ppm"`
	// Desc says what the parameter does, in one line.
	Desc string `json:"description"`

	ptr func(*Params) *uint64 // the field
}

// StepFrom returns the largest change of the value one proposal may make
// when the value is old.
func (s ParamSpec) StepFrom(old uint64) uint64 {
	return max(s.MaxStep, mulDiv(old, s.MaxStepPPM, ppm))
}

// The registry, in the order of Params' fields. Steps: counts and
// durations may halve or double (100% of the value) per proposal; rates
// move by a fixed number of points; amounts by half.
var paramRegistry = []ParamSpec{
	{Name: "max_tx_bytes", ptr: func(p *Params) *uint64 { return &p.MaxTxBytes }, Kind: "bytes", Min: 512, Max: maxBodyLen, MaxStepPPM: 500_000, Desc: "the largest tx the ledger accepts"},
	{Name: "min_fee", ptr: func(p *Params) *uint64 { return &p.MinFee }, Kind: "usync", Min: 0, Max: 1_000_000_000, MaxStep: 10_000, MaxStepPPM: ppm, Desc: "the smallest fee a tx must carry"},
	{Name: "min_stake_per_gpu", ptr: func(p *Params) *uint64 { return &p.MinStakePerGPU }, Kind: "usync", Min: 1, Max: 1e15, MaxStep: 1_000_000, MaxStepPPM: 500_000, Desc: "stake per GPU below which a GPU provider is not schedulable"},
	{Name: "min_stake_cpu", ptr: func(p *Params) *uint64 { return &p.MinStakeCPU }, Kind: "usync", Min: 1, Max: 1e15, MaxStep: 1_000_000, MaxStepPPM: 500_000, Desc: "stake below which a CPU-only provider is not schedulable"},
	{Name: "unbonding_blocks", ptr: func(p *Params) *uint64 { return &p.UnbondingBlocks }, Kind: "blocks", Min: 1, Max: 10_000_000, MaxStep: 100, MaxStepPPM: 500_000, Desc: "how long unstaked provider stake stays slashable before it returns"},
	{Name: "liveness_window", ptr: func(p *Params) *uint64 { return &p.LivenessWindow }, Kind: "blocks", Min: 1, Max: 10_000, MaxStep: 5, MaxStepPPM: ppm, Desc: "blocks a provider has to answer a liveness challenge"},
	{Name: "liveness_max_missed", ptr: func(p *Params) *uint64 { return &p.LivenessMaxMissed }, Kind: "count", Min: 1, Max: 1_000, MaxStep: 2, MaxStepPPM: ppm, Desc: "liveness challenges missed in a row that mark a provider offline"},
	{Name: "liveness_rate_ppm", ptr: func(p *Params) *uint64 { return &p.LivenessRatePPM }, Kind: "ppm", Min: 0, Max: ppm, MaxStep: 100_000, Desc: "share of online providers challenged for liveness each block"},
	{Name: "liveness_max_per_block", ptr: func(p *Params) *uint64 { return &p.LivenessMaxPerBlock }, Kind: "count", Min: 1, Max: 10_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "most liveness challenges issued in one block"},
	{Name: "protocol_fee_bps", ptr: func(p *Params) *uint64 { return &p.ProtocolFeeBps }, Kind: "bps", Min: 0, Max: 5_000, MaxStep: 100, Desc: "fee on what a job pays its providers, paid to the treasury"},
	{Name: "job_grant_timeout", ptr: func(p *Params) *uint64 { return &p.JobGrantTimeout }, Kind: "seconds", Min: 1, Max: 86_400, MaxStep: 30, MaxStepPPM: ppm, Desc: "time the owner of a placed job has to grant its key"},
	{Name: "job_start_timeout", ptr: func(p *Params) *uint64 { return &p.JobStartTimeout }, Kind: "seconds", Min: 1, Max: 86_400, MaxStep: 30, MaxStepPPM: ppm, Desc: "time an assigned provider has, after the grant, to start the job"},
	{Name: "job_result_grace", ptr: func(p *Params) *uint64 { return &p.JobResultGrace }, Kind: "seconds", Min: 1, Max: 86_400, MaxStep: 30, MaxStepPPM: ppm, Desc: "time past a job's timeout a provider has to report its result"},
	{Name: "job_max_attempts", ptr: func(p *Params) *uint64 { return &p.JobMaxAttempts }, Kind: "count", Min: 1, Max: 100, MaxStep: 2, MaxStepPPM: ppm, Desc: "placements a job gets before it fails"},
	{Name: "max_placements_per_block", ptr: func(p *Params) *uint64 { return &p.MaxPlacementsPerBlock }, Kind: "count", Min: 1, Max: 100_000, MaxStep: 100, MaxStepPPM: ppm, Desc: "most jobs the scheduler places in one block"},
	{Name: "spot_warmup", ptr: func(p *Params) *uint64 { return &p.SpotWarmup }, Kind: "count", Min: 0, Max: 1_000_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "validated results in a class before a provider's spot jobs are audited at random"},
	{Name: "spot_floor_ppm", ptr: func(p *Params) *uint64 { return &p.SpotFloorPPM }, Kind: "ppm", Min: 1, Max: ppm, MaxStep: 50_000, Desc: "least audit probability of a spot job"},
	{Name: "max_replicas", ptr: func(p *Params) *uint64 { return &p.MaxReplicas }, Kind: "count", Min: 3, Max: 16, MaxStep: 2, Desc: "most replicas escalation gives a job whose replicas disagree"},
	{Name: "reveal_timeout", ptr: func(p *Params) *uint64 { return &p.RevealTimeout }, Kind: "seconds", Min: 1, Max: 86_400, MaxStep: 30, MaxStepPPM: ppm, Desc: "time committed replicas have to open their commitments"},
	{Name: "slash_bps", ptr: func(p *Params) *uint64 { return &p.SlashBps }, Kind: "bps", Min: 0, Max: 10_000, MaxStep: 500, Desc: "share of its stake a provider loses when outvoted or failing a hardware challenge"},
	{Name: "slash_compensation_bps", ptr: func(p *Params) *uint64 { return &p.SlashCompensationBps }, Kind: "bps", Min: 0, Max: 10_000, MaxStep: 1_000, Desc: "share of a provider's slash paid to the harmed job's owner"},
	{Name: "hw_rate_ppm", ptr: func(p *Params) *uint64 { return &p.HWRatePPM }, Kind: "ppm", Min: 0, Max: ppm, MaxStep: 10_000, Desc: "share of online providers given a hardware challenge each block"},
	{Name: "hw_max_per_block", ptr: func(p *Params) *uint64 { return &p.HWMaxPerBlock }, Kind: "count", Min: 1, Max: 10_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "most hardware challenges issued in one block"},
	{Name: "hw_target_millis", ptr: func(p *Params) *uint64 { return &p.HWTargetMillis }, Kind: "millis", Min: 1, Max: 3_600_000, MaxStep: 1_000, MaxStepPPM: ppm, Desc: "time a hardware challenge takes at the claimed throughput"},
	{Name: "hw_slack_permille", ptr: func(p *Params) *uint64 { return &p.HWSlackPermille }, Kind: "permille", Min: 1_000, Max: 10_000, MaxStep: 250, Desc: "slack on a hardware challenge's deadline (1000 = none)"},
	{Name: "hw_allowance_millis", ptr: func(p *Params) *uint64 { return &p.HWAllowanceMillis }, Kind: "millis", Min: 0, Max: 3_600_000, MaxStep: 2_000, MaxStepPPM: ppm, Desc: "fixed allowance added to a hardware challenge's deadline"},
	{Name: "hw_openings", ptr: func(p *Params) *uint64 { return &p.HWOpenings }, Kind: "count", Min: 1, Max: challenge.MaxOpenings, MaxStep: 10, MaxStepPPM: 500_000, Desc: "entries a challenged provider opens"},
	{Name: "hw_open_millis", ptr: func(p *Params) *uint64 { return &p.HWOpenMillis }, Kind: "millis", Min: 1_000, Max: 3_600_000, MaxStep: 5_000, MaxStepPPM: ppm, Desc: "time after the randomness to open a hardware challenge's entries"},
	{Name: "hw_late_factor", ptr: func(p *Params) *uint64 { return &p.HWLateFactor }, Kind: "count", Min: 1, Max: 1_000, MaxStep: 2, MaxStepPPM: ppm, Desc: "a commit counts up to this many times a hardware challenge's deadline: late, it measures the device and is not slashed"},
	{Name: "hw_overclaim_factor", ptr: func(p *Params) *uint64 { return &p.HWOverclaimFactor }, Kind: "count", Min: 2, Max: 1_000, MaxStep: 2, MaxStepPPM: ppm, Desc: "a device shown twice in a row to do less than its claim divided by this is slashed"},
	{Name: "hw_miss_limit", ptr: func(p *Params) *uint64 { return &p.HWMissLimit }, Kind: "count", Min: 1, Max: 100, MaxStep: 2, MaxStepPPM: ppm, Desc: "hardware challenges missed in a row (no commit, no opening) that are slashed"},
	{Name: "hw_recheck_permille", ptr: func(p *Params) *uint64 { return &p.HWRecheckPermille }, Kind: "permille", Min: 10, Max: 1_000, MaxStep: 250, Desc: "share of a device's minimum gap after which a late or missed device is challenged again"},
	{Name: "max_validators", ptr: func(p *Params) *uint64 { return &p.MaxValidators }, Kind: "count", Min: 1, Max: 1_000, MaxStep: 10, MaxStepPPM: 500_000, Desc: "size of the validator set"},
	{Name: "min_validator_stake", ptr: func(p *Params) *uint64 { return &p.MinValidatorStake }, Kind: "usync", Min: 1, Max: 1e15, MaxStep: 1_000_000, MaxStepPPM: 500_000, Desc: "least bond of a validator in the set"},
	{Name: "power_unit", ptr: func(p *Params) *uint64 { return &p.PowerUnit }, Kind: "usync", Min: 1_000, Max: 1e12, MaxStepPPM: ppm, Desc: "bond per unit of voting power (must keep power within CometBFT's)"},
	{Name: "downtime_window", ptr: func(p *Params) *uint64 { return &p.DowntimeWindow }, Kind: "blocks", Min: 2, Max: 1_000_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "blocks over which a validator's missed blocks count"},
	{Name: "downtime_max_missed", ptr: func(p *Params) *uint64 { return &p.DowntimeMaxMissed }, Kind: "blocks", Min: 1, Max: 999_999, MaxStep: 5, MaxStepPPM: ppm, Desc: "missed blocks in the window above which a validator is jailed"},
	{Name: "jail_blocks", ptr: func(p *Params) *uint64 { return &p.JailBlocks }, Kind: "blocks", Min: 1, Max: 10_000_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "how long a validator jailed for downtime stays out"},
	{Name: "downtime_slash_ppm", ptr: func(p *Params) *uint64 { return &p.DowntimeSlashPPM }, Kind: "ppm", Min: 0, Max: ppm, MaxStep: 10_000, Desc: "share of its bond a validator loses for downtime"},
	{Name: "double_sign_slash_ppm", ptr: func(p *Params) *uint64 { return &p.DoubleSignSlashPPM }, Kind: "ppm", Min: 0, Max: ppm, MaxStep: 50_000, Desc: "share of its bond a validator loses for double signing"},
	{Name: "evidence_max_age_blocks", ptr: func(p *Params) *uint64 { return &p.EvidenceMaxAgeBlocks }, Kind: "blocks", Min: 1, Max: 10_000_000, MaxStep: 10, MaxStepPPM: 500_000, Desc: "age past which evidence of double signing is ignored"},
	{Name: "validator_unbonding_blocks", ptr: func(p *Params) *uint64 { return &p.ValidatorUnbondingBlocks }, Kind: "blocks", Min: 2, Max: 10_000_000, MaxStep: 10, MaxStepPPM: 500_000, Desc: "how long withdrawn validator stake stays slashable (longer than the evidence age)"},
	{Name: "validator_fee_share_ppm", ptr: func(p *Params) *uint64 { return &p.ValidatorFeeSharePPM }, Kind: "ppm", Min: 0, Max: ppm, MaxStep: 100_000, Desc: "share of each block's fees paid to the validators by power"},

	// Helper G's market and rewards (market.go, rewards.go) and helper E's
	// checkpoints (checkpoint.go); their cross-parameter rules (floor ≤
	// ceiling, tier order, fee split) belong in Validate.
	{Name: "epoch_blocks", ptr: func(p *Params) *uint64 { return &p.EpochBlocks }, Kind: "blocks", Min: 1, Max: 1_000_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "blocks per market epoch (price index, rewards)"},
	{Name: "market_target_ppm", ptr: func(p *Params) *uint64 { return &p.MarketTargetPPM }, Kind: "ppm", Min: 10_000, Max: ppm, MaxStep: 100_000, Desc: "utilisation the price index steers toward"},
	{Name: "market_step_ppm", ptr: func(p *Params) *uint64 { return &p.MarketStepPPM }, Kind: "ppm", Min: 0, Max: 500_000, MaxStep: 25_000, Desc: "most the price index moves in one epoch"},
	{Name: "market_smoothing_ppm", ptr: func(p *Params) *uint64 { return &p.MarketSmoothingPPM }, Kind: "ppm", Min: 1, Max: ppm, MaxStep: 100_000, Desc: "weight of the newest epoch in the utilisation average"},
	{Name: "market_floor", ptr: func(p *Params) *uint64 { return &p.MarketFloor }, Kind: "usync", Min: 1, Max: 1e12, MaxStep: 1_000, MaxStepPPM: ppm, Desc: "lowest price index, usync per unit-hour"},
	{Name: "market_ceiling", ptr: func(p *Params) *uint64 { return &p.MarketCeiling }, Kind: "usync", Min: 1, Max: 1e12, MaxStep: 1_000, MaxStepPPM: ppm, Desc: "highest price index, usync per unit-hour"},
	{Name: "tier_spot_ppm", ptr: func(p *Params) *uint64 { return &p.TierSpotPPM }, Kind: "ppm", Min: 1, Max: ppm, MaxStep: 100_000, Desc: "spot tier's factor on the price index"},
	{Name: "tier_on_demand_ppm", ptr: func(p *Params) *uint64 { return &p.TierOnDemandPPM }, Kind: "ppm", Min: 1, Max: 10 * ppm, MaxStep: 100_000, Desc: "on-demand tier's factor on the price index"},
	{Name: "tier_priority_ppm", ptr: func(p *Params) *uint64 { return &p.TierPriorityPPM }, Kind: "ppm", Min: 1, Max: 10 * ppm, MaxStep: 100_000, Desc: "priority tier's factor on the price index"},
	{Name: "preempt_grace_seconds", ptr: func(p *Params) *uint64 { return &p.PreemptGraceSeconds }, Kind: "seconds", Min: 1, Max: 86_400, MaxStep: 30, MaxStepPPM: ppm, Desc: "time a preempted spot job has to checkpoint before it is requeued"},
	{Name: "emission_target", ptr: func(p *Params) *uint64 { return &p.EmissionTarget }, Kind: "usync", Min: 0, Max: 1e15, MaxStep: 10_000_000, MaxStepPPM: 500_000, Desc: "emission per epoch before paid demand reduces it"},
	{Name: "reward_fee_cap_ppm", ptr: func(p *Params) *uint64 { return &p.RewardFeeCapPPM }, Kind: "ppm", Min: 0, Max: 900_000, MaxStep: 100_000, Desc: "emissions never exceed this share of the fees paid in the epoch (below 100%: self-dealing never pays)"},
	{Name: "reward_validator_ppm", ptr: func(p *Params) *uint64 { return &p.RewardValidatorPPM }, Kind: "ppm", Min: 0, Max: ppm, MaxStep: 100_000, Desc: "validators' share of each epoch's emission"},
	{Name: "fee_burn_ppm", ptr: func(p *Params) *uint64 { return &p.FeeBurnPPM }, Kind: "ppm", Min: 0, Max: ppm, MaxStep: 100_000, Desc: "share of each block's fees burned"},
	{Name: "checkpoint_min_interval", ptr: func(p *Params) *uint64 { return &p.CheckpointMinInterval }, Kind: "seconds", Min: 1, Max: 86_400, MaxStep: 30, MaxStepPPM: ppm, Desc: "shortest checkpoint interval a job spec may ask for"},

	{Name: "gov_deposit_blocks", ptr: func(p *Params) *uint64 { return &p.GovDepositBlocks }, Kind: "blocks", Min: 1, Max: 1_000_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "deposit period: blocks a proposal has to reach its minimum deposit"},
	{Name: "gov_voting_blocks", ptr: func(p *Params) *uint64 { return &p.GovVotingBlocks }, Kind: "blocks", Min: 1, Max: 1_000_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "voting period: blocks a proposal is open to votes"},
	{Name: "gov_min_deposit", ptr: func(p *Params) *uint64 { return &p.GovMinDeposit }, Kind: "usync", Min: 1, Max: 1e15, MaxStep: 1_000_000, MaxStepPPM: ppm, Desc: "base minimum deposit for a proposal to enter voting (rises while many proposals are active)"},
	{Name: "gov_initial_deposit_ppm", ptr: func(p *Params) *uint64 { return &p.GovInitialDepositPPM }, Kind: "ppm", Min: 0, Max: ppm, MaxStep: 100_000, Desc: "share of the minimum deposit the proposer must deposit at submission"},
	{Name: "gov_quorum_ppm", ptr: func(p *Params) *uint64 { return &p.GovQuorumPPM }, Kind: "ppm", Min: 10_000, Max: ppm, MaxStep: 100_000, Desc: "share of all bonded stake that must vote for a tally to count"},
	{Name: "gov_threshold_ppm", ptr: func(p *Params) *uint64 { return &p.GovThresholdPPM }, Kind: "ppm", Min: 500_000, Max: ppm, MaxStep: 100_000, Desc: "share of yes among yes, no and veto above which a proposal passes"},
	{Name: "gov_veto_ppm", ptr: func(p *Params) *uint64 { return &p.GovVetoPPM }, Kind: "ppm", Min: 100_000, Max: ppm, MaxStep: 100_000, Desc: "share of veto among all votes above which a proposal is vetoed and its deposit burned"},
	{Name: "gov_deposit_free_proposals", ptr: func(p *Params) *uint64 { return &p.GovDepositFreeProposals }, Kind: "count", Min: 1, Max: 1_000, MaxStep: 5, MaxStepPPM: ppm, Desc: "active proposals below which the minimum deposit does not rise"},
	{Name: "gov_deposit_rise_ppm", ptr: func(p *Params) *uint64 { return &p.GovDepositRisePPM }, Kind: "ppm", Min: 0, Max: ppm, MaxStep: 100_000, Desc: "how much the minimum deposit rises with each proposal submitted past the free count"},
	{Name: "gov_deposit_max_multiplier", ptr: func(p *Params) *uint64 { return &p.GovDepositMaxMultiplier }, Kind: "count", Min: 1, Max: 1_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "the minimum deposit never rises above gov_min_deposit times this"},
	{Name: "gov_deposit_decay_ppm", ptr: func(p *Params) *uint64 { return &p.GovDepositDecayPPM }, Kind: "ppm", Min: 1, Max: ppm, MaxStep: 10_000, Desc: "share of its rise the minimum deposit loses each block while few proposals are active"},

	{Name: "service_heartbeat_interval", ptr: func(p *Params) *uint64 { return &p.ServiceHeartbeatInterval }, Kind: "seconds", Min: 1, Max: 3_600, MaxStep: 10, MaxStepPPM: ppm, Desc: "how often a provider reports on its service replicas (each report pays the ready ones)"},
	{Name: "service_heartbeat_timeout", ptr: func(p *Params) *uint64 { return &p.ServiceHeartbeatTimeout }, Kind: "seconds", Min: 2, Max: 86_400, MaxStep: 30, MaxStepPPM: ppm, Desc: "age of a replica's last report at which it is dropped and placed elsewhere"},
	{Name: "service_budget_warning", ptr: func(p *Params) *uint64 { return &p.ServiceBudgetWarning }, Kind: "seconds", Min: 1, Max: 30 * 86_400, MaxStep: 600, MaxStepPPM: ppm, Desc: "how long before a service's budget runs out its owner is warned"},
	{Name: "service_max_failures", ptr: func(p *Params) *uint64 { return &p.ServiceMaxFailures }, Kind: "count", Min: 1, Max: 1_000, MaxStep: 2, MaxStepPPM: ppm, Desc: "replicas given back or never ready, with none stable, after which a service fails"},
	{Name: "service_stable_seconds", ptr: func(p *Params) *uint64 { return &p.ServiceStableSeconds }, Kind: "seconds", Min: 1, Max: 86_400, MaxStep: 60, MaxStepPPM: ppm, Desc: "how long a replica must stay ready for a service's failure count to start over"},
	{Name: "service_check_rate_ppm", ptr: func(p *Params) *uint64 { return &p.ServiceCheckRatePPM }, Kind: "ppm", Min: 1, Max: ppm, MaxStep: 20_000, MaxStepPPM: ppm, Desc: "share of the OpenAI requests a node also sends to a replica of another operator to compare the answers (sampled re-execution)"},
	{Name: "service_logprob_tolerance_min_e9", ptr: func(p *Params) *uint64 { return &p.ServiceLogprobTolMinE9 }, Kind: "count", Min: 1, Max: MaxLogprobTolE9, MaxStep: 10_000_000, MaxStepPPM: ppm, Desc: "least tolerance on log-probabilities, in parts per 10^9 of a nat, by which a float service's dispute is judged whatever the service declares"},
	{Name: "service_serve_period", ptr: func(p *Params) *uint64 { return &p.ServiceServePeriod }, Kind: "seconds", Min: 2, Max: 3_600, MaxStep: 30, MaxStepPPM: ppm, Desc: "length of a service billing period: a replica is paid for a period that enough witnesses saw it serve"},
	{Name: "service_serve_witnesses", ptr: func(p *Params) *uint64 { return &p.ServiceServeWitnesses }, Kind: "count", Min: 1, Max: maxServeWitnesses, MaxStep: 1, MaxStepPPM: ppm, Desc: "distinct validators that must attest a replica served in a period for it to be paid (never more than the active set)"},
	{Name: "service_unwitnessed_periods", ptr: func(p *Params) *uint64 { return &p.ServiceUnwitnessedPeriods }, Kind: "count", Min: 2, Max: maxUnwitnessedPeriods, MaxStep: 5, MaxStepPPM: ppm, Desc: "witnessed periods without a quorum for a replica after which it is released and replaced (not slashed)"},
	{Name: "delegation_min", ptr: func(p *Params) *uint64 { return &p.DelegationMin }, Kind: "usync", Min: 1, Max: 1e15, MaxStep: 1_000_000, MaxStepPPM: 500_000, Desc: "least amount of a delegation"},
	{Name: "commission_max_ppm", ptr: func(p *Params) *uint64 { return &p.CommissionMaxPPM }, Kind: "ppm", Min: 1, Max: ppm, MaxStep: 100_000, Desc: "highest commission a validator or provider may take of its delegators' rewards"},
	{Name: "commission_max_change_ppm", ptr: func(p *Params) *uint64 { return &p.CommissionMaxChangePPM }, Kind: "ppm", Min: 1, Max: ppm, MaxStep: 10_000, MaxStepPPM: ppm, Desc: "most a commission moves in one change, at most one change a day"},
	{Name: "delegation_max_entries", ptr: func(p *Params) *uint64 { return &p.DelegationMaxEntries }, Kind: "count", Min: 1, Max: 100, MaxStep: 2, MaxStepPPM: ppm, Desc: "most unbonding entries per delegator and target, and redelegation entries per pair of targets"},
	{Name: "attest_nonce_blocks", ptr: func(p *Params) *uint64 { return &p.AttestNonceBlocks }, Kind: "blocks", Min: 1, Max: 10_000, MaxStep: 10, MaxStepPPM: ppm, Desc: "blocks an attestation nonce stays valid for evidence over it"},
	{Name: "attest_max_validity", ptr: func(p *Params) *uint64 { return &p.AttestMaxValidity }, Kind: "seconds", Min: 600, Max: 90 * 86_400, MaxStep: 3_600, MaxStepPPM: ppm, Desc: "longest a provider's accepted TEE evidence counts"},
	{Name: "attest_tdx_min_tcb_eval", ptr: func(p *Params) *uint64 { return &p.AttestTDXMinTCBEval }, Kind: "count", Min: 1, Max: 1_000_000, MaxStep: 100, MaxStepPPM: ppm, Desc: "least Intel TCB evaluation data number of a TDX quote's collateral"},
	{Name: "attest_snp_min_tcb", ptr: func(p *Params) *uint64 { return &p.AttestSNPMinTCB }, Kind: "count", Min: 1, Max: 1<<64 - 1, MaxStep: 1<<64 - 1, Desc: "least reported TCB of an SEV-SNP report (AMD TCB_VERSION: SPLs in bytes 0, 1, 6, 7)"},
	{Name: "max_judge_fuel", ptr: func(p *Params) *uint64 { return &p.MaxJudgeFuel }, Kind: "count", Min: 10_000_000, Max: MaxJudgeFuelLimit, MaxStep: 10_000_000, MaxStepPPM: ppm, Desc: "most fuel (WebAssembly operators) a compare job's judge program may use per pair of outputs, and what a spec naming none gets"},
}

// ParamRegistry returns every parameter's spec, in the order of Params'
// fields.
func ParamRegistry() []ParamSpec { return append([]ParamSpec(nil), paramRegistry...) }

// LookupParam returns the spec of the parameter named name.
func LookupParam(name string) (ParamSpec, bool) {
	for _, s := range paramRegistry {
		if s.Name == name {
			return s, true
		}
	}
	return ParamSpec{}, false
}

// Get returns the value of the parameter named name.
func (p Params) Get(name string) (uint64, bool) {
	s, ok := LookupParam(name)
	if !ok {
		return 0, false
	}
	return *s.ptr(&p), true
}

// checkBounds checks every parameter against its registered bounds.
func (p Params) checkBounds() error {
	for _, s := range paramRegistry {
		if v := *s.ptr(&p); v < s.Min || v > s.Max {
			return fmt.Errorf("params.%s %d out of range [%d, %d] (%s)", s.Name, v, s.Min, s.Max, s.Desc)
		}
	}
	return nil
}

// ParamChange sets one parameter, by its JSON key.
type ParamChange struct {
	Key   string `json:"key"`
	Value uint64 `json:"value"`
}

// maxParamChanges bounds the changes of one proposal.
const maxParamChanges = 16

// ApplyParamChanges returns p with changes applied, or an error wrapping
// ErrInvalidMsg that names the first change refused: an unknown key, a key
// set twice, a value out of its bounds, a step larger than one proposal
// may make from p's value, or a result that breaks a rule tying two
// parameters together (Validate).
func ApplyParamChanges(p Params, changes []ParamChange) (Params, error) {
	if len(changes) == 0 || len(changes) > maxParamChanges {
		return p, invalid("a parameter proposal sets 1 to %d parameters, not %d", maxParamChanges, len(changes))
	}
	seen := map[string]bool{}
	for _, c := range changes {
		s, ok := LookupParam(c.Key)
		if !ok {
			return p, invalid("no parameter %q (see `gpunet query params`)", c.Key)
		}
		if seen[c.Key] {
			return p, invalid("parameter %s is set twice", c.Key)
		}
		seen[c.Key] = true
		if c.Value < s.Min || c.Value > s.Max {
			return p, invalid("%s=%d is out of bounds: %s must be in [%d, %d]", c.Key, c.Value, c.Key, s.Min, s.Max)
		}
		old := *s.ptr(&p)
		step := max(c.Value, old) - min(c.Value, old)
		if lim := s.StepFrom(old); step > lim {
			return p, invalid("%s=%d moves %s from %d by %d, more than one proposal may (at most %d from %d: %s)",
				c.Key, c.Value, c.Key, old, step, lim, old, stepRule(s))
		}
		*s.ptr(&p) = c.Value
	}
	if err := p.Validate(); err != nil {
		return p, invalid("the parameters would not be valid: %v", err)
	}
	return p, nil
}

// stepRule says a spec's step rule in words.
func stepRule(s ParamSpec) string {
	switch {
	case s.MaxStepPPM == 0:
		return fmt.Sprintf("a step of at most %d", s.MaxStep)
	case s.MaxStep == 0:
		return fmt.Sprintf("a step of at most %s of the value", ppmPercent(s.MaxStepPPM))
	}
	return fmt.Sprintf("a step of at most %s of the value or %d, whichever is larger", ppmPercent(s.MaxStepPPM), s.MaxStep)
}

func ppmPercent(v uint64) string {
	if v%10_000 == 0 {
		return fmt.Sprintf("%d%%", v/10_000)
	}
	return fmt.Sprintf("%d.%04d%%", v/10_000, v%10_000)
}
