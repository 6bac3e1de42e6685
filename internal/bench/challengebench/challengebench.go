// Package challengebench is `gpunet bench challenge`: how hardware
// challenges (docs/challenge.md) treat honest providers on busy machines
// and providers that claim more than they have.
//
// It runs in two parts, both on this machine:
//
//  1. Load. The CPU prover, with the agent's workers (every core but one),
//     proves a challenge sized for this machine's own measured figure,
//     idle and then beside a background load of L busy processes per core
//     for each L of --loads. The ratio of each proof's time to the plan's
//     compute time is that load's slowdown.
//  2. Rulings. Simulated hours through the real ledger (default
//     parameters, time scaled down a thousandfold: a 10-ms target, a 6-ms
//     allowance, 6-ms blocks) with real proofs and real openings. Groups
//     of honest providers each prove as slowly as a slowdown measured at
//     their load (drawn from part 1's proofs, ±10%); groups of
//     overclaimers each do 1/k of their claim on an idle machine. Every
//     ruling is the ledger's own.
//
// It reports, per group, the rulings (passed, late, missed, failed), the
// slashes of honest providers per provider-hour (target 0), when each
// overclaimer was first caught (counted at no more than its real rate:
// target ≥ 99% within the first challenge), and the proving time a
// provider spends an hour at the real scale (target ≤ 60 s for an honest
// one).
package challengebench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"
)

// Defaults.
const (
	DefaultTargetMillis = 2_000
	DefaultReps         = 2
	DefaultHours        = 6
	DefaultPerGroup     = 5
	DefaultSeed         = 26
)

// DefaultLoads are the background loads measured, in busy processes per
// core.
var DefaultLoads = []int{1, 5, 10}

// DefaultOverclaims are the overclaim factors simulated.
var DefaultOverclaims = []int{2, 10}

// Options tune Run.
type Options struct {
	Loads      []int  // busy processes per core, besides idle
	Overclaims []int  // factors k: claim k times the real rate
	Target     uint64 // ms: compute time of the measured proofs at the claim
	Reps       int    // proofs per load
	Hours      int    // simulated hours
	PerGroup   int    // providers per group
	Seed       uint64
	// Slowdowns, when set, replace part 1: for each load (0 first, then
	// Loads in order), the slowdowns to draw from.
	Slowdowns [][]float64
	Progress  io.Writer
}

// Validate checks o.
func (o Options) Validate() error {
	switch {
	case o.Target < 100 || o.Target > 60_000:
		return fmt.Errorf("--target-ms %d: want 100 to 60000", o.Target)
	case o.Reps < 1 || o.Reps > 20:
		return fmt.Errorf("--reps %d: want 1 to 20", o.Reps)
	case o.Hours < 1 || o.Hours > 100:
		return fmt.Errorf("--hours %d: want 1 to 100", o.Hours)
	case o.PerGroup < 1 || o.PerGroup > 50:
		return fmt.Errorf("--per-group %d: want 1 to 50", o.PerGroup)
	case o.Slowdowns != nil && len(o.Slowdowns) != len(o.Loads)+1:
		return fmt.Errorf("slowdowns for %d loads, want %d (idle and each load)", len(o.Slowdowns), len(o.Loads)+1)
	}
	for _, l := range o.Loads {
		if l < 1 || l > 50 {
			return fmt.Errorf("--loads %d: want 1 to 50 busy processes per core", l)
		}
	}
	for _, k := range o.Overclaims {
		if k < 2 || k > 100 {
			return fmt.Errorf("--overclaims %d: want factors from 2 to 100", k)
		}
	}
	return nil
}

// Result is what Run measured.
type Result struct {
	Date     time.Time `json:"date"`
	Cores    int       `json:"cores"`
	Workers  int       `json:"prover_workers"`
	ClaimOPS uint64    `json:"claim_gops"` // this machine's figure, what part 1's plans are sized for
	Size     string    `json:"size"`
	Compute  uint64    `json:"compute_ms"`
	Loads    []Load    `json:"loads"`

	Hours      int     `json:"simulated_hours"`
	Blocks     int     `json:"blocks"`
	Groups     []Group `json:"groups"`
	ElapsedS   float64 `json:"elapsed_s"`
	RealBusyMs uint64  `json:"real_busy_ms"` // a challenge's busy time at the real scale (default params)
}

// Load is one background load's measured proofs.
type Load struct {
	PerCore   int       `json:"per_core"` // busy processes per core (0: idle)
	Processes int       `json:"processes"`
	ProofMs   []float64 `json:"proof_ms"`
	Slowdowns []float64 `json:"slowdowns"` // proof time / plan compute time
}

// Group is one group of simulated providers and the ledger's rulings on
// them.
type Group struct {
	Name      string  `json:"name"`
	Honest    bool    `json:"honest"`
	PerCore   int     `json:"load_per_core,omitempty"`
	Factor    int     `json:"overclaim,omitempty"`
	Providers int     `json:"providers"`
	Rulings   Rulings `json:"rulings"`
	// Slashed counts the providers slashed at least once; SlashesPerHour
	// is slashes per provider-hour.
	Slashed        int     `json:"slashed"`
	SlashesPerHour float64 `json:"slashes_per_provider_hour"`
	// For overclaimers: how many were counted at no more than their real
	// rate after their first ruling, and the latest ruling (1-based) at
	// which one first was; Uncaught the ones never caught.
	CaughtFirst int `json:"caught_at_first_ruling"`
	CaughtBy    int `json:"caught_by_ruling"`
	Uncaught    int `json:"uncaught"`
	// ChallengesPerHour per provider, and the proving time that is an hour
	// at the real scale (a challenge's busy time × its slowdown).
	ChallengesPerHour float64 `json:"challenges_per_provider_hour"`
	ProvingSPerHour   float64 `json:"proving_s_per_hour"`
}

// Rulings counts the ledger's rulings.
type Rulings struct {
	Passed uint64 `json:"passed"`
	Late   uint64 `json:"late"`
	Missed uint64 `json:"missed"`
	Failed uint64 `json:"failed"`
}

// Run measures (part 1, unless o.Slowdowns is set) and simulates (part 2).
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	res := &Result{Date: t0.UTC(), Cores: runtime.NumCPU(), Workers: proverWorkers(), Hours: o.Hours}
	slow := o.Slowdowns
	if slow == nil {
		var err error
		if slow, err = measureLoads(ctx, o, res); err != nil {
			return nil, err
		}
	}
	if err := simulate(ctx, o, slow, res); err != nil {
		return nil, err
	}
	res.ElapsedS = time.Since(t0).Seconds()
	return res, nil
}

// proverWorkers is the agent's: every core but one
// (provider.cpuProverWorkers).
func proverWorkers() int { return max(1, runtime.GOMAXPROCS(0)-1) }

func progressf(o Options, format string, a ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", a...)
	}
}
