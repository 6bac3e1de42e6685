package apibench

import (
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestAPISmall runs the API benchmark tiny: the state must hold every kind
// of job, the node resume on it and produce blocks, and every request
// answer 200.
func TestAPISmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a state and runs a node")
	}
	o := Options{Providers: 300, Jobs: 3000, Consumers: 20, Rate: 100, ListRate: 20, Duration: 2 * time.Second, BlockTime: 100 * time.Millisecond, TxRate: 20, StateDir: t.TempDir()}
	first, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	// A second run starts from a copy of the kept state.
	res, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if first.SetupSeconds <= 0 || res.SetupSeconds != 0 || res.StateBlocks != first.StateBlocks || res.JobStates[ledger.JobSucceeded] != first.JobStates[ledger.JobSucceeded] {
		t.Errorf("the second run did not reuse the state: setup %.1fs then %.1fs, %d then %d blocks", first.SetupSeconds, res.SetupSeconds, first.StateBlocks, res.StateBlocks)
	}
	total := 0
	for _, st := range []string{ledger.JobSucceeded, ledger.JobFailed, ledger.JobRunning, ledger.JobQueued, ledger.JobCancelled} {
		if res.JobStates[st] == 0 {
			t.Errorf("no %s job in the state: %v", st, res.JobStates)
		}
	}
	for _, n := range res.JobStates {
		total += n
	}
	if total != 3000 {
		t.Errorf("%d jobs in the state, want 3000: %v", total, res.JobStates)
	}
	if res.Blocks < 5 || res.BlockTxs == 0 {
		t.Errorf("the validator made %d blocks with %d txs during the load", res.Blocks, res.BlockTxs)
	}
	for _, c := range []Class{res.Single, res.List} {
		if c.Requests < 20 || c.Errors != 0 || c.P99Ms <= 0 || c.P99Ms < c.P50Ms {
			t.Errorf("class %+v", c)
		}
	}
	if len(res.Endpoints) < 12 || res.MeetsSingle != nil {
		t.Errorf("%d endpoints measured; verdict %v without the target's size", len(res.Endpoints), res.MeetsSingle)
	}
}

// TestStateFingerprintStable: the kept state's key must not change from
// run to run of the same code (else a kept state is never reused).
func TestStateFingerprintStable(t *testing.T) {
	params := ledger.DefaultParams()
	senders := market.Keys("api-sender", 4)
	a, err := stateFingerprint(t.Context(), 1, params, senders)
	if err != nil {
		t.Fatal(err)
	}
	b, err := stateFingerprint(t.Context(), 1, params, senders)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || len(a) != 12 {
		t.Errorf("fingerprints %q, %q: want the same 12 hex digits", a, b)
	}
	// What the state holds (here the parameters) is in the key.
	params.MaxTxBytes++
	c, err := stateFingerprint(t.Context(), 1, params, senders)
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Errorf("fingerprint %q for another state, want another", c)
	}
}
