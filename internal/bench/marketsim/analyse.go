package marketsim

// SettleBand is how close to its new level the index must stay to count
// as settled: ±5%.
const SettleBand = 0.05

// Settling is what a demand step did to the index.
type Settling struct {
	// Before and After are the index's mean over the 10 epochs before the
	// step and over the last 10 epochs (micro-usync per unit-hour).
	Before, After uint64
	// SettleEpochs is how many epochs after the step the index entered,
	// and then stayed in, After ± SettleBand (−1: never).
	SettleEpochs int
	// OvershootPct is how far the index went past After, as a percentage
	// of the step After − Before (0 if it never did).
	OvershootPct float64
	// UtilisationAfter is the mean utilisation of the last 10 epochs, ppm.
	UtilisationAfter float64
}

// Analyse measures the step at epoch stepAt of res.
func Analyse(res *Result, stepAt int) Settling {
	mean := func(from, to int, f func(Epoch) float64) float64 {
		var sum float64
		for _, e := range res.Epochs[from:to] {
			sum += f(e)
		}
		return sum / float64(to-from)
	}
	idx := func(e Epoch) float64 { return float64(e.IndexMicro) }
	n := len(res.Epochs)
	st := Settling{Before: uint64(mean(stepAt-10, stepAt, idx)), After: uint64(mean(n-10, n, idx)), SettleEpochs: -1}
	st.UtilisationAfter = mean(n-10, n, func(e Epoch) float64 { return float64(e.UtilisationPPM) })
	after := float64(st.After)
	for i := stepAt; i < n; i++ {
		inside := true
		for _, e := range res.Epochs[i:] {
			if v := idx(e); v < after*(1-SettleBand) || v > after*(1+SettleBand) {
				inside = false
				break
			}
		}
		if inside {
			st.SettleEpochs = i - stepAt
			break
		}
	}
	var peak float64
	for _, e := range res.Epochs[stepAt:] {
		peak = max(peak, idx(e))
	}
	if step := after - float64(st.Before); step > 0 && peak > after {
		st.OvershootPct = (peak - after) / step * 100
	}
	return st
}
