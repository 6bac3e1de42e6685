package challenge_test

import (
	"errors"
	"testing"

	"github.com/gpunet/gpunet/internal/challenge"
)

func TestNewPlan(t *testing.T) {
	p := challenge.DefaultParams()
	for _, gops := range []uint64{1, 3, 10, 100, 777, 2_000, 20_000, 130_000, 624_000, 1_979_000, 20_000_000, 1 << 62} {
		plan, err := challenge.NewPlan(gops, p)
		if err != nil {
			t.Fatalf("%d GOPS: %v", gops, err)
		}
		s := plan.Size
		if err := s.Validate(); err != nil {
			t.Fatalf("%d GOPS: %v", gops, err)
		}
		target := float64(gops) * float64(p.TargetMillis) * 1e6
		ops := float64(s.Ops())
		switch {
		case target >= challenge.MaxOps:
			if s.Ops() != challenge.MaxOps {
				t.Errorf("%d GOPS: %s is %g ops, want MaxOps", gops, s, ops)
			}
		case ops < 0.8*target || ops > 1.2*target:
			t.Errorf("%d GOPS: %s is %g ops, target %g", gops, s, ops, target)
		}
		if got, want := plan.ComputeMillis, challenge.ComputeMillis(s, gops); got != want {
			t.Errorf("%d GOPS: ComputeMillis %d, want %d", gops, got, want)
		}
		if plan.BusyMillis*1000 < plan.ComputeMillis*p.SlackPermille || (plan.BusyMillis-1)*1000 >= plan.ComputeMillis*p.SlackPermille {
			t.Errorf("%d GOPS: busy %d ms is not ⌈%d ms × %d‰⌉", gops, plan.BusyMillis, plan.ComputeMillis, p.SlackPermille)
		}
		if plan.DeadlineMillis != plan.BusyMillis+p.AllowanceMillis {
			t.Errorf("%d GOPS: deadline %d ms, want busy %d + allowance %d", gops, plan.DeadlineMillis, plan.BusyMillis, p.AllowanceMillis)
		}
		// Challenged once per gap, the provider is busy at most 60 s an hour.
		if plan.BusyMillis*3_600_000 > plan.MinGapMillis*challenge.MaxLoadMillisPerHour {
			t.Errorf("%d GOPS: busy %d ms every %d ms exceeds 60 s/h", gops, plan.BusyMillis, plan.MinGapMillis)
		}
	}

	// The examples in the package documentation.
	got, _ := challenge.NewPlan(100, p)
	want := challenge.Plan{Size: challenge.Size{N: 7936, K: 7936, M: 7936}, ComputeMillis: 9997, BusyMillis: 12497, DeadlineMillis: 18497, MinGapMillis: 749_820}
	if got != want {
		t.Errorf("NewPlan(100 GOPS) = %+v, want %+v", got, want)
	}
	got, _ = challenge.NewPlan(1_979_000, p)
	if want := (challenge.Size{N: challenge.MaxN, K: challenge.MaxK, M: challenge.MaxM}); got.Size != want {
		t.Errorf("NewPlan(H100) size %s, want the maximum %s", got.Size, want)
	}

	for _, bad := range []challenge.Params{
		{TargetMillis: 0, SlackPermille: 1000, Openings: 60},
		{TargetMillis: 1000, SlackPermille: 999, Openings: 60},
		{TargetMillis: 1000, SlackPermille: 1000, Openings: 0},
		{TargetMillis: 1000, SlackPermille: 1000, Openings: challenge.MaxOpenings + 1},
	} {
		if _, err := challenge.NewPlan(100, bad); err == nil {
			t.Errorf("NewPlan accepted %+v", bad)
		}
	}
	if _, err := challenge.NewPlan(0, p); !errors.Is(err, challenge.ErrSize) {
		t.Errorf("NewPlan(0 GOPS) = %v, want ErrSize", err)
	}
}

func TestSizeValidate(t *testing.T) {
	for _, s := range []challenge.Size{
		{N: 0, K: 64, M: 64}, {N: 64, K: 0, M: 64}, {N: 64, K: 64, M: 0},
		{N: 96, K: 64, M: 64}, {N: 64, K: 100, M: 64}, {N: 64, K: 64, M: 65},
		{N: challenge.MaxN + 64, K: 64, M: 64}, {N: 64, K: challenge.MaxK + 64, M: 64}, {N: 64, K: 64, M: challenge.MaxM + 64},
		{N: -64, K: 64, M: 64},
	} {
		if err := s.Validate(); !errors.Is(err, challenge.ErrSize) {
			t.Errorf("%s: %v, want ErrSize", s, err)
		}
		if _, err := challenge.NewGenerator([32]byte{}, s); err == nil {
			t.Errorf("NewGenerator(%s) accepted", s)
		}
	}
	max := challenge.Size{N: challenge.MaxN, K: challenge.MaxK, M: challenge.MaxM}
	if err := max.Validate(); err != nil {
		t.Fatal(err)
	}
	if max.Depth() != challenge.MaxDepth {
		t.Errorf("depth of %s = %d, MaxDepth = %d", max, max.Depth(), challenge.MaxDepth)
	}
	if got := challenge.OpeningBytes(max, challenge.MaxOpenings); got != challenge.MaxOpeningBytes || got > 256<<10 {
		t.Errorf("largest opening %d bytes, MaxOpeningBytes %d, tx limit %d", got, challenge.MaxOpeningBytes, 256<<10)
	}
}

func TestMeasuredGOPS(t *testing.T) {
	s := challenge.Size{N: 7936, K: 7936, M: 7936}
	for _, tt := range []struct{ ms, want uint64 }{
		{0, 0}, {9997, 99}, {9996, 100}, {20_000, 49}, {1 << 62, 1},
	} {
		if got := challenge.MeasuredGOPS(s, tt.ms); got != tt.want {
			t.Errorf("MeasuredGOPS(%s, %d ms) = %d, want %d", s, tt.ms, got, tt.want)
		}
	}
}
