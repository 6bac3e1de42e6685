package provider_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestHardwareChallenges runs two real agents against a chain that
// challenges every provider: the honest one computes its GEMM with the
// CPU prover, commits in time and opens correctly; the one that declares
// 50 times what it measured cannot finish by the deadline, goes on
// computing and commits late: a correct late proof measures the device
// (docs/challenge.md, "Rulings"), so it is not slashed, but what it
// showed replaces its claim and its reputation falls.
func TestHardwareChallenges(t *testing.T) {
	n := startNetworkWith(t, func(p *ledger.Params) {
		p.HWRatePPM = 1_000_000
		p.HWTargetMillis = 200
		p.HWAllowanceMillis = 3_000
	}, "honest", "liar")
	cpu := nvmlsim.Lib(nvmlsim.GPU{}, 0)
	// The honest agent claims 2 GOPS, a tenth of what one core of the
	// prover's kernel does, so that it passes on a machine loaded by
	// other tests too (CI runs packages in parallel).
	h, _ := runAgentWith(t, n, "honest", cpu, "eu", 36_000, func(o *provider.Options) {
		o.Figures = &hwinfo.Figures{Device: "cpu", Int8TOPS: 0.002, MemBandwidthGBs: 20}
	})
	// The liar claims 1 TOPS: its 200-Gop product takes it about 10 s (on
	// time only at over 60 GOPS on one core), past the 3.25-s deadline and
	// well within the late window.
	l, _ := runAgentFaulty(t, n, "liar", cpu, "eu", 36_000, &provider.Faults{OverclaimFactor: 50})
	record := func(a *provider.Agent) *ledger.Provider {
		p, err := n.cl.Provider(t.Context(), a.Status().Key())
		if err != nil {
			return nil
		}
		return p.Record
	}
	waitForWithin(t, 3*time.Minute, "a hardware challenge passed and one ruled late", func() bool {
		hp, lp := record(h), record(l)
		return hp != nil && lp != nil && hp.Challenges.Passed >= 1 && lp.Challenges.Late+lp.Challenges.Missed >= 1
	})
	hp, lp := record(h), record(l)
	if hp.Slashed != 0 || hp.Challenges.Failed != 0 || hp.EffectiveGOPS() != hp.Measured.Int8GOPS {
		t.Errorf("honest provider: slashed %d, record %+v, effective %d of %d", hp.Slashed, hp.Challenges, hp.EffectiveGOPS(), hp.Measured.Int8GOPS)
	}
	if lp.Slashed != 0 || lp.Challenges.Failed != 0 || lp.EffectiveGOPS() >= lp.Measured.Int8GOPS/10 {
		t.Errorf("overclaiming provider: slashed %d, record %+v, effective %d of claimed %d; want not slashed for being slow, counted at what it showed", lp.Slashed, lp.Challenges, lp.EffectiveGOPS(), lp.Measured.Int8GOPS)
	}
	if lp.Reputation >= hp.Reputation {
		t.Errorf("reputation: liar %d, honest %d", lp.Reputation, hp.Reputation)
	}
}

// TestGPUHardwareChallenges runs an agent with a GPU emulated in Go behind
// the CUDA backend's interface (package gpu): it measures the GPU with the
// GPU benchmark and declares it with the GPU's UUID; the ledger challenges
// the CPU and the GPU separately, and the agent proves the GPU's claim with
// the GPU prover on that device. (That an overclaimed GPU fails is the
// ledger's per-device tests and, on a real H200, BENCHMARKS.md: an emulated
// device's speed moves with the machine's load between its benchmark and
// its challenge, so an overclaim test on it is not reliable.)
func TestGPUHardwareChallenges(t *testing.T) {
	n := startNetworkWith(t, func(p *ledger.Params) {
		p.HWRatePPM = 1_000_000
		p.HWTargetMillis = 200
		p.HWAllowanceMillis = 3_000
	}, "gpubox")
	lib := nvmlsim.Lib(nvmlsim.L4, 1)
	inv, err := hwinfo.Detect(t.Context(), hwinfo.Options{NVML: lib})
	if err != nil || len(inv.GPUs) != 1 {
		t.Fatalf("simulated L4: %v, %+v", err, inv)
	}
	dev := &gpu.Emulated{Name: "emulated L4", ID: inv.GPUs[0].UUID, Kernels: []string{"gemm_dp4a"}}
	a, _ := runAgentWith(t, n, "gpubox", lib, "eu", 300_000, func(o *provider.Options) { o.GPUBackends = []gpu.Backend{dev} })
	record := func() *ledger.Provider {
		p, err := n.cl.Provider(t.Context(), a.Status().Key())
		if err != nil {
			return nil
		}
		return p.Record
	}
	waitForWithin(t, 2*time.Minute, "the CPU and the GPU proven", func() bool {
		p := record()
		return p != nil && p.DeviceRuling(0).Proven && p.DeviceRuling(1).Proven
	})
	p := record()
	g := p.Inventory.GPUs[0]
	if g.Int8GOPS == 0 || g.UUID != dev.ID || p.DeviceGOPS(1) != g.Int8GOPS || p.Slashed != 0 || p.Challenges.Failed != 0 {
		t.Errorf("GPU %+v, counts %d GOPS, slashed %d, record %+v", g, p.DeviceGOPS(1), p.Slashed, p.Challenges)
	}
	if st := a.Status(); st.GPUFigures[g.UUID].Kernel != "gemm_dp4a" || len(st.GPUNotes) == 0 {
		t.Errorf("the agent's GPU figures %+v, notes %q", st.GPUFigures, st.GPUNotes)
	}
	if dev.LaunchCount("gemm_dp4a") == 0 || dev.LaunchCount("hash_leaves") == 0 {
		t.Errorf("the GPU's challenge did not run on the device: %d GEMMs, %d leaf hashings", dev.LaunchCount("gemm_dp4a"), dev.LaunchCount("hash_leaves"))
	}
}

// TestSkippedAndFakedChallenges runs the two cheats besides overclaiming
// (issue 19) against a real node: a provider that ignores its hardware
// challenges, and one that answers at once with a proof of a product it
// never computed (a Merkle tree of zeros, opened consistently). The faker
// is slashed at once for a wrong opening, which only the chain's
// recomputation of the opened entries can see. A missed challenge is a
// liveness failure (docs/challenge.md, "Rulings"): the skipper's device
// counts nothing and its first misses cost it no stake. The honest
// provider beside them loses nothing.
func TestSkippedAndFakedChallenges(t *testing.T) {
	n := startNetworkWith(t, func(p *ledger.Params) {
		p.HWRatePPM = 1_000_000
		p.HWTargetMillis = 200
		p.HWAllowanceMillis = 3_000
		p.HWLateFactor = 2 // a commit counts up to 6.5 s: the skipper's miss is ruled soon
	}, "honest", "skipper", "faker")
	cpu := nvmlsim.Lib(nvmlsim.GPU{}, 0)
	h, _ := runAgent(t, n, "honest", cpu, "eu", 36_000)
	s, _ := runAgentFaulty(t, n, "skipper", cpu, "eu", 36_000, &provider.Faults{SkipChallenges: true})
	f, _ := runAgentFaulty(t, n, "faker", cpu, "eu", 36_000, &provider.Faults{FakeChallenges: true})
	record := func(a *provider.Agent) *ledger.Provider {
		p, err := n.cl.Provider(t.Context(), a.Status().Key())
		if err != nil {
			return nil
		}
		return p.Record
	}
	waitForWithin(t, time.Minute, "the skipper's miss and the faker's failure ruled", func() bool {
		sp, fp := record(s), record(f)
		return sp != nil && fp != nil && sp.Challenges.Missed >= 1 && fp.Challenges.Failed >= 1
	})
	if r := record(f); r.Slashed == 0 || r.Challenges.Passed != 0 || !strings.Contains(r.Challenges.LastFailure, "wrong opening") {
		t.Errorf("faker: slashed %d, record %+v; want slashed for a wrong opening", r.Slashed, r.Challenges)
	}
	params, err := n.cl.Params(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := record(s)
	if r.Challenges.Passed != 0 || r.EffectiveGOPS() != 0 {
		t.Errorf("skipper: record %+v, effective %d; want its device counting nothing", r.Challenges, r.EffectiveGOPS())
	}
	if misses := r.Challenges.Missed + r.Challenges.Failed; r.Slashed != 0 && misses < params.HWMissLimit {
		t.Errorf("skipper: slashed %d after %d misses; want no slash before %d in a row", r.Slashed, misses, params.HWMissLimit)
	}
	if hp := record(h); hp == nil || hp.Slashed != 0 || hp.Challenges.Failed != 0 {
		t.Errorf("honest provider: %+v", hp)
	}
}
