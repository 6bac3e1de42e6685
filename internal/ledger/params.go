package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/gpunet/gpunet/internal/challenge"
)

// Params: the chain's tunable rules, their defaults and their bounds.

// Params are the chain's tunable rules, set at genesis.
type Params struct {
	// MaxTxBytes is the largest tx, in bytes, the ledger accepts.
	MaxTxBytes uint64 `json:"max_tx_bytes"`
	// MinFee is the smallest fee, in usync, a tx must carry.
	MinFee uint64 `json:"min_fee"`
	// MinStakePerGPU is the stake, in usync per GPU, below which a GPU
	// provider is not schedulable.
	MinStakePerGPU uint64 `json:"min_stake_per_gpu"`
	// MinStakeCPU is the stake, in usync, below which a CPU-only provider
	// is not schedulable.
	MinStakeCPU uint64 `json:"min_stake_cpu"`
	// UnbondingBlocks is how long unstaked tokens stay slashable before
	// they return to the balance.
	UnbondingBlocks uint64 `json:"unbonding_blocks"`
	// LivenessWindow is K: a liveness challenge issued in block H must be
	// answered in a block no later than H+K.
	LivenessWindow uint64 `json:"liveness_window"`
	// LivenessMaxMissed misses in a row mark a provider offline.
	LivenessMaxMissed uint64 `json:"liveness_max_missed"`
	// LivenessRatePPM is the share of online providers challenged each
	// block, in parts per million (at least one, at most
	// LivenessMaxPerBlock).
	LivenessRatePPM     uint64 `json:"liveness_rate_ppm"`
	LivenessMaxPerBlock uint64 `json:"liveness_max_per_block"`
	// ProtocolFeeBps is the fee on what a job pays its providers, in basis
	// points, paid by the job's owner to the treasury.
	ProtocolFeeBps uint64 `json:"protocol_fee_bps"`
	// JobGrantTimeout is how long, in seconds of block time, the owner of
	// a placed job has to grant its key.
	JobGrantTimeout uint64 `json:"job_grant_timeout"`
	// JobStartTimeout is how long an assigned provider has, after the
	// grant, to start the job before it is reassigned.
	JobStartTimeout uint64 `json:"job_start_timeout"`
	// JobResultGrace is how long past the job's timeout a provider has to
	// report its result before the job is reassigned.
	JobResultGrace uint64 `json:"job_result_grace"`
	// JobMaxAttempts is how many placements a job gets before it fails.
	JobMaxAttempts uint64 `json:"job_max_attempts"`
	// MaxPlacementsPerBlock bounds the scheduler's work per block.
	MaxPlacementsPerBlock uint64 `json:"max_placements_per_block"`

	// Proof of Sync (verification.go, DESIGN.md section 5).
	//
	// SpotWarmup is how many consecutive validated results in a class a
	// provider needs before its spot jobs are audited at random rather
	// than always; SpotFloorPPM the least audit probability after that.
	SpotWarmup   uint64 `json:"spot_warmup"`
	SpotFloorPPM uint64 `json:"spot_floor_ppm"`
	// MaxReplicas caps escalation: replicas that disagree get company up
	// to this many.
	MaxReplicas uint64 `json:"max_replicas"`
	// RevealTimeout is how long, in seconds of block time, committed
	// replicas have to open their commitments.
	RevealTimeout uint64 `json:"reveal_timeout"`
	// SlashBps is the share of its stake (bonded and unbonding) a provider
	// loses when outvoted or when it fails a hardware challenge;
	// SlashCompensationBps the share of that paid to the harmed job's
	// owner (the rest goes to the treasury).
	SlashBps             uint64 `json:"slash_bps"`
	SlashCompensationBps uint64 `json:"slash_compensation_bps"`
	// Hardware challenges (hwchallenge.go). HWRatePPM of the online
	// providers are drawn each block (at least one, at most
	// HWMaxPerBlock; 0 turns challenges off); each gets a GEMM that takes
	// HWTargetMillis at its claimed throughput, a deadline of that ×
	// HWSlackPermille/1000 + HWAllowanceMillis for its commit, and
	// HWOpenMillis of block time after the randomness to open HWOpenings
	// entries (time, not blocks: an honest agent's opening takes the same
	// whatever the block time).
	HWRatePPM         uint64 `json:"hw_rate_ppm"`
	HWMaxPerBlock     uint64 `json:"hw_max_per_block"`
	HWTargetMillis    uint64 `json:"hw_target_millis"`
	HWSlackPermille   uint64 `json:"hw_slack_permille"`
	HWAllowanceMillis uint64 `json:"hw_allowance_millis"`
	HWOpenings        uint64 `json:"hw_openings"`
	HWOpenMillis      uint64 `json:"hw_open_millis"`
	// What a slow or silent provider risks (docs/challenge.md, "Rulings"):
	// a correct proof committed after the deadline, up to HWLateFactor
	// times the deadline's span after the challenge, is late: it measures
	// the device and is not slashed. A device shown twice in a row to do
	// less than 1/HWOverclaimFactor of its claim is slashed. A challenge
	// with no commit in that window, or no opening in time, is missed:
	// HWMissLimit misses in a row are slashed. After a late or missed
	// ruling the device's next challenge may come after
	// HWRecheckPermille/1000 of its plan's minimum gap.
	HWLateFactor      uint64 `json:"hw_late_factor,omitempty"`
	HWOverclaimFactor uint64 `json:"hw_overclaim_factor,omitempty"`
	HWMissLimit       uint64 `json:"hw_miss_limit,omitempty"`
	HWRecheckPermille uint64 `json:"hw_recheck_permille,omitempty"`

	// The validator set (validators.go, validatorset.go). Voting power is
	// bond / PowerUnit; the MaxValidators largest bonds of at least
	// MinValidatorStake that are not jailed form the set.
	MaxValidators     uint64 `json:"max_validators"`
	MinValidatorStake uint64 `json:"min_validator_stake"`
	PowerUnit         uint64 `json:"power_unit"`
	// Downtime: a validator that missed more than DowntimeMaxMissed of the
	// last DowntimeWindow blocks is jailed for JailBlocks and loses
	// DowntimeSlashPPM of its bond.
	DowntimeWindow    uint64 `json:"downtime_window"`
	DowntimeMaxMissed uint64 `json:"downtime_max_missed"`
	JailBlocks        uint64 `json:"jail_blocks"`
	DowntimeSlashPPM  uint64 `json:"downtime_slash_ppm"`
	// Double signing (CometBFT's evidence): DoubleSignSlashPPM of the bond
	// and of what is unbonding since the offence, and the validator is
	// tombstoned. Evidence more than EvidenceMaxAgeBlocks old is ignored;
	// withdrawn validator stake waits ValidatorUnbondingBlocks, which must
	// be longer, so that stake cannot leave before its evidence can land.
	DoubleSignSlashPPM       uint64 `json:"double_sign_slash_ppm"`
	EvidenceMaxAgeBlocks     uint64 `json:"evidence_max_age_blocks"`
	ValidatorUnbondingBlocks uint64 `json:"validator_unbonding_blocks"`
	// ValidatorFeeSharePPM is the share of each block's tx fees and
	// protocol fees paid from the treasury to the active validators, by
	// power.
	ValidatorFeeSharePPM uint64 `json:"validator_fee_share_ppm"`

	// The market (market.go, DESIGN.md section 6). Every EpochBlocks
	// blocks each hardware class's price index (usync per unit-hour, in
	// [MarketFloor, MarketCeiling]) moves by at most MarketStepPPM toward
	// MarketTargetPPM utilisation, smoothed by an EMA whose newest epoch
	// weighs MarketSmoothingPPM. A job pays max(ask, index × its tier's
	// factor); a spot assignment preempted by a higher tier has
	// PreemptGraceSeconds to checkpoint before it is requeued.
	EpochBlocks         uint64 `json:"epoch_blocks"`
	MarketTargetPPM     uint64 `json:"market_target_ppm"`
	MarketStepPPM       uint64 `json:"market_step_ppm"`
	MarketSmoothingPPM  uint64 `json:"market_smoothing_ppm"`
	MarketFloor         uint64 `json:"market_floor"`
	MarketCeiling       uint64 `json:"market_ceiling"`
	TierSpotPPM         uint64 `json:"tier_spot_ppm"`
	TierOnDemandPPM     uint64 `json:"tier_on_demand_ppm"`
	TierPriorityPPM     uint64 `json:"tier_priority_ppm"`
	PreemptGraceSeconds uint64 `json:"preempt_grace_seconds"`
	// Rewards (rewards.go). Each epoch mints max(0, EmissionTarget − what
	// consumers paid providers), at most RewardFeeCapPPM of the protocol
	// fees paid in it; RewardValidatorPPM of that goes to the validators
	// by power, the rest to providers in proportion to the usync paid for
	// their verified work (rewards.go says why not unit-seconds).
	// FeeBurnPPM of each block's fees is burned, ValidatorFeeSharePPM paid
	// to the validators, and the rest stays in the treasury.
	EmissionTarget     uint64 `json:"emission_target"`
	RewardFeeCapPPM    uint64 `json:"reward_fee_cap_ppm"`
	RewardValidatorPPM uint64 `json:"reward_validator_ppm"`
	FeeBurnPPM         uint64 `json:"fee_burn_ppm"`

	// CheckpointMinInterval is the shortest checkpoint interval, in
	// seconds, a job spec may ask for (checkpoint.go): each checkpoint is
	// a tx and a blob.
	CheckpointMinInterval uint64 `json:"checkpoint_min_interval"`

	// Governance (gov.go, docs/ledger.md). A proposal has GovDepositBlocks
	// to gather its minimum deposit (GovMinDeposit, raised while many
	// proposals are active: gov_deposit.go), its proposer putting down at
	// least GovInitialDepositPPM of it; then GovVotingBlocks of votes. It
	// counts if GovQuorumPPM of the bonded stake voted, is vetoed above
	// GovVetoPPM of veto among the votes, and passes above
	// GovThresholdPPM of yes among yes, no and veto.
	GovDepositBlocks        uint64 `json:"gov_deposit_blocks"`
	GovVotingBlocks         uint64 `json:"gov_voting_blocks"`
	GovMinDeposit           uint64 `json:"gov_min_deposit"`
	GovInitialDepositPPM    uint64 `json:"gov_initial_deposit_ppm"`
	GovQuorumPPM            uint64 `json:"gov_quorum_ppm"`
	GovThresholdPPM         uint64 `json:"gov_threshold_ppm"`
	GovVetoPPM              uint64 `json:"gov_veto_ppm"`
	GovDepositFreeProposals uint64 `json:"gov_deposit_free_proposals"`
	GovDepositRisePPM       uint64 `json:"gov_deposit_rise_ppm"`
	GovDepositMaxMultiplier uint64 `json:"gov_deposit_max_multiplier"`
	GovDepositDecayPPM      uint64 `json:"gov_deposit_decay_ppm"`

	// Services (service.go, docs/ledger.md "Services"). A provider reports
	// on its replicas every ServiceHeartbeatInterval seconds; a replica
	// whose last report is ServiceHeartbeatTimeout old is dropped and
	// placed elsewhere. ServiceBudgetWarning seconds before a service's
	// budget runs out the ledger warns its owner. ServiceMaxFailures
	// replicas given back or never ready, while none was ready for
	// ServiceStableSeconds, fail the service.
	//
	// The state stores a service parameter only when it differs from its
	// default (encodeParams): a chain from before services hashes as it
	// did, and reads the defaults (GetParams).
	ServiceHeartbeatInterval uint64 `json:"service_heartbeat_interval,omitempty"`
	ServiceHeartbeatTimeout  uint64 `json:"service_heartbeat_timeout,omitempty"`
	ServiceBudgetWarning     uint64 `json:"service_budget_warning,omitempty"`
	ServiceMaxFailures       uint64 `json:"service_max_failures,omitempty"`
	ServiceStableSeconds     uint64 `json:"service_stable_seconds,omitempty"`
	// ServiceCheckRatePPM is the share of the OpenAI requests a node
	// answers that it also sends to a replica of another operator, to
	// compare the answers (sampled re-execution, docs/ledger.md "Service
	// disputes"). Nodes read it; the ledger only bounds it. Stored only
	// when not the default.
	ServiceCheckRatePPM uint64 `json:"service_check_rate_ppm,omitempty"`
	// ServiceLogprobTolMinE9 is the least tolerance on log-probabilities
	// (parts per 10^9 of a nat) a service dispute is judged by, whatever
	// the service declares: an owner cannot make the rounding of honest
	// hardware slashable. Stored only when not the default.
	ServiceLogprobTolMinE9 uint64 `json:"service_logprob_tolerance_min_e9,omitempty"`
	// Witnessed service billing (service_serve.go). Time is cut into
	// periods of ServiceServePeriod seconds; a replica is paid for a
	// period once ServiceServeWitnesses distinct validators (at most the
	// size of the active set) attested that they saw it serve. A ready
	// replica that no quorum saw serve over ServiceUnwitnessedPeriods
	// periods in which quorums saw other replicas serve is released and
	// replaced.
	ServiceServePeriod        uint64 `json:"service_serve_period,omitempty"`
	ServiceServeWitnesses     uint64 `json:"service_serve_witnesses,omitempty"`
	ServiceUnwitnessedPeriods uint64 `json:"service_unwitnessed_periods,omitempty"`

	// Delegation (delegation.go, docs/ledger.md "Delegation"). A
	// delegation is at least DelegationMin; a validator's or provider's
	// commission at most CommissionMaxPPM, moved by at most
	// CommissionMaxChangePPM a day; a delegator has at most
	// DelegationMaxEntries unbonding entries per target and redelegation
	// entries per pair of targets. Stored only when they differ from
	// their defaults, like the service parameters.
	DelegationMin          uint64 `json:"delegation_min,omitempty"`
	CommissionMaxPPM       uint64 `json:"commission_max_ppm,omitempty"`
	CommissionMaxChangePPM uint64 `json:"commission_max_change_ppm,omitempty"`
	DelegationMaxEntries   uint64 `json:"delegation_max_entries,omitempty"`
	// TEE attestation (tee.go). Evidence must bind a nonce recorded at
	// most AttestNonceBlocks blocks before; it counts until its
	// collateral's earliest expiry, at most AttestMaxValidity seconds.
	// AttestTDXMinTCBEval is the least Intel TCB evaluation data number a
	// TDX quote's collateral must carry; AttestSNPMinTCB the least
	// reported TCB of an SEV-SNP report, in AMD's TCB_VERSION layout
	// (bootloader, TEE, SNP and microcode SPLs in bytes 0, 1, 6 and 7),
	// each SPL compared on its own. Stored only when not the default.
	AttestNonceBlocks   uint64 `json:"attest_nonce_blocks,omitempty"`
	AttestMaxValidity   uint64 `json:"attest_max_validity,omitempty"`
	AttestTDXMinTCBEval uint64 `json:"attest_tdx_min_tcb_eval,omitempty"`
	AttestSNPMinTCB     uint64 `json:"attest_snp_min_tcb,omitempty"`

	// MaxJudgeFuel is the most fuel a compare job's judge program may
	// have per pair of outputs (CompareSpec.Fuel), and what a spec that
	// names none is given. Stored only when not the default.
	MaxJudgeFuel uint64 `json:"max_judge_fuel,omitempty"`
}

// DefaultParams returns the parameters a new chain starts with.
func DefaultParams() Params {
	return Params{
		MaxTxBytes:          256 << 10,
		MinFee:              1_000,       // 0.001 SYNC a tx: see docs/ledger.md, Parameters
		MinStakePerGPU:      100_000_000, // 100 SYNC
		MinStakeCPU:         10_000_000,  // 10 SYNC
		UnbondingBlocks:     100_800,     // a week of 6 s blocks
		LivenessWindow:      10,
		LivenessMaxMissed:   3,
		LivenessRatePPM:     100_000, // 10% of online providers per block
		LivenessMaxPerBlock: 100,

		ProtocolFeeBps:        100, // 1%
		JobGrantTimeout:       30,  // an honest client grants within a few blocks; a squatter holds a slot no longer (docs/ledger.md, Slots)
		JobStartTimeout:       120,
		JobResultGrace:        120,
		JobMaxAttempts:        3,
		MaxPlacementsPerBlock: 1000,

		SpotWarmup:           10,
		SpotFloorPPM:         70_000, // 7%
		MaxReplicas:          5,
		RevealTimeout:        120,
		SlashBps:             1_000, // 10%
		SlashCompensationBps: 5_000, // half of it

		HWRatePPM:         10_000, // 1% of online providers per block, each at most once per its plan's gap
		HWMaxPerBlock:     10,
		HWTargetMillis:    challenge.DefaultTargetMillis,
		HWSlackPermille:   challenge.DefaultSlackPermille,
		HWAllowanceMillis: challenge.DefaultAllowanceMillis,
		HWOpenings:        challenge.DefaultOpenings,
		HWOpenMillis:      30_000,
		HWLateFactor:      defaultLaterParams.HWLateFactor,
		HWOverclaimFactor: defaultLaterParams.HWOverclaimFactor,
		HWMissLimit:       defaultLaterParams.HWMissLimit,
		HWRecheckPermille: defaultLaterParams.HWRecheckPermille,

		MaxValidators:            100,
		MinValidatorStake:        10_000_000, // 10 SYNC
		PowerUnit:                1_000_000,  // 1 SYNC of bond is one vote
		DowntimeWindow:           10_000,
		DowntimeMaxMissed:        5_000,  // half the window, as the Cosmos SDK's default
		JailBlocks:               100,    // 10 minutes of 6 s blocks
		DowntimeSlashPPM:         10_000, // 1%
		DoubleSignSlashPPM:       50_000, // 5%
		EvidenceMaxAgeBlocks:     100_000,
		ValidatorUnbondingBlocks: 100_800, // a week of 6 s blocks, longer than the evidence window
		ValidatorFeeSharePPM:     200_000, // 20%

		EpochBlocks:         600,         // an hour of 6 s blocks
		MarketTargetPPM:     700_000,     // 70% of offered capacity reserved
		MarketStepPPM:       125_000,     // 12.5% an epoch at most, as EIP-1559's base fee
		MarketSmoothingPPM:  500_000,     // the newest epoch weighs half
		MarketFloor:         1,           // usync per unit-hour: asks set the price until demand lifts it
		MarketCeiling:       100_000_000, // 100 SYNC per unit-hour
		TierSpotPPM:         600_000,
		TierOnDemandPPM:     1_000_000,
		TierPriorityPPM:     1_500_000,
		PreemptGraceSeconds: 120,
		EmissionTarget:      0, // no emissions unless the chain asks for them
		RewardFeeCapPPM:     500_000,
		RewardValidatorPPM:  100_000,
		FeeBurnPPM:          0,

		CheckpointMinInterval: 60,

		// Governance after the Cosmos SDK's x/gov defaults: two days
		// (of 6 s blocks) each to deposit and to vote, quorum 33.4%,
		// threshold 50%, veto 33.4%.
		GovDepositBlocks:        28_800,
		GovVotingBlocks:         28_800,
		GovMinDeposit:           100_000_000, // 100 SYNC
		GovInitialDepositPPM:    250_000,     // a quarter of it at submission
		GovQuorumPPM:            334_000,
		GovThresholdPPM:         500_000,
		GovVetoPPM:              334_000,
		GovDepositFreeProposals: 5,
		GovDepositRisePPM:       200_000, // +20% per proposal past 5 active
		GovDepositMaxMultiplier: 100,
		GovDepositDecayPPM:      2_000, // the rise halves in ~350 blocks (35 minutes)

		ServiceHeartbeatInterval: defaultLaterParams.ServiceHeartbeatInterval,
		ServiceHeartbeatTimeout:  defaultLaterParams.ServiceHeartbeatTimeout,
		ServiceBudgetWarning:     defaultLaterParams.ServiceBudgetWarning,
		ServiceMaxFailures:       defaultLaterParams.ServiceMaxFailures,
		ServiceStableSeconds:     defaultLaterParams.ServiceStableSeconds,
		ServiceCheckRatePPM:      defaultLaterParams.ServiceCheckRatePPM,
		ServiceLogprobTolMinE9:   defaultLaterParams.ServiceLogprobTolMinE9,

		ServiceServePeriod:        defaultLaterParams.ServiceServePeriod,
		ServiceServeWitnesses:     defaultLaterParams.ServiceServeWitnesses,
		ServiceUnwitnessedPeriods: defaultLaterParams.ServiceUnwitnessedPeriods,

		DelegationMin:          defaultLaterParams.DelegationMin,
		CommissionMaxPPM:       defaultLaterParams.CommissionMaxPPM,
		CommissionMaxChangePPM: defaultLaterParams.CommissionMaxChangePPM,
		DelegationMaxEntries:   defaultLaterParams.DelegationMaxEntries,
		AttestNonceBlocks:      defaultLaterParams.AttestNonceBlocks,
		AttestMaxValidity:      defaultLaterParams.AttestMaxValidity,
		AttestTDXMinTCBEval:    defaultLaterParams.AttestTDXMinTCBEval,
		AttestSNPMinTCB:        defaultLaterParams.AttestSNPMinTCB,
		MaxJudgeFuel:           defaultLaterParams.MaxJudgeFuel,
	}
}

// defaultLaterParams holds the defaults of the parameters added after
// chains stored their params (the service parameters, and the rulings of
// slow and silent hardware challenges), which a stored state leaves out
// (encodeParams). They are part of consensus: a chain reads them for every
// state that does not set its own, so they never change.
var defaultLaterParams = Params{
	ServiceHeartbeatInterval: 30,
	ServiceHeartbeatTimeout:  120,  // four missed heartbeats
	ServiceBudgetWarning:     3600, // an hour's notice
	ServiceMaxFailures:       5,
	ServiceStableSeconds:     600,
	// 4%: a check costs one more answer (two on a disagreement), so
	// verification stays within 5% of the work served; a provider wrong
	// on 5% of its answers is caught with 99% probability within 2,300
	// of its requests (docs/ledger.md, "Service disputes").
	ServiceCheckRatePPM: 40_000,
	// 0.01 nats: float rounding on other hardware moves a
	// log-probability by far less (docs/ledger.md, "Service disputes").
	ServiceLogprobTolMinE9: 10_000_000,

	ServiceServePeriod:        30, // a heartbeat interval
	ServiceServeWitnesses:     2,  // one validator alone can neither pay nor starve a replica
	ServiceUnwitnessedPeriods: 10, // five minutes of witnessed periods

	HWLateFactor:      50,  // a commit measures down to about 1/90 of the claim (docs/challenge.md)
	HWOverclaimFactor: 100, // beyond what 10× the cores of outside load makes an honest CPU show (BENCHMARKS.md)
	HWMissLimit:       3,   // three missed challenges in a row
	HWRecheckPermille: 250, // a slow device is checked again after a quarter of its gap

	DelegationMin:          1_000_000,  // 1 SYNC
	CommissionMaxPPM:       500_000,    // half of what the delegators earn
	CommissionMaxChangePPM: 10_000,     // one point a day, as the Cosmos SDK's usual max_change_rate
	DelegationMaxEntries:   7,          // the Cosmos SDK's max_entries
	AttestNonceBlocks:      50,         // five minutes of 6 s blocks to produce and send evidence
	AttestMaxValidity:      7 * 86_400, // a week: the agent renews well before
	// The least minimums (a stored 0 reads as the default): governance
	// raises them as vendors publish TCB recoveries.
	AttestTDXMinTCBEval: 1,
	AttestSNPMinTCB:     1, // bootloader SPL 1
	// Five billion: about 3 s of wasmtime on a busy 2-core machine, some
	// 4,000 times what examples/judges/fsumjudge uses on fsum's outputs
	// (1.2 million), twice what it uses on 8 MiB of float64 and 100,000
	// numbers as text (BenchmarkFsumJudgeFuel), and small enough that the
	// pairs of max_replicas judges fit the commit window
	// (docs/jobspec.md, compare.fuel).
	MaxJudgeFuel: 5_000_000_000,
}

// laterParamFields are the parameters added after chains stored their
// params, each with its default.
func laterParamFields(p *Params) [][2]*uint64 {
	d := &defaultLaterParams
	return [][2]*uint64{
		{&p.ServiceHeartbeatInterval, &d.ServiceHeartbeatInterval},
		{&p.ServiceHeartbeatTimeout, &d.ServiceHeartbeatTimeout},
		{&p.ServiceBudgetWarning, &d.ServiceBudgetWarning},
		{&p.ServiceMaxFailures, &d.ServiceMaxFailures},
		{&p.ServiceStableSeconds, &d.ServiceStableSeconds},
		{&p.ServiceCheckRatePPM, &d.ServiceCheckRatePPM},
		{&p.ServiceLogprobTolMinE9, &d.ServiceLogprobTolMinE9},
		{&p.ServiceServePeriod, &d.ServiceServePeriod},
		{&p.ServiceServeWitnesses, &d.ServiceServeWitnesses},
		{&p.ServiceUnwitnessedPeriods, &d.ServiceUnwitnessedPeriods},
		{&p.HWLateFactor, &d.HWLateFactor},
		{&p.HWOverclaimFactor, &d.HWOverclaimFactor},
		{&p.HWMissLimit, &d.HWMissLimit},
		{&p.HWRecheckPermille, &d.HWRecheckPermille},
		{&p.DelegationMin, &d.DelegationMin},
		{&p.CommissionMaxPPM, &d.CommissionMaxPPM},
		{&p.CommissionMaxChangePPM, &d.CommissionMaxChangePPM},
		{&p.DelegationMaxEntries, &d.DelegationMaxEntries},
		{&p.AttestNonceBlocks, &d.AttestNonceBlocks},
		{&p.AttestMaxValidity, &d.AttestMaxValidity},
		{&p.AttestTDXMinTCBEval, &d.AttestTDXMinTCBEval},
		{&p.AttestSNPMinTCB, &d.AttestSNPMinTCB},
		{&p.MaxJudgeFuel, &d.MaxJudgeFuel},
	}
}

// withLaterDefaults returns p with each unset (0) later parameter at its
// default: what a genesis or a state from before them means.
func (p Params) withLaterDefaults() Params {
	for _, f := range laterParamFields(&p) {
		if *f[0] == 0 {
			*f[0] = *f[1]
		}
	}
	return p
}

// encodeParams is the stored form of p (chain/params): its JSON, without
// the later parameters that are at their defaults.
func encodeParams(p Params) ([]byte, error) {
	for _, f := range laterParamFields(&p) {
		if *f[0] == *f[1] {
			*f[0] = 0
		}
	}
	return json.Marshal(p)
}

// Validate checks that p can run a chain: every parameter within its
// registered bounds (paramreg.go), and the rules that tie parameters
// together.
func (p Params) Validate() error {
	if err := p.checkBounds(); err != nil {
		return err
	}
	if err := p.validateValidatorParams(); err != nil {
		return err
	}
	if err := p.validateMarketParams(); err != nil {
		return err
	}
	if p.ServiceHeartbeatTimeout <= p.ServiceHeartbeatInterval {
		return fmt.Errorf("params.service_heartbeat_timeout %d must be longer than service_heartbeat_interval %d: a replica would be dropped between two reports", p.ServiceHeartbeatTimeout, p.ServiceHeartbeatInterval)
	}
	if err := p.HWParams().Validate(); err != nil {
		return fmt.Errorf("params.hw_*: %w", err)
	}
	return nil
}

// GetParams reads the chain parameters.
func GetParams(kv KV) (Params, error) {
	var p Params
	b := kv.Get(keyParams)
	if b == nil {
		return p, fmt.Errorf("no params in state (was the chain initialised?): %w", ErrInternal)
	}
	if last := lastParams.Load(); last != nil && bytes.Equal(last.raw, b) {
		return last.p, nil
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("corrupt params: %w: %w", err, ErrInternal)
	}
	p = p.withLaterDefaults()
	lastParams.Store(&decodedParams{raw: bytes.Clone(b), p: p})
	return p, nil
}

// lastParams is the last params record GetParams decoded, and what it
// decoded to. Params change only by governance, and decoding them costs
// tens of microseconds: every block and every check read them (issue 36).
// Params holds no references, so each caller gets its own copy.
var lastParams atomic.Pointer[decodedParams]

type decodedParams struct {
	raw []byte
	p   Params
}

// validateValidatorParams checks the rules between the validator set's
// parameters. Power must fit CometBFT's int64 with room to spare: a
// power_unit of at least 1000 (its registered minimum) keeps the total
// under 2^64/1000, below CometBFT's MaxTotalVotingPower (2^63/8).
func (p Params) validateValidatorParams() error {
	switch {
	case p.MinValidatorStake < p.PowerUnit:
		return fmt.Errorf("params.min_validator_stake %d below power_unit %d: a validator needs a power of at least 1", p.MinValidatorStake, p.PowerUnit)
	case p.DowntimeMaxMissed >= p.DowntimeWindow:
		return fmt.Errorf("params.downtime_max_missed %d out of range [1, downtime_window %d)", p.DowntimeMaxMissed, p.DowntimeWindow)
	case p.ValidatorUnbondingBlocks <= p.EvidenceMaxAgeBlocks:
		return fmt.Errorf("params.validator_unbonding_blocks %d must be longer than evidence_max_age_blocks %d: withdrawn stake must stay slashable while evidence against it can still land", p.ValidatorUnbondingBlocks, p.EvidenceMaxAgeBlocks)
	}
	return nil
}
