package ledger

import (
	"testing"

	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// TestPlannerSpeaksTheLedgersNames: the planner scans the class the index
// files CPU offers under, its codes are the Quote codes, and an offer's
// executor bits are the ones a job's request asks for.
func TestPlannerSpeaksTheLedgersNames(t *testing.T) {
	if sched.CPUClass != CPUClass {
		t.Errorf("sched.CPUClass %q, ledger CPUClass %q", sched.CPUClass, CPUClass)
	}
	for code, want := range map[sched.Code]string{
		sched.NoOffer: "no_offer", sched.OverPrice: "over_price", sched.NoFit: "no_fit",
		sched.TooFew: "too_few", sched.NoEngine: "no_engine", sched.OverMarket: "over_market",
	} {
		if string(code) != want {
			t.Errorf("code %q, want %q: job records and clients carry these strings", code, want)
		}
	}
	for _, e := range knownExecutors {
		p := &Provider{ProviderInfo: ProviderInfo{Executors: []string{e}, Network: true, WasmEngine: "x"}}
		var o sched.Offer
		if err := decodeOffer(classPrefix(CPUClass), providerIndexKey(CPUClass, 1, p.Address), encodeOffer(p, CPUClass), &o); err != nil {
			t.Fatal(err)
		}
		if r := jobRequest(&JobSpec{Executor: e}, DefaultParams(), 1, sched.EngineNeed{}); o.Executors != r.Executor || !o.Network {
			t.Errorf("%s: offer executors %b network %v, request %b", e, o.Executors, o.Network, r.Executor)
		}
	}
}
