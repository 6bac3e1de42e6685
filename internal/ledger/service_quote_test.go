package ledger_test

import (
	"errors"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestQuoteService: a quote names the providers placement would take, at
// the prices they would get, what the replicas cost an hour with the fee
// and how long a budget lasts; a price below every ask says why it would
// wait and the cheapest ask; a bad spec is refused as deploy refuses it.
func TestQuoteService(t *testing.T) {
	c := serviceChain(t)
	spec := lt.ServiceSpec("tinylm", 200_000)
	spec.Replicas = 2
	q, err := ledger.QuoteService(c.KV, &spec, 3_600_000)
	if err != nil {
		t.Fatal(err)
	}
	// The providers ask 36,000, 72,000 and 108,000 a core-hour: the
	// replicas (half a core, priced as one unit) would go to the two
	// cheapest.
	prices := uint64(36_000 + 72_000)
	if q.Matching != 3 || q.Replicas != 2 || q.PricePerHour != 72_000 || q.Reason != "" || q.Code != "" {
		t.Fatalf("quote %+v, want 3 matching, 2 replicas, dearest 72000, no reason", q)
	}
	if want := prices + fee(prices); q.RatePerHour != want {
		t.Errorf("rate %d, want %d (prices + fee)", q.RatePerHour, want)
	}
	if want := uint64(3_600_000) * 3600 / q.RatePerHour; q.LastsSeconds != want {
		t.Errorf("lasts %d s, want %d", q.LastsSeconds, want)
	}
	if cost := uint64(200_000 * 2 / 60); q.MinBudget != cost+fee(cost) {
		t.Errorf("least budget %d, want a minute of 2 replicas at max price with the fee, %d", q.MinBudget, cost+fee(cost))
	}
	if len(q.Best) != 3 || q.Best[0].Provider != prov1.Addr || q.Best[1].Provider != prov2.Addr {
		t.Errorf("best %+v, want prov1, prov2, prov3", q.Best)
	}
	// Deploying it places its replicas where and at what the quote said.
	must(t, []ledger.TxResult{deploy(t, c, spec, 3_600_000)})
	s := service(t, c, 1)
	if len(s.Replicas) != 2 {
		t.Fatalf("replicas %+v (%+v)", s.Replicas, s.Wait)
	}
	for i, r := range s.Replicas {
		if r.Provider != q.Best[i].Provider || r.PricePerHour != q.Best[i].PricePerHour {
			t.Errorf("replica %d on %s at %d, quoted %s at %d", i, r.Provider, r.PricePerHour, q.Best[i].Provider, q.Best[i].PricePerHour)
		}
	}

	low := lt.ServiceSpec("tinylm", 10_000)
	q, err = ledger.QuoteService(c.KV, &low, 0)
	if err != nil {
		t.Fatal(err)
	}
	if q.Matching != 0 || q.Miss == nil || q.Miss.CheapestAbove != 36_000 || q.Miss.Need != 1 || q.Code != ledger.QuoteOverPrice || q.CheapestAsk != 36_000 || q.RatePerHour != 0 || q.LastsSeconds != 0 {
		t.Errorf("quote under every ask: %+v (miss %+v), want a miss, a code and the cheapest ask 36000", q, q.Miss)
	}

	bad := lt.ServiceSpec("tinylm", 200_000)
	bad.Replicas = 0
	if _, err := ledger.QuoteService(c.KV, &bad, 1); !errors.Is(err, ledger.ErrInvalidMsg) {
		t.Errorf("0 replicas: %v, want ErrInvalidMsg", err)
	}
}
