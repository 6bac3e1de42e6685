package verifybench

import (
	"testing"
)

// TestVerifySmall runs the Proof of Sync simulation on a small market:
// every cheater is caught, no honest provider is ever slashed, and no
// wrong result is delivered by a provider still in its warm-up (all of
// whose jobs are audited).
func TestVerifySmall(t *testing.T) {
	res, err := Run(t.Context(), Options{Providers: 40, Jobs: 3000, BlockJobs: 60, Cheaters: 4, CheatRate: 0.1, ChallengeGOPS: 2, ChallengeMillis: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *res)
	if res.Finished != res.Jobs || res.TxsFailed != 0 {
		t.Fatalf("finished %d of %d jobs, %d txs refused", res.Finished, res.Jobs, res.TxsFailed)
	}
	if res.HonestSlashed != 0 {
		t.Errorf("%d honest providers slashed", res.HonestSlashed)
	}
	if res.CaughtCheaters != 4 || res.CheatedResults == 0 {
		t.Errorf("caught %d of 4 cheaters (%d wrong results)", res.CaughtCheaters, res.CheatedResults)
	}
	if res.WrongDelivered >= res.CheatedResults {
		t.Errorf("all %d wrong results delivered", res.CheatedResults)
	}
	if res.ChallengeRatio <= 0 || res.ChallengeRatio > 0.1 { // a tiny challenge here; BENCHMARKS.md has the sized one
		t.Errorf("challenge verify/prove %g", res.ChallengeRatio)
	}
}

func TestVerifyOptionsValidate(t *testing.T) {
	for _, o := range []Options{{Providers: 2}, {Cheaters: 2000}, {CheatRate: 2}, {Jobs: -1}, {ChallengeMillis: 100_000}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
