package challengebench

import (
	"fmt"
	"io"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// WriteText prints the result as `gpunet bench challenge` does.
func (r *Result) WriteText(w io.Writer) error {
	met := measure.Verdict
	p := measure.NewReport(w)
	p.Printf("gpunet bench challenge  %s\n", r.Date.Format(time.RFC3339))
	if len(r.Loads) > 0 {
		p.Printf("this CPU: %d cores, %d GOPS with the agent's %d prover workers; a %s proof is %d ms at that claim\n", r.Cores, r.ClaimOPS, r.Workers, r.Size, r.Compute)
		for _, l := range r.Loads {
			p.Printf("  load %2d per core (%3d busy processes): slowdown median %.2f, max %.2f (proofs %s ms)\n",
				l.PerCore, l.Processes, measure.Median(l.Slowdowns), maxOf(l.Slowdowns), join(l.ProofMs))
		}
	}
	p.Printf("\n%d simulated hours (%d blocks of 6 s) through the ledger, default parameters, real proofs; a challenge is %.1f s busy at the real scale\n",
		r.Hours, r.Blocks, float64(r.RealBusyMs)/1000)
	p.Printf("%-30s %5s %7s %5s %6s %6s %8s %12s %10s  %s\n", "group", "provs", "passed", "late", "missed", "failed", "slashed", "challenges/h", "proving/h", "caught")
	honestSlashes, caught, overclaimers := 0, 0, 0
	for _, g := range r.Groups {
		c := "-"
		if !g.Honest {
			c = fmt.Sprintf("%d of %d at the 1st ruling, all by the %d", g.CaughtFirst, g.Providers, g.CaughtBy)
			if g.Uncaught > 0 {
				c = fmt.Sprintf("%s; %d never", c, g.Uncaught)
			}
			caught += g.CaughtFirst
			overclaimers += g.Providers
		} else {
			honestSlashes += int(g.Rulings.Failed)
		}
		p.Printf("%-30s %5d %7d %5d %6d %6d %8d %12.1f %9.0fs  %s\n", g.Name, g.Providers, g.Rulings.Passed, g.Rulings.Late, g.Rulings.Missed, g.Rulings.Failed, g.Slashed, g.ChallengesPerHour, g.ProvingSPerHour, c)
	}
	p.Printf("\nhonest providers slashed: %d  target 0: %s\n", honestSlashes, met(honestSlashes == 0))
	if overclaimers > 0 {
		rate := float64(caught) / float64(overclaimers)
		p.Printf("overclaimers counted at no more than their real rate after their first ruling: %d of %d (%.0f%%)  target >= 99%%: %s\n", caught, overclaimers, 100*rate, met(rate >= 0.99))
	}
	for _, g := range r.Groups {
		if g.Honest && g.PerCore == 0 {
			p.Printf("an idle honest provider proves %.0f s an hour  target <= 60 s: %s\n", g.ProvingSPerHour, met(g.ProvingSPerHour <= 60))
		}
	}
	p.Printf("took %.0f s\n", r.ElapsedS)
	return p.Err()
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func join(xs []float64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.0f", x)
	}
	return s
}
