package verifybench

import (
	"io"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// WriteText prints the result as `gpunet bench verify` does.
func (r *Result) WriteText(w io.Writer) error {
	met := measure.Verdict
	p := measure.NewReport(w)
	p.Printf("gpunet bench verify  %s\n", r.Date.Format(time.RFC3339))
	p.Printf("%d providers, %d cheating on %.0f%% of their results; %d of %d spot jobs finished in %d blocks (%d txs, %d refused) in %.0fs\n\n",
		r.Providers, r.Cheaters, 100*r.CheatRate, r.Finished, r.Jobs, r.Blocks, r.Txs, r.TxsFailed, r.ElapsedS)
	p.Printf("extra compute for verification  %.1f%% (%d audit/escalation replicas for %d asked for; %.1f%% for honest providers past 100 jobs)  target <= 10%%: %s\n",
		100*r.ExtraFraction, r.ExtraReplicas, r.RegularReplicas, 100*r.SteadyExtraFraction, met(r.ExtraFraction <= 0.10))
	p.Printf("jobs audited %d, escalated %d, no majority %d\n", r.AuditedJobs, r.EscalatedJobs, r.NoMajorityJobs)
	p.Printf("wrong results committed %d, delivered to owners %d\n", r.CheatedResults, r.WrongDelivered)
	p.Printf("cheaters: %d caught of %d (median %.0f jobs each), first catch at job %.0f (median), %.1f wrong results delivered before it (mean)\n",
		r.CaughtCheaters, r.Cheaters, r.CheaterJobsMedian, r.FirstCatchP50, r.WrongBeforeCatch)
	p.Printf("caught within 1313 jobs: %d of %d observable (%.1f%%); per falsified result caught %.1f%% → derived %.2f%%; analytic bound %.2f%%  target >= 99%%: %s\n",
		r.CaughtWithin, r.CheatersObservable, 100*r.CaughtWithinRate, 100*r.CatchPerCheat, 100*r.DerivedCatchRate, 100*r.AnalyticBound, met(r.DerivedCatchRate >= 0.99))
	p.Printf("honest providers slashed: %d\n", r.HonestSlashed)
	p.Printf("hardware challenge %s for a %d-GOPS claim: proof %.0f ms on this CPU, verification %.2f ms, ratio %.1e  target <= 1e-3: %s\n",
		r.ChallengeSize, r.ChallengeClaimGOPS, r.ChallengeProveMs, r.ChallengeVerifyMs, r.ChallengeRatio, met(r.ChallengeRatio <= 1e-3))
	return p.Err()
}
