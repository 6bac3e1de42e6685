package gpu

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/hwinfo"
)

// DeviceReport is what `gpunet bench gpu` measures on one GPU.
type DeviceReport struct {
	Device  string         `json:"device"`
	Figures hwinfo.Figures `json:"figures"`
	// Honest is a challenge sized for the measured figure; Overclaim one
	// sized for OverclaimFactor times it, which the device should miss.
	Honest    *ChallengeRun `json:"honest,omitempty"`
	Overclaim *ChallengeRun `json:"overclaim,omitempty"`
}

// ChallengeRun is one hardware challenge proved on the device as a
// provider would: commit, open, and the validators' check.
type ChallengeRun struct {
	ClaimedGOPS uint64 `json:"claimed_gops"`
	Size        string `json:"size"`
	Kernel      string `json:"kernel"`
	CommitMs    int64  `json:"commit_ms"`
	OpenMs      int64  `json:"open_ms"`
	VerifyMs    int64  `json:"verify_ms"` // challenge.Verify on the CPU, one core
	// BusyBudgetMs is the compute budget at the claim (compute × slack)
	// and DeadlineMs the commit deadline after the challenge's block
	// (budget + allowance for two blocks).
	BusyBudgetMs uint64 `json:"busy_budget_ms"`
	DeadlineMs   uint64 `json:"deadline_ms"`
	// InTime is CommitMs ≤ DeadlineMs less one block time (6 s): the commit
	// would have landed in a block before the deadline.
	InTime bool `json:"in_time"`
	// LoadSecondsPerHour is the device time challenges take an hour at
	// the ledger's maximum rate (one per MinGap).
	LoadSecondsPerHour float64 `json:"load_seconds_per_hour"`
	Verified           bool    `json:"verified"`
	Error              string  `json:"error,omitempty"`
}

// ReportOptions configure Report.
type ReportOptions struct {
	Budget          time.Duration // benchmark time; 0 is 10 s
	OverclaimFactor float64       // 0 skips the overclaim run
	Params          challenge.Params
}

// Report benchmarks dev, then proves a challenge sized for what it
// measured and, if asked, one for an overclaim.
func Report(ctx context.Context, dev Backend, o ReportOptions) (*DeviceReport, error) {
	if o.Budget <= 0 {
		o.Budget = 10 * time.Second
	}
	if o.Params == (challenge.Params{}) {
		o.Params = challenge.DefaultParams()
	}
	r := &DeviceReport{Device: dev.Describe()}
	fig, err := (&Benchmarker{Dev: dev}).Run(ctx, o.Budget)
	r.Figures = fig
	if err != nil {
		return r, err
	}
	claim := uint64(fig.Int8TOPS * 1000)
	r.Honest = proveOnce(ctx, dev, fig.Kernel, claim, o.Params)
	if o.OverclaimFactor > 1 {
		r.Overclaim = proveOnce(ctx, dev, fig.Kernel, uint64(float64(claim)*o.OverclaimFactor), o.Params)
	}
	return r, nil
}

func proveOnce(ctx context.Context, dev Backend, kernel string, claim uint64, p challenge.Params) *ChallengeRun {
	run := &ChallengeRun{ClaimedGOPS: claim, Kernel: kernel}
	plan, err := challenge.NewPlan(claim, p)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	run.Size, run.BusyBudgetMs, run.DeadlineMs = plan.Size.String(), plan.BusyMillis, plan.DeadlineMillis
	ch := challenge.Challenge{Size: plan.Size, Openings: p.Openings}
	rand.Read(ch.Seed[:])
	t0 := time.Now()
	cm, err := (&Prover{Dev: dev, Kernel: kernel}).Commit(ctx, ch)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	defer cm.Close()
	run.CommitMs = time.Since(t0).Milliseconds()
	run.InTime = uint64(run.CommitMs)+6000 <= plan.DeadlineMillis
	var rnd [32]byte
	rand.Read(rnd[:])
	t1 := time.Now()
	op, err := cm.Open(ctx, rnd)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	run.OpenMs = time.Since(t1).Milliseconds()
	t2 := time.Now()
	if err := ch.Verify(cm.Root(), rnd, op); err != nil {
		run.Error = "the validators' check failed: " + err.Error()
		return run
	}
	run.VerifyMs = time.Since(t2).Milliseconds()
	run.Verified = true
	run.LoadSecondsPerHour = float64(run.CommitMs+run.OpenMs) / 1000 * 3600_000 / float64(plan.MinGapMillis)
	return run
}

// String is a one-line summary.
func (c *ChallengeRun) String() string {
	if c.Error != "" {
		return fmt.Sprintf("claim %d GOPS: %s", c.ClaimedGOPS, c.Error)
	}
	verdict := "in time"
	if !c.InTime {
		verdict = "LATE: fails"
	}
	return fmt.Sprintf("claim %d GOPS, %s: commit %.1f s (budget %.1f s, deadline %.1f s: %s), open %d ms, verify %d ms, %.0f s an hour",
		c.ClaimedGOPS, c.Size, float64(c.CommitMs)/1000, float64(c.BusyBudgetMs)/1000, float64(c.DeadlineMs)/1000, verdict, c.OpenMs, c.VerifyMs, c.LoadSecondsPerHour)
}
