package prove

import (
	"crypto/sha256"
	"flag"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/hwinfo"
)

var (
	benchGOPS   = flag.Uint64("challenge.gops", 100, "claimed int8 GOPS the challenge benchmarks size for")
	benchTarget = flag.Uint64("challenge.target", challenge.DefaultTargetMillis, "target compute time in ms at the claim")
)

// benchChallenge is the challenge NewPlan gives for the flags.
func benchChallenge(b *testing.B) (challenge.Challenge, challenge.Plan) {
	p := challenge.DefaultParams()
	p.TargetMillis = *benchTarget
	plan, err := challenge.NewPlan(*benchGOPS, p)
	if err != nil {
		b.Fatal(err)
	}
	return challenge.Challenge{Seed: sha256.Sum256([]byte("bench")), Size: plan.Size, Openings: p.Openings}, plan
}

// BenchmarkChallenge times one challenge end to end on the CPU prover
// (ns/op is Commit: expansion, GEMM, hashing, tree) and then a validator's
// Verify of the full opening, and reports their ratio (DESIGN.md's target
// is ≤ 1/1000) and the prover's throughput.
func BenchmarkChallenge(b *testing.B) {
	ch, plan := benchChallenge(b)
	b.Logf("claim %d GOPS, target %d ms: %s, %.3g ops, deadline %d ms", *benchGOPS, *benchTarget, plan.Size, float64(plan.Size.Ops()), plan.DeadlineMillis)
	var c Commitment
	for b.Loop() {
		if c != nil {
			c.Close()
		}
		var err error
		if c, err = (&CPU{}).Commit(b.Context(), ch); err != nil {
			b.Fatal(err)
		}
	}
	prove := b.Elapsed() / time.Duration(b.N)
	defer c.Close()

	r := sha256.Sum256([]byte("randomness"))
	t0 := time.Now()
	o, err := c.Open(b.Context(), r)
	if err != nil {
		b.Fatal(err)
	}
	open := time.Since(t0)
	enc, _ := o.MarshalBinary()
	verify := timeVerify(b, ch, c.Root(), r, enc)

	b.ReportMetric(float64(plan.Size.Ops())/prove.Seconds()/1e9, "GOPS")
	b.ReportMetric(float64(open.Microseconds()), "open-µs")
	b.ReportMetric(float64(verify.Microseconds()), "verify-µs")
	b.ReportMetric(float64(len(enc)), "opening-B")
	b.ReportMetric(verify.Seconds()/prove.Seconds(), "verify/prove")
}

// timeVerify returns the mean time of decoding and verifying enc, over at
// least 20 runs and half a second.
func timeVerify(b *testing.B, ch challenge.Challenge, root, r [32]byte, enc []byte) time.Duration {
	runs, t0 := 0, time.Now()
	for runs < 20 || time.Since(t0) < 500*time.Millisecond {
		o, err := challenge.DecodeOpening(enc)
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Verify(root, r, o); err != nil {
			b.Fatal(err)
		}
		runs++
	}
	return time.Since(t0) / time.Duration(runs)
}

// BenchmarkVerify is a validator's cost alone: decode and verify one
// opening of the flags' challenge.
func BenchmarkVerify(b *testing.B) {
	ch, _ := benchChallenge(b)
	c, err := (&CPU{}).Commit(b.Context(), ch)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r := sha256.Sum256([]byte("randomness"))
	o, err := c.Open(b.Context(), r)
	if err != nil {
		b.Fatal(err)
	}
	enc, _ := o.MarshalBinary()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		o, err := challenge.DecodeOpening(enc)
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Verify(c.Root(), r, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHonestCPU plays an honest CPU provider: it measures its int8
// throughput with hwinfo's benchmark (the figure it would register), takes
// the challenge NewPlan sizes for that claim, and proves it. ns/op is the
// proof; the metrics compare it with the plan's compute time at the claim
// and with its busy bound (compute × slack), which an honest provider must
// stay under to meet its deadline.
func BenchmarkHonestCPU(b *testing.B) {
	fig, err := hwinfo.NewCPUBenchmarker(0).Run(b.Context(), 2*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	claim := uint64(fig.Int8TOPS * 1000)
	p := challenge.DefaultParams()
	p.TargetMillis = *benchTarget
	plan, err := challenge.NewPlan(claim, p)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("hwinfo claim %d GOPS, target %d ms: %s, compute %d ms, busy bound %d ms, deadline %d ms",
		claim, p.TargetMillis, plan.Size, plan.ComputeMillis, plan.BusyMillis, plan.DeadlineMillis)
	ch := challenge.Challenge{Seed: sha256.Sum256([]byte("honest")), Size: plan.Size, Openings: p.Openings}
	for b.Loop() {
		c, err := (&CPU{}).Commit(b.Context(), ch)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
	prove := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(claim), "claim-GOPS")
	b.ReportMetric(float64(plan.Size.Ops())/prove.Seconds()/1e9, "GOPS")
	b.ReportMetric(float64(prove.Milliseconds())/float64(plan.ComputeMillis), "×compute")
	b.ReportMetric(float64(prove.Milliseconds())/float64(plan.BusyMillis), "×busy-bound")
}

// BenchmarkDeclaredVsAchieved checks that a CPU provider declares what its
// proofs achieve. Each iteration measures hwinfo's CPU figure (a 2-s
// budget, the agent's default) and proves the challenge NewPlan sizes for
// that claim. The metric achieved/declared is the best rate a proof
// achieved over the best figure declared: load from outside only slows
// either, so the best of each is the least disturbed, which a shared
// machine needs. It is about 1 when the benchmark times the kernel the
// prover runs (a little under: the prover also expands A and B and hashes
// C), and above 1 when the benchmark's kernel is slower than the
// prover's.
func BenchmarkDeclaredVsAchieved(b *testing.B) {
	p := challenge.DefaultParams()
	p.TargetMillis = *benchTarget
	var declared, achieved float64
	for b.Loop() {
		fig, err := hwinfo.NewCPUBenchmarker(0).Run(b.Context(), 2*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		gops := fig.Int8TOPS * 1000
		plan, err := challenge.NewPlan(max(uint64(gops), 1), p)
		if err != nil {
			b.Fatal(err)
		}
		ch := challenge.Challenge{Seed: sha256.Sum256([]byte("declared")), Size: plan.Size, Openings: p.Openings}
		t0 := time.Now()
		c, err := (&CPU{}).Commit(b.Context(), ch)
		if err != nil {
			b.Fatal(err)
		}
		dt := time.Since(t0)
		c.Close()
		got := float64(plan.Size.Ops()) / dt.Seconds() / 1e9
		b.Logf("declared %.1f GOPS; the proof of %s achieved %.1f GOPS", gops, plan.Size, got)
		declared, achieved = max(declared, gops), max(achieved, got)
	}
	b.ReportMetric(declared, "declared-GOPS")
	b.ReportMetric(achieved, "achieved-GOPS")
	b.ReportMetric(achieved/declared, "achieved/declared")
}
