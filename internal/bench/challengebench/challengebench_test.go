package challengebench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRulingsUnderLoad runs part 2 with slowdowns given, as part 1
// measured them on a shared 2-core machine (BENCHMARKS.md): idle about
// 1.1, one busy process per core about 1.9, five 9 to 11, ten 31 to 66. No honest provider is
// slashed; every 2× and 10× overclaimer counts at no more than its real
// rate after its first ruling.
func TestRulingsUnderLoad(t *testing.T) {
	o := Options{Loads: []int{1, 5, 10}, Overclaims: []int{2, 10}, Target: DefaultTargetMillis, Reps: 1, Hours: 2, PerGroup: 3, Seed: 1,
		Slowdowns: [][]float64{{1.07, 1.08}, {1.8, 1.9}, {9, 11}, {31, 66}}}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range res.Groups {
		n := g.Rulings.Passed + g.Rulings.Late + g.Rulings.Missed + g.Rulings.Failed
		if n == 0 {
			t.Errorf("%s: no rulings in %d hours", g.Name, o.Hours)
		}
		if g.Honest {
			if g.Rulings.Failed != 0 || g.Slashed != 0 {
				t.Errorf("%s: %+v, %d slashed", g.Name, g.Rulings, g.Slashed)
			}
			if g.PerCore == 0 && (g.Rulings.Late != 0 || g.ProvingSPerHour > 60) {
				t.Errorf("%s: %+v, %.0f s an hour proving", g.Name, g.Rulings, g.ProvingSPerHour)
			}
			if g.PerCore >= 5 && g.Rulings.Late == 0 {
				t.Errorf("%s: never late under load: %+v", g.Name, g.Rulings)
			}
			continue
		}
		if g.CaughtFirst != g.Providers || g.Rulings.Passed != 0 || g.Rulings.Failed != 0 {
			t.Errorf("%s: %d of %d caught at the first ruling, rulings %+v", g.Name, g.CaughtFirst, g.Providers, g.Rulings)
		}
	}
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "honest providers slashed: 0") || strings.Contains(out, "FAIL") {
		t.Errorf("report:\n%s", out)
	}
}

// TestFarOverclaimSlashed: a provider 100× over its real rate never
// commits within the late window and is slashed on its third miss in a
// row; the bench sees it.
func TestFarOverclaimSlashed(t *testing.T) {
	o := Options{Overclaims: []int{100}, Target: DefaultTargetMillis, Reps: 1, Hours: 1, PerGroup: 2, Seed: 2, Slowdowns: [][]float64{{1.1}}}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	// 100× takes 110 compute times: past the late window (50 deadlines,
	// 92.5 compute times), so every challenge is missed; the third in a
	// row is slashed.
	g := res.Groups[1]
	if g.Rulings.Failed == 0 || g.Slashed != g.Providers || g.Uncaught != 0 {
		t.Errorf("100× overclaimers: %+v slashed %d uncaught %d", g.Rulings, g.Slashed, g.Uncaught)
	}
}

func TestMeasureLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("proves under a background load")
	}
	o := Options{Loads: []int{1}, Target: 200, Reps: 1, Hours: 1, PerGroup: 1, Seed: 3}
	res := &Result{Cores: 1, Workers: proverWorkers()}
	slow, err := measureLoads(context.Background(), o, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(slow) != 2 || len(res.Loads) != 2 || res.Loads[1].Processes != 1 {
		t.Fatalf("loads %+v", res.Loads)
	}
	for _, s := range slow {
		if s[0] <= 0 {
			t.Fatalf("slowdowns %v", slow)
		}
	}
}
