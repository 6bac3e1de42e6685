package provider_test

import (
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestHardwareChallenges runs two real agents against a chain that
// challenges every provider: the honest one computes its GEMM with the
// CPU prover, commits in time and opens correctly; the one that declares
// 200 times what it measured cannot finish by the deadline, is slashed, and
// its effective throughput drops below its claim.
func TestHardwareChallenges(t *testing.T) {
	n := startNetworkWith(t, func(p *ledger.Params) {
		p.HWRatePPM = 1_000_000
		p.HWTargetMillis = 200
		p.HWAllowanceMillis = 3_000
	}, "honest", "liar")
	cpu := nvmlsim.Lib(nvmlsim.GPU{}, 0)
	h, _ := runAgent(t, n, "honest", cpu, "eu", 36_000)
	l, _ := runAgentFaulty(t, n, "liar", cpu, "eu", 36_000, &provider.Faults{OverclaimFactor: 200})
	record := func(a *provider.Agent) *ledger.Provider {
		p, err := n.cl.Provider(t.Context(), a.Status().Key())
		if err != nil {
			return nil
		}
		return p.Record
	}
	waitFor(t, "a hardware challenge passed and one failed", func() bool {
		hp, lp := record(h), record(l)
		return hp != nil && lp != nil && hp.Challenges.Passed >= 1 && lp.Challenges.Failed >= 1
	})
	hp, lp := record(h), record(l)
	if hp.Slashed != 0 || hp.Challenges.Failed != 0 || hp.EffectiveGOPS() != hp.Measured.Int8GOPS {
		t.Errorf("honest provider: slashed %d, record %+v, effective %d of %d", hp.Slashed, hp.Challenges, hp.EffectiveGOPS(), hp.Measured.Int8GOPS)
	}
	if lp.Slashed == 0 || !strings.Contains(lp.Challenges.LastFailure, "deadline") || lp.EffectiveGOPS() >= lp.Measured.Int8GOPS {
		t.Errorf("overclaiming provider: slashed %d, record %+v, effective %d of claimed %d", lp.Slashed, lp.Challenges, lp.EffectiveGOPS(), lp.Measured.Int8GOPS)
	}
	if lp.Reputation >= hp.Reputation {
		t.Errorf("reputation: liar %d, honest %d", lp.Reputation, hp.Reputation)
	}
}
