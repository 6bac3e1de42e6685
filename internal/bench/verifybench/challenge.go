package verifybench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/hwinfo"
)

// measureChallenge proves one challenge with the CPU prover and verifies
// its opening as a validator does.
func measureChallenge(ctx context.Context, o Options, res *Result) error {
	cp := challenge.DefaultParams()
	cp.TargetMillis = o.ChallengeMillis
	claim := o.ChallengeGOPS
	if claim == 0 {
		// Claim what this machine measures, as an honest agent would:
		// the proof then takes about the plan's compute time.
		fig, err := hwinfo.NewCPUBenchmarker(0).Run(ctx, time.Second)
		if err != nil {
			return err
		}
		claim = max(1, uint64(fig.Int8TOPS*1000))
	}
	res.ChallengeClaimGOPS = claim
	plan, err := challenge.NewPlan(claim, cp)
	if err != nil {
		return err
	}
	ch := challenge.Challenge{Seed: sha256.Sum256([]byte("gpunet-bench/verify/challenge")), Size: plan.Size, Openings: cp.Openings}
	t0 := time.Now()
	cm, err := (&prove.CPU{}).Commit(ctx, ch)
	if err != nil {
		return err
	}
	defer cm.Close()
	res.ChallengeProveMs = float64(time.Since(t0).Microseconds()) / 1e3
	randomness := sha256.Sum256([]byte("gpunet-bench/verify/randomness"))
	op, err := cm.Open(ctx, randomness)
	if err != nil {
		return err
	}
	b, err := op.MarshalBinary()
	if err != nil {
		return err
	}
	var times []float64
	for range 20 {
		t0 := time.Now()
		dec, err := challenge.DecodeOpening(b)
		if err == nil {
			err = ch.Verify(cm.Root(), randomness, dec)
		}
		if err != nil {
			return fmt.Errorf("honest opening rejected: %w", err)
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1e3)
	}
	res.ChallengeSize = plan.Size.String()
	res.ChallengeVerifyMs = measure.Median(times)
	res.ChallengeRatio = res.ChallengeVerifyMs / res.ChallengeProveMs
	return nil
}
