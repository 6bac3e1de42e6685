package provider_test

import (
	"fmt"
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

// TestGPUHardwareChallenges runs two agents with a GPU each, emulated in Go
// behind the CUDA backend's interface (package gpu): each measures its GPU
// with the GPU benchmark and declares it; the ledger challenges the CPU
// and the GPU separately; the honest agent proves its GPU's claim with the
// GPU prover on that device, and the one that declares 50 times its
// measurement fails on the GPU and is slashed. Each provider's CPU and GPU
// are challenged one after the other, so this takes a while.
func TestGPUHardwareChallenges(t *testing.T) {
	n := startNetworkWith(t, func(p *ledger.Params) {
		p.HWRatePPM = 1_000_000
		p.HWTargetMillis = 200
		p.HWAllowanceMillis = 3_000
	}, "honest", "liar")
	run := func(name string, faults *provider.Faults) (*provider.Agent, *gpu.Emulated) {
		lib := nvmlsim.Lib(nvmlsim.L4, 1)
		inv, err := hwinfo.Detect(t.Context(), hwinfo.Options{NVML: lib})
		if err != nil || len(inv.GPUs) != 1 {
			t.Fatalf("simulated L4: %v, %+v", err, inv)
		}
		dev := &gpu.Emulated{Name: "emulated L4", ID: inv.GPUs[0].UUID, Kernels: []string{"gemm_dp4a"}}
		a, _ := runAgentWith(t, n, name, lib, "eu", 300_000, func(o *provider.Options) {
			o.Faults, o.GPUBackends = faults, []gpu.Backend{dev}
		})
		return a, dev
	}
	h, hdev := run("honest", nil)
	l, _ := run("liar", &provider.Faults{OverclaimFactor: 50})
	record := func(a *provider.Agent) *ledger.Provider {
		p, err := n.cl.Provider(t.Context(), a.Status().Key())
		if err != nil {
			return nil
		}
		return p.Record
	}
	waitForWithin(t, 2*time.Minute, "the honest GPU proven and the liar's GPU failed", func() bool {
		hp, lp := record(h), record(l)
		return hp != nil && lp != nil && hp.DeviceRuling(0).Proven && hp.DeviceRuling(1).Proven && lp.DeviceRuling(1).Proven
	})
	hp, lp := record(h), record(l)
	g := hp.Inventory.GPUs[0]
	if g.Int8GOPS == 0 || g.UUID != hdev.ID || hp.DeviceGOPS(1) != g.Int8GOPS || hp.Slashed != 0 {
		t.Errorf("honest: GPU %+v, counts %d GOPS, slashed %d", g, hp.DeviceGOPS(1), hp.Slashed)
	}
	if st := h.Status(); st.GPUFigures[g.UUID].Kernel != "gemm_dp4a" {
		t.Errorf("honest agent's GPU figures: %+v", st.GPUFigures)
	}
	if hdev.Launches["gemm_dp4a"] == 0 || hdev.Launches["hash_leaves"] == 0 {
		t.Errorf("the honest GPU's challenge did not run on the device: launches %v", hdev.Launches)
	}
	if r := lp.DeviceRuling(1); r.ProvenGOPS >= lp.DeviceClaim(1) || lp.Slashed == 0 || !strings.Contains(lp.Challenges.LastFailure+fmt.Sprint(lp.SlashEvents), "gpus[0]") {
		t.Errorf("liar: GPU ruling %+v of claim %d, slashed %d, failures %q %v", r, lp.DeviceClaim(1), lp.Slashed, lp.Challenges.LastFailure, lp.SlashEvents)
	}
}
