// Package verifybench is the verification simulation (`gpunet bench
// verify`): it runs Proof of Sync's result side through the real ledger
// code: a chain of Providers CPU providers and consumers, Jobs
// deterministic spot jobs submitted BlockJobs a block, and every party
// scripted to do what an agent does (owners grant keys, providers start,
// commit and reveal). A share of the providers (Cheaters) falsify each
// result with probability CheatRate, decided per job by a hash, so
// commit–reveal and audits face the same cheating on every run. Cheaters
// undercut the honest providers' prices (the rational strategy for whoever
// wants to be paid for work it does not do) and take more jobs at once, so
// each does enough jobs to measure how soon it is caught.
//
// Blocks are 10 s of block time apart and every replica meters 10 s, so
// compute is counted in replicas. Measured:
//
//   - extra compute: replicas paid by the treasury (audits, escalations)
//     over the replicas the owners asked for; target ≤ 10 %.
//   - for each cheater, the position among its jobs of the first job in
//     which it was outvoted (caught), and the wrong results delivered to
//     owners before that; target: a provider cheating on 5 % of its jobs
//     is caught within 1,313 of them with probability ≥ 99 %, compared
//     with the analytic bound 1 − (1 − rate × floor)^1313.
//   - honest providers slashed (must be 0) and wrong results delivered.
//   - a hardware challenge proved with the CPU prover and verified as a
//     validator does: verification time over proof time; target ≤ 1/1000.
package verifybench

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// Options tune the simulation. Zero fields take the defaults.
type Options struct {
	Providers int
	Jobs      int
	BlockJobs int
	// Cheaters is the number of cheating providers; CheatRate the share
	// of their results they falsify.
	Cheaters  int
	CheatRate float64
	// CheaterSlots is how many jobs a cheater runs at once (honest
	// providers: 4).
	CheaterSlots uint64
	Seed         uint64
	// ChallengeGOPS is the claim the measured hardware challenge is sized
	// for (0: what this machine measures), at ChallengeMillis of compute.
	ChallengeGOPS   uint64
	ChallengeMillis uint64
	Progress        io.Writer
}

// Defaults of Options.
const (
	DefaultProviders       = 1_000
	DefaultJobs            = 100_000
	DefaultBlockJobs       = 200
	DefaultCheaters        = 50
	DefaultCheatRate       = 0.05
	DefaultCheaterSlots    = 4
	DefaultSeed            = 1
	DefaultChallengeMillis = 2_000

	catchWindow  = 1_313 // DESIGN.md section 5
	chainID      = "gpunet-bench-verify"
	blockSeconds = 10
)

// Validate fills in defaults and checks the rest.
func (o *Options) Validate() error {
	if o.Providers == 0 {
		o.Providers = DefaultProviders
	}
	if o.Jobs == 0 {
		o.Jobs = DefaultJobs
	}
	if o.BlockJobs == 0 {
		o.BlockJobs = DefaultBlockJobs
	}
	if o.Cheaters == 0 {
		o.Cheaters = DefaultCheaters
	}
	if o.CheatRate == 0 {
		o.CheatRate = DefaultCheatRate
	}
	if o.CheaterSlots == 0 {
		o.CheaterSlots = DefaultCheaterSlots
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.ChallengeMillis == 0 {
		o.ChallengeMillis = DefaultChallengeMillis
	}
	switch {
	case o.Providers < 3 || o.Providers > 100_000:
		return fmt.Errorf("providers %d out of range [3, 100000]", o.Providers)
	case o.Jobs < 1 || o.Jobs > 10_000_000:
		return fmt.Errorf("jobs %d out of range [1, 10000000]", o.Jobs)
	case o.BlockJobs < 1 || o.BlockJobs > 100_000:
		return fmt.Errorf("block-jobs %d out of range [1, 100000]", o.BlockJobs)
	case o.Cheaters < 0 || o.Cheaters > o.Providers-3:
		return fmt.Errorf("cheaters %d out of range [0, providers-3]", o.Cheaters)
	case o.CheatRate < 0 || o.CheatRate > 1:
		return fmt.Errorf("cheat-rate %g out of range [0, 1]", o.CheatRate)
	case o.ChallengeMillis > 60_000:
		return fmt.Errorf("challenge-ms %d above 60000", o.ChallengeMillis)
	}
	return nil
}

// Result is what a simulation measured.
type Result struct {
	Date      time.Time `json:"date"`
	Providers int       `json:"providers"`
	Jobs      int       `json:"jobs"`
	Finished  int       `json:"finished"`
	Cheaters  int       `json:"cheaters"`
	CheatRate float64   `json:"cheat_rate"`
	Blocks    int       `json:"blocks"`
	Txs       int       `json:"txs"`
	TxsFailed int       `json:"txs_failed"`
	// GrantsBumped counts key grants that found their job bumped back to
	// its queue by an earlier grant (its placement held its slot only
	// tentatively); not failures of the protocol.
	GrantsBumped int     `json:"grants_bumped"`
	ElapsedS     float64 `json:"elapsed_s"`
	SpotFloorPPM uint64  `json:"spot_floor_ppm"`

	// Compute, in replicas (each meters the same time).
	RegularReplicas uint64  `json:"regular_replicas"`
	ExtraReplicas   uint64  `json:"extra_replicas"`
	ExtraFraction   float64 `json:"extra_fraction"`
	AuditedJobs     int     `json:"audited_jobs"`
	EscalatedJobs   int     `json:"escalated_jobs"`
	NoMajorityJobs  int     `json:"no_majority_jobs"`
	// Extra compute for jobs whose first replica is an honest provider
	// past its first 100 results (warm-up done).
	SteadyExtraFraction float64 `json:"steady_extra_fraction"`

	// Cheating.
	CheatedResults     int     `json:"cheated_results"`   // wrong results committed
	WrongDelivered     int     `json:"wrong_delivered"`   // wrong outputs an owner received
	CheaterJobsMedian  float64 `json:"cheater_jobs_p50"`  // jobs per cheater
	CaughtCheaters     int     `json:"caught_cheaters"`   // outvoted at least once
	CaughtWithin       int     `json:"caught_within"`     // within catchWindow of their jobs
	CheatersObservable int     `json:"cheaters_observed"` // caught, or did ≥ catchWindow jobs
	CaughtWithinRate   float64 `json:"caught_within_rate"`
	FirstCatchP50      float64 `json:"first_catch_p50"`         // position of the first catch
	WrongBeforeCatch   float64 `json:"wrong_before_catch_mean"` // wrong results delivered per cheater before its first catch
	// CatchPerCheat is the share of falsified results that were outvoted;
	// DerivedCatchRate = 1 − (1 − CheatRate × CatchPerCheat)^1313 and
	// AnalyticBound = 1 − (1 − CheatRate × floor)^1313.
	CatchPerCheat    float64 `json:"catch_per_cheat"`
	DerivedCatchRate float64 `json:"derived_catch_rate"`
	AnalyticBound    float64 `json:"analytic_bound"`
	HonestSlashed    int     `json:"honest_slashed"`

	// One hardware challenge, proved on this machine's CPU and verified.
	ChallengeClaimGOPS uint64  `json:"challenge_claim_gops"`
	ChallengeSize      string  `json:"challenge_size"`
	ChallengeProveMs   float64 `json:"challenge_prove_ms"`
	ChallengeVerifyMs  float64 `json:"challenge_verify_ms"`
	ChallengeRatio     float64 `json:"challenge_verify_over_prove"`
}

// Run runs the simulation.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := measure.Progress(o.Progress)
	start := time.Now()
	res := &Result{Date: start.UTC(), Providers: o.Providers, Jobs: o.Jobs, Cheaters: o.Cheaters, CheatRate: o.CheatRate}
	s, err := newSim(o, res)
	if err != nil {
		return nil, err
	}
	defer s.kv.Close()
	if err := s.register(); err != nil {
		return nil, err
	}
	progress("%d providers (%d cheating on %.0f%% of their results), %d spot jobs, %d a block…", o.Providers, o.Cheaters, 100*o.CheatRate, o.Jobs, o.BlockJobs)
	for (s.submitted < o.Jobs || len(s.inflight) > 0) && ctx.Err() == nil {
		// Every job finishes within a few hundred blocks; a run that goes
		// far past that is stuck (txs the ledger refuses), not slow.
		if res.Blocks > 1000+o.Jobs*50 {
			return nil, fmt.Errorf("verify bench stuck after %d blocks: %d of %d jobs submitted, %d finished, %d txs refused", res.Blocks, s.submitted, o.Jobs, res.Finished, res.TxsFailed)
		}
		if err := s.step(); err != nil {
			return nil, err
		}
		if res.Blocks%200 == 0 {
			progress("  block %d: %d submitted, %d finished, %d in flight", res.Blocks, s.submitted, res.Finished, len(s.inflight))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.ElapsedS = time.Since(start).Seconds()
	res.ExtraFraction = float64(res.ExtraReplicas) / float64(max(res.RegularReplicas, 1))
	res.SteadyExtraFraction = float64(s.steadyExtra) / float64(max(s.steadyRegular, 1))
	if err := s.tallyCheaters(); err != nil {
		return nil, err
	}
	res.AnalyticBound = 1 - math.Pow(1-o.CheatRate*float64(s.params.SpotFloorPPM)/1e6, catchWindow)
	progress("  %d blocks, %d txs in %.0fs; measuring a hardware challenge…", res.Blocks, res.Txs, res.ElapsedS)
	if err := measureChallenge(ctx, o, res); err != nil {
		return nil, err
	}
	return res, nil
}
