package marketsim

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/bench/statestore"
	"github.com/gpunet/gpunet/internal/ledger"
)

func settleConfig() Config {
	return Config{
		Seed: 1, Providers: 30, Ask: 1_000_000, BlockSeconds: 300, EpochBlocks: 12, JobSeconds: 1800,
		Demand: 1.5, MaxPriceSpread: 5, StepAt: 60, StepFactor: 1.5, Epochs: 120,
		Tune: func(p *ledger.Params) { p.MarketFloor = 500_000 },
	}
}

// TestDemandStepSettles: demand 50% above what the providers can run at
// the ask lifts the index until utilisation is near the target; a further
// +50% step in demand moves it to a new level, which it reaches within a
// bounded number of epochs and overshoots by a bounded amount.
func TestDemandStepSettles(t *testing.T) {
	if testing.Short() {
		t.Skip("a 120-epoch simulation")
	}
	cfg := settleConfig()
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := Analyse(res, cfg.StepAt)
	for _, e := range res.Epochs {
		t.Logf("epoch %3d: index %.3f SYNC/GPU-h, utilisation %5.1f%%, %d jobs", e.Number, float64(e.IndexMicro)/1e12, float64(e.UtilisationPPM)/1e4, e.Submitted)
	}
	t.Logf("before %.3f, after %.3f SYNC/GPU-h; settled in %d epochs (within ±%.0f%%), overshoot %.1f%% of the step; utilisation after %.1f%%; jobs %d, cancelled %d",
		float64(st.Before)/1e12, float64(st.After)/1e12, st.SettleEpochs, SettleBand*100, st.OvershootPct, st.UtilisationAfter/1e4, res.Jobs, res.Cancelled)
	if st.After <= st.Before {
		t.Fatalf("index before the step %d, after %d: demand +50%% should raise it", st.Before, st.After)
	}
	if st.SettleEpochs < 0 || st.SettleEpochs > 30 {
		t.Errorf("settled in %d epochs, want at most 30", st.SettleEpochs)
	}
	if st.OvershootPct > 50 {
		t.Errorf("overshoot %.1f%% of the step, want at most 50%%", st.OvershootPct)
	}
}

// TestEpochEndCost: an epoch's end costs about what any block's end does,
// whatever the number of providers (set GPUNET_MARKETSIM_PROVIDERS for
// the 100k figure of BENCHMARKS.md).
func TestEpochEndCost(t *testing.T) {
	n := 2_000
	if v := os.Getenv("GPUNET_MARKETSIM_PROVIDERS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	e, err := MeasureEpochEnd(n, statestore.Pebble)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d providers, %d classes, Pebble: End() of an epoch's last block %v, of other blocks %v (medians of %d each)", e.Providers, e.Classes, e.Closing, e.Baseline, e.Blocks)
	if e.Classes < 5 {
		t.Fatalf("only %d classes have market records", e.Classes)
	}
	if e.Closing > 20*time.Millisecond+e.Baseline {
		t.Errorf("an epoch's end costs %v over the baseline %v, want at most 20ms", e.Closing-e.Baseline, e.Baseline)
	}
}

// monthConfig is a simulated month (720 one-hour epochs) of 10 one-GPU
// providers at a demand (arrivals as a share of capacity at the ask).
func monthConfig(demand float64) Config {
	return Config{
		Seed: 2, Providers: 10, Ask: 1_000_000, BlockSeconds: 900, EpochBlocks: 4, JobSeconds: 1800,
		Demand: demand, MaxPriceSpread: 5, Epochs: 720,
		Tune: func(p *ledger.Params) { p.MarketFloor = 500_000; p.EmissionTarget = 100_000_000 },
	}
}

// TestRewardsMonth: over a simulated month, rewards per unit of verified
// work at low and at high demand; neither mints more than the cap's share
// of the fees.
func TestRewardsMonth(t *testing.T) {
	if testing.Short() || os.Getenv("GPUNET_MARKETSIM_MONTH") == "" {
		t.Skip("a simulated month: set GPUNET_MARKETSIM_MONTH=1")
	}
	p := ledger.DefaultParams()
	for _, d := range []float64{0.3, 1.5} {
		res, err := Run(monthConfig(d))
		if err != nil {
			t.Fatal(err)
		}
		gpuHours := float64(res.Work) / 3600
		t.Logf("demand %.0f%% of capacity: %d jobs (%d cancelled), %.0f GPU-hours verified, consumers paid %.1f SYNC (+%.2f fees); minted %.3f SYNC = %.1f usync per GPU-hour, %.4f per usync paid",
			d*100, res.Jobs, res.Cancelled, gpuHours, float64(res.Paid)/1e6, float64(res.Fees)/1e6, float64(res.Minted)/1e6, float64(res.Minted)/gpuHours, float64(res.Minted)/float64(max(res.Paid, 1)))
		// The simulation counts the fees of the jobs it saw finish; the
		// ledger's cap counts every fee paid, a little more.
		if res.Minted > res.Fees*p.RewardFeeCapPPM/1_000_000*101/100 {
			t.Errorf("minted %d over the cap's share of the fees %d", res.Minted, res.Fees)
		}
	}
}
