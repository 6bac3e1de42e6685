package ledger_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// gpuInfo declares a CPU measured at cpu GOPS and one RTX_4090 per entry
// of gpus, measured at that many GOPS, with UUIDs GPU-A, GPU-B, … and
// serials SN-0, SN-1, ….
func gpuInfo(cpu uint64, gpus ...uint64) ledger.ProviderInfo {
	info := lt.ProviderInfo("RTX_4090", len(gpus), 36_000)
	info.Measured.Int8GOPS = cpu
	for i, g := range gpus {
		info.Inventory.GPUs[i].UUID = fmt.Sprintf("GPU-%c", 'A'+i)
		info.Inventory.GPUs[i].Serial = fmt.Sprintf("SN-%d", i)
		info.Inventory.GPUs[i].Int8GOPS = g
	}
	return info
}

func hwGenesis(names ...string) ledger.Genesis {
	g := lt.Genesis(100_000_000_000, names...)
	g.Params.LivenessRatePPM = 0
	g.Params.HWTargetMillis = 100
	g.Params.HWAllowanceMillis = 5_000
	g.Params.HWRatePPM = 1_000_000 // drawn as soon as it is online
	return g
}

func challengeParams(p ledger.Params) challenge.Params {
	return challenge.Params{TargetMillis: p.HWTargetMillis, SlackPermille: p.HWSlackPermille, AllowanceMillis: p.HWAllowanceMillis, Openings: int(p.HWOpenings)}
}

// hwChainWith registers prov1 with info after skip empty blocks (so that
// the challenge its registration block issues comes from another seed),
// and stakes it.
func hwChainWith(t *testing.T, info ledger.ProviderInfo, skip int) *lt.Chain {
	t.Helper()
	c := lt.NewChain(t, hwGenesis("prov1", "prov2"))
	for range skip {
		c.ApplyBlock(t)
	}
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: info})})
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStake{Amount: stake})})
	if provider(t, c, prov1).HWChallenge == nil {
		t.Fatal("no hardware challenge issued")
	}
	return c
}

func deviceClaims(info ledger.ProviderInfo) []uint64 {
	claims := []uint64{info.Measured.Int8GOPS}
	for _, g := range info.Inventory.GPUs {
		claims = append(claims, g.Int8GOPS)
	}
	return claims
}

// TestHardwareChallengeDrawsADevice: the device comes from the block seed,
// among the devices with a claim (never a GPU with none), and the GEMM is
// sized for that device's own claim.
func TestHardwareChallengeDrawsADevice(t *testing.T) {
	info := gpuInfo(2, 3, 0, 5)
	claims := deviceClaims(info)
	params := challengeParams(hwGenesis().Params)
	seen := map[uint64]int{}
	for skip := range 12 {
		c := hwChainWith(t, info, skip)
		hc := provider(t, c, prov1).HWChallenge
		if hc.Device >= uint64(len(claims)) || claims[hc.Device] == 0 {
			t.Fatalf("seed %d: challenge for device %d, which claims nothing (claims %v)", skip, hc.Device, claims)
		}
		seen[hc.Device]++
		if hc.ClaimedGOPS != claims[hc.Device] {
			t.Errorf("seed %d: device %d challenged at %d GOPS, it claims %d", skip, hc.Device, hc.ClaimedGOPS, claims[hc.Device])
		}
		wantUUID := ""
		if hc.Device > 0 {
			wantUUID = info.Inventory.GPUs[hc.Device-1].UUID
		}
		if hc.DeviceUUID != wantUUID {
			t.Errorf("seed %d: device %d has uuid %q, want %q", skip, hc.Device, hc.DeviceUUID, wantUUID)
		}
		plan, err := challenge.NewPlan(claims[hc.Device], params)
		if err != nil {
			t.Fatal(err)
		}
		if got := (challenge.Size{N: int(hc.N), K: int(hc.K), M: int(hc.M)}); got != plan.Size || hc.Deadline-hc.IssuedAt != int64(plan.DeadlineMillis) {
			t.Errorf("seed %d: device %d: size %s, deadline %d ms; its claim's plan is %s, %d ms", skip, hc.Device, got, hc.Deadline-hc.IssuedAt, plan.Size, plan.DeadlineMillis)
		}
	}
	if len(seen) != 3 {
		t.Errorf("devices drawn over 12 seeds: %v, want each of 0, 1 and 3", seen)
	}
}

// TestDrawTakesUnprovenDevicesFirst: a provider whose CPU has a ruling
// declares two GPUs with claims; the next challenges go to the GPUs without
// a ruling until each has one, whatever the seeds, though the CPU is past
// its gap, and after that the draw is among all its devices again.
func TestDrawTakesUnprovenDevicesFirst(t *testing.T) {
	cpuOnly := lt.ProviderInfo("", 0, 36_000)
	cpuOnly.Measured.Int8GOPS = 2
	withGPUs := gpuInfo(2, 3, 5)
	// next waits out the minimum gap if no challenge is open, and returns
	// the open one.
	next := func(c *lt.Chain) *ledger.HardwareChallenge {
		t.Helper()
		if provider(t, c, prov1).HWChallenge == nil {
			c.Advance(time.Minute)
			c.ApplyBlock(t)
		}
		_, hc := hwChallengeOf(t, c)
		return hc
	}
	pass := func(c *lt.Chain) {
		t.Helper()
		cm := proveAndCommit(t, c, 500*time.Millisecond)
		must(t, []ledger.TxResult{open(t, c, cm, false)})
	}
	later := map[uint64]int{} // devices drawn once all have rulings
	for skip := range 6 {
		c := hwChainWith(t, cpuOnly, skip)
		if hc := next(c); hc.Device != 0 {
			t.Fatalf("seed %d: CPU-only provider challenged on device %d", skip, hc.Device)
		}
		pass(c)
		// Past the CPU's gap, so that the draw could take it again: only
		// the rule that unproven devices come first keeps it off.
		c.Advance(time.Minute)
		must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: withGPUs})})
		p := provider(t, c, prov1)
		if !p.DeviceRuling(0).Proven || p.DeviceRuling(1).Proven || p.DeviceRuling(2).Proven {
			t.Fatalf("seed %d: after declaring the GPUs: rulings %+v, want the CPU's only", skip, p.Challenges)
		}
		for round := range 2 {
			hc := next(c)
			if p := provider(t, c, prov1); hc.Device == 0 || p.DeviceRuling(hc.Device).Proven {
				t.Fatalf("seed %d, challenge %d after the GPUs: on device %d, which has a ruling, while a GPU has none (%+v)", skip, round+1, hc.Device, p.Challenges)
			}
			pass(c)
		}
		p = provider(t, c, prov1)
		for d := range p.Devices() {
			if !p.DeviceRuling(d).Proven {
				t.Fatalf("seed %d: device %d has no ruling after two challenges (%+v)", skip, d, p.Challenges)
			}
		}
		for range 2 {
			later[next(c).Device]++
			pass(c)
		}
	}
	if len(later) != 3 {
		t.Errorf("devices drawn once every one had a ruling: %v, want each of 0, 1 and 2", later)
	}
}

// TestProvingOneGPUProvesOnlyIt: a passed challenge proves the challenged
// GPU's claim and nothing about the other GPU or the CPU.
func TestProvingOneGPUProvesOnlyIt(t *testing.T) {
	info := gpuInfo(0, 2, 3)
	c := hwChainWith(t, info, 0)
	_, hc := hwChallengeOf(t, c)
	cm := proveAndCommit(t, c, 500*time.Millisecond)
	must(t, []ledger.TxResult{open(t, c, cm, false)})
	p := provider(t, c, prov1)
	d, other := hc.Device, 3-hc.Device
	if r := p.DeviceRuling(d); !r.Proven || r.ProvenGOPS != hc.ClaimedGOPS {
		t.Fatalf("device %d after passing: %+v, want proven at %d", d, r, hc.ClaimedGOPS)
	}
	if r := p.DeviceRuling(other); r.Proven {
		t.Fatalf("device %d proven by device %d's challenge: %+v", other, d, r)
	}
	if p.Challenges.Proven || len(p.Challenges.GPUs) != 2 {
		t.Fatalf("record after one GPU's challenge: %+v", p.Challenges)
	}
	if got := p.EffectiveGOPS(); got != 5 {
		t.Fatalf("effective %d GOPS, want 2 + 3", got)
	}
	// The gap is per device: the next block challenges the other GPU,
	// which no challenge has ruled on, and never the one just proven.
	c.ApplyBlock(t)
	if next := provider(t, c, prov1).HWChallenge; next == nil || next.Device != other {
		t.Fatalf("the block after: challenge %+v, want one for device %d", next, other)
	}
}

// TestWrongOpeningZeroesOnlyThatDevice: a wrong opening proves 0 for the
// challenged device and leaves the others at their claims; the failure
// names the device.
func TestWrongOpeningZeroesOnlyThatDevice(t *testing.T) {
	info := gpuInfo(2, 3, 4)
	claims := deviceClaims(info)
	c := hwChainWith(t, info, 0)
	_, hc := hwChallengeOf(t, c)
	cm := proveAndCommit(t, c, 500*time.Millisecond)
	must(t, []ledger.TxResult{open(t, c, cm, true)})
	p := provider(t, c, prov1)
	if p.Challenges.Failed != 1 || p.Slashed != stake/10 {
		t.Fatalf("wrong opening: %+v slashed %d", p.Challenges, p.Slashed)
	}
	if f := p.Challenges.LastFail; f == nil || f.Code != ledger.ChallengeWrongOpening || f.Device != hc.Device || f.DeviceUUID != hc.DeviceUUID {
		t.Errorf("last failure %+v does not name device %d %q", f, hc.Device, hc.DeviceUUID)
	}
	want := uint64(0)
	for d, claim := range claims {
		got := p.DeviceGOPS(uint64(d))
		if uint64(d) == hc.Device {
			if got != 0 {
				t.Errorf("failed device %d counts %d GOPS", d, got)
			}
			continue
		}
		want += claim
		if got != claim {
			t.Errorf("device %d counts %d GOPS after device %d failed, want its claim %d", d, got, hc.Device, claim)
		}
	}
	if got := p.EffectiveGOPS(); got != want {
		t.Errorf("effective %d GOPS, want %d", got, want)
	}
}

// TestLateGPUCommitProvesWhatItShowed: a GPU that commits late counts at
// what the late commit showed; the other GPU keeps its claim.
func TestLateGPUCommitProvesWhatItShowed(t *testing.T) {
	c := hwChainWith(t, gpuInfo(0, 2, 2), 0)
	_, hc := hwChallengeOf(t, c)
	cm := proveAndCommit(t, c, time.Duration(hc.Deadline-hc.IssuedAt+1_000)*time.Millisecond)
	must(t, []ledger.TxResult{open(t, c, cm, false)})
	p := provider(t, c, prov1)
	if g := p.DeviceGOPS(hc.Device); g == 0 || g >= 2 || p.Challenges.Late != 1 || p.Slashed != 0 {
		t.Fatalf("device %d counts %d GOPS after a late commit, want the shown figure (0 < x < 2): %+v", hc.Device, g, p.Challenges)
	}
	if g := p.DeviceGOPS(3 - hc.Device); g != 2 {
		t.Fatalf("the other GPU counts %d GOPS, want its claim 2", g)
	}
}

func TestEffectiveGOPSSumsDevices(t *testing.T) {
	p := &ledger.Provider{ProviderInfo: gpuInfo(100, 200, 300, 400)}
	if got := p.EffectiveGOPS(); got != 1000 {
		t.Fatalf("no rulings: %d, want every claim (1000)", got)
	}
	p.Challenges.Proven, p.Challenges.ProvenGOPS = true, 40 // the CPU showed 40
	p.Challenges.GPUs = []ledger.DeviceProof{{}, {Proven: true, ProvenGOPS: 500}, {Proven: true}}
	// 40 (CPU capped) + 200 (no ruling) + 300 (proven more than it claims) + 0 (failed)
	if got := p.EffectiveGOPS(); got != 540 {
		t.Fatalf("effective %d, want 540", got)
	}
}

// TestRedeclaringDoesNotLaunderAFailure: after a GPU misses its challenge,
// re-declaring it with a higher claim, under another UUID, or dropping it
// and adding it back, leaves it at what it proved (0) until a challenge on
// it passes.
func TestRedeclaringDoesNotLaunderAFailure(t *testing.T) {
	info := gpuInfo(0, 2) // one device with a claim: every challenge is on GPU-A
	c := hwChainWith(t, info, 0)
	_, hc := hwChallengeOf(t, c)
	c.Advance(pastLateWindow(hc))
	c.ApplyBlock(t)
	if p := provider(t, c, prov1); p.Challenges.Missed != 1 || p.EffectiveGOPS() != 0 {
		t.Fatalf("after the failure: %+v effective %d", p.Challenges, p.EffectiveGOPS())
	}
	update := func(step string, info ledger.ProviderInfo) {
		t.Helper()
		must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: info})})
		if p := provider(t, c, prov1); p.EffectiveGOPS() != 0 {
			t.Fatalf("%s: effective %d GOPS after a failure, want 0 until proven (%+v)", step, p.EffectiveGOPS(), p.Challenges)
		}
	}
	higher := gpuInfo(0, 3)
	update("higher claim", higher)
	renamed := gpuInfo(0, 2)
	renamed.Inventory.GPUs[0].UUID, renamed.Inventory.GPUs[0].Serial = "GPU-Z", "SN-Z"
	update("new uuid", renamed)
	cpuOnly := lt.ProviderInfo("", 0, 36_000)
	cpuOnly.Measured.Int8GOPS = 0
	update("gpu dropped", cpuOnly)
	back := gpuInfo(0, 2)
	back.Inventory.GPUs[0].UUID, back.Inventory.GPUs[0].Serial = "GPU-Y", "SN-Y"
	update("gpu added back", back)
	// Only a passed challenge on it restores it. The recheck issued with
	// the miss is for GPU-A, no longer declared: it runs out (a second
	// miss, not slashed), and the next challenge is GPU-Y's.
	if open := provider(t, c, prov1).HWChallenge; open != nil {
		c.Advance(pastLateWindow(open))
	}
	c.Advance(2 * time.Minute) // past the minimum gap
	c.ApplyBlock(t)
	_, hc = hwChallengeOf(t, c)
	if hc.Device != 1 || hc.DeviceUUID != "GPU-Y" {
		t.Fatalf("challenge for device %d %q, want 1 GPU-Y", hc.Device, hc.DeviceUUID)
	}
	cm := proveAndCommit(t, c, 500*time.Millisecond)
	must(t, []ledger.TxResult{open(t, c, cm, false)})
	if p := provider(t, c, prov1); p.EffectiveGOPS() != 2 {
		t.Fatalf("after passing: effective %d, want 2 (%+v)", p.EffectiveGOPS(), p.Challenges)
	}
}

// TestRedeclaringDuringAChallengeDoesNotEscapeIt: a GPU renamed while its
// challenge is open starts at 0, and the miss still counts.
func TestRedeclaringDuringAChallengeDoesNotEscapeIt(t *testing.T) {
	c := hwChainWith(t, gpuInfo(0, 2), 0)
	renamed := gpuInfo(0, 2)
	renamed.Inventory.GPUs[0].UUID = "GPU-Z"
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: renamed})})
	if p := provider(t, c, prov1); p.EffectiveGOPS() != 0 {
		t.Fatalf("renamed during its challenge: effective %d, want 0", p.EffectiveGOPS())
	}
	_, hc := hwChallengeOf(t, c)
	c.Advance(pastLateWindow(hc))
	c.ApplyBlock(t)
	if p := provider(t, c, prov1); p.Challenges.Missed != 1 || p.Slashed != 0 || p.EffectiveGOPS() != 0 {
		t.Fatalf("after the late window: %+v slashed %d effective %d", p.Challenges, p.Slashed, p.EffectiveGOPS())
	}
}

// TestRedeclaringDropsAPassedProof: for a provider that never failed, a
// changed claim is unproven again (it counts at the new claim until
// challenged); an unchanged one keeps its proof.
func TestRedeclaringDropsAPassedProof(t *testing.T) {
	c := hwChain(t, 2)
	cm := proveAndCommit(t, c, 500*time.Millisecond)
	must(t, []ledger.TxResult{open(t, c, cm, false)})
	info := provider(t, c, prov1).ProviderInfo
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: info})})
	if p := provider(t, c, prov1); !p.Challenges.Proven || p.Challenges.ProvenGOPS != 2 {
		t.Fatalf("unchanged declaration lost its proof: %+v", p.Challenges)
	}
	info.Measured.Int8GOPS = 3
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: info})})
	if p := provider(t, c, prov1); p.Challenges.Proven || p.EffectiveGOPS() != 3 {
		t.Fatalf("changed claim kept the old proof: %+v effective %d", p.Challenges, p.EffectiveGOPS())
	}
}

func TestGPUValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(pi *ledger.ProviderInfo)
		want   string // "" = valid
	}{
		{"each at its peak", func(pi *ledger.ProviderInfo) {
			pi.Inventory.GPUs[0].Int8GOPS, pi.Inventory.GPUs[1].Int8GOPS, pi.Measured.Int8GOPS = 661_000, 661_000, 32_000
		}, ""},
		{"gpu above its class's peak", func(pi *ledger.ProviderInfo) { pi.Inventory.GPUs[1].Int8GOPS = 661_001 }, "gpus[1] (RTX_4090) measured int8 throughput 661001 GOPS is above the physical peak"},
		{"unknown gpu above the generic cap", func(pi *ledger.ProviderInfo) {
			pi.Inventory.GPUs[0].Class, pi.Asks[0].Class = "NEW_GPU", "NEW_GPU"
			pi.Inventory.GPUs[1].Class = "NEW_GPU"
			pi.Inventory.GPUs[0].Int8GOPS = 2_500_001
		}, "gpus[0] (NEW_GPU) measured int8 throughput"},
		// The machine's GPUs no longer lift the CPU's figure's ceiling.
		{"cpu above its cores with gpus", func(pi *ledger.ProviderInfo) { pi.Measured.Int8GOPS = 40_000 }, "above the physical peak of 16 CPU cores"},
		{"uuid twice", func(pi *ledger.ProviderInfo) { pi.Inventory.GPUs[1].UUID = "gpu-a" }, `gpus[1] has the uuid "gpu-a" of gpus[0]`},
		{"serial twice", func(pi *ledger.ProviderInfo) { pi.Inventory.GPUs[1].Serial = "SN-0" }, `gpus[1] has the serial "SN-0" of gpus[0]`},
		{"long serial", func(pi *ledger.ProviderInfo) { pi.Inventory.GPUs[0].Serial = strings.Repeat("1", 129) }, "gpus[0].serial is longer than 128"},
		{"no identity is fine", func(pi *ledger.ProviderInfo) {
			for i := range pi.Inventory.GPUs {
				pi.Inventory.GPUs[i].UUID, pi.Inventory.GPUs[i].Serial = "", ""
			}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pi := gpuInfo(1000, 1000, 1000)
			tc.mutate(&pi)
			err := pi.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ledger.ErrInvalidMsg) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidMsg mentioning %q", err, tc.want)
			}
		})
	}
}

func bindingHolder(c *lt.Chain, key string) []byte { return c.KV.Get([]byte(key)) }

// TestGPUHeldByOneProvider: an online provider's GPU UUIDs and serials
// cannot be declared by another; an update releases what it drops, and
// going offline releases everything.
func TestGPUHeldByOneProvider(t *testing.T) {
	g := lt.Genesis(100_000_000_000, "prov1", "prov2")
	g.Params.LivenessRatePPM = 0
	c := lt.NewChain(t, g)
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: gpuInfo(1000, 1000, 1000)})})
	taken := func(r ledger.TxResult, what string) {
		t.Helper()
		if !errors.Is(r.Err, ledger.ErrGPUTaken) || ledger.CodeOf(r.Err) != 21 || !strings.Contains(r.Err.Error(), what) || !strings.Contains(r.Err.Error(), prov1.Addr.String()) {
			t.Fatalf("got %v, want ErrGPUTaken naming %s and %s", r.Err, what, prov1.Addr)
		}
	}
	// The same UUID (in another case), or only the same serial.
	sameUUID := gpuInfo(1000, 1000)
	sameUUID.Inventory.GPUs[0].UUID, sameUUID.Inventory.GPUs[0].Serial = "gpu-b", "SN-9"
	taken(send(t, c, prov2, &ledger.MsgRegisterProvider{ProviderInfo: sameUUID}), `gpus[0] (uuid "gpu-b")`)
	sameSerial := gpuInfo(1000, 1000)
	sameSerial.Inventory.GPUs[0].UUID = "GPU-Q"
	taken(send(t, c, prov2, &ledger.MsgRegisterProvider{ProviderInfo: sameSerial}), `gpus[0] (serial "SN-0")`)

	// prov2 registers other GPUs, then tries to update onto prov1's.
	other := gpuInfo(1000, 1000)
	other.Inventory.GPUs[0].UUID, other.Inventory.GPUs[0].Serial = "GPU-Q", "SN-Q"
	must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgRegisterProvider{ProviderInfo: other})})
	taken(send(t, c, prov2, &ledger.MsgUpdateProvider{ProviderInfo: sameUUID}), `uuid "gpu-b"`)

	// prov1 drops GPU-B: it is free, GPU-A is still held.
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: gpuInfo(1000, 1000)})})
	if h := bindingHolder(c, "gpu/u/gpu-b"); h != nil {
		t.Fatalf("dropped GPU still bound to %x", h)
	}
	if h := bindingHolder(c, "gpu/u/gpu-a"); !slices.Equal(h, prov1.Addr[:]) {
		t.Fatalf("kept GPU bound to %x, want prov1", h)
	}
	onlyB := gpuInfo(1000, 1000)
	onlyB.Inventory.GPUs[0].UUID, onlyB.Inventory.GPUs[0].Serial = "GPU-B", "SN-1"
	must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgUpdateProvider{ProviderInfo: onlyB})})
	if h := bindingHolder(c, "gpu/u/gpu-q"); h != nil {
		t.Fatalf("prov2's dropped GPU-Q still bound to %x", h)
	}

	// Offline releases: prov2 can take GPU-A, and prov1 cannot come back
	// online with it.
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgSetProviderStatus{Online: false})})
	if h := bindingHolder(c, "gpu/u/gpu-a"); h != nil {
		t.Fatalf("offline provider's GPU still bound to %x", h)
	}
	both := gpuInfo(1000, 1000, 1000)
	must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgUpdateProvider{ProviderInfo: both})})
	r := send(t, c, prov1, &ledger.MsgSetProviderStatus{Online: true})
	if !errors.Is(r.Err, ledger.ErrGPUTaken) || !strings.Contains(r.Err.Error(), prov2.Addr.String()) {
		t.Fatalf("back online with a GPU prov2 holds: %v", r.Err)
	}
	if provider(t, c, prov1).Online {
		t.Fatal("refused provider came online")
	}
}

// TestInvariantCatchesBadGPUBinding: the binding index must be exactly the
// online providers' GPUs.
func TestInvariantCatchesBadGPUBinding(t *testing.T) {
	c := lt.NewChain(t, lt.Genesis(1_000_000_000, "prov1"))
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: gpuInfo(1000, 1000, 1000)})})
	other := address.Address{9}
	for name, change := range map[string]func(o *ledger.Overlay){
		"missing":      func(o *ledger.Overlay) { o.Delete([]byte("gpu/u/gpu-a")) },
		"wrong holder": func(o *ledger.Overlay) { o.Set([]byte("gpu/s/sn-1"), other[:]) },
		"extra":        func(o *ledger.Overlay) { o.Set([]byte("gpu/u/gpu-x"), prov1.Addr[:]) },
	} {
		o := ledger.NewOverlay(c.KV)
		change(o)
		if err := ledger.CheckInvariants(o); err == nil || !strings.Contains(err.Error(), "gpu binding") {
			t.Errorf("%s binding: got %v, want a gpu binding invariant error", name, err)
		}
	}
	if err := ledger.CheckInvariants(c.KV); err != nil {
		t.Fatal(err)
	}
}

// TestGapPerDevice: each device is challenged at most once per its own
// plan's minimum gap, so once the CPU and both GPUs have passed, no
// challenge comes for a while; before that, a device proven a moment ago
// does not hold the others back.
func TestGapPerDevice(t *testing.T) {
	c := hwChainWith(t, gpuInfo(2, 2, 3), 0)
	issued := map[uint64]int64{}
	for range 3 {
		_, hc := hwChallengeOf(t, c)
		if _, again := issued[hc.Device]; again {
			t.Fatalf("device %d challenged again before the others were", hc.Device)
		}
		issued[hc.Device] = hc.IssuedAt
		cm := proveAndCommit(t, c, 500*time.Millisecond)
		must(t, []ledger.TxResult{open(t, c, cm, false)})
		if r := provider(t, c, prov1).DeviceRuling(hc.Device); !r.Proven || r.LastAt != hc.IssuedAt {
			t.Fatalf("device %d after its challenge: %+v", hc.Device, r)
		}
		c.ApplyBlock(t)
	}
	for range 30 {
		hc := provider(t, c, prov1).HWChallenge
		if hc == nil {
			c.ApplyBlock(t)
			continue
		}
		plan, err := challenge.NewPlan(hc.ClaimedGOPS, challengeParams(hwGenesis().Params))
		if err != nil {
			t.Fatal(err)
		}
		if gap := hc.IssuedAt - issued[hc.Device]; gap < int64(plan.MinGapMillis) {
			t.Fatalf("device %d challenged again %d ms after its last challenge, within its minimum gap of %d ms", hc.Device, gap, plan.MinGapMillis)
		}
		return
	}
	t.Fatal("no device challenged again in 30 blocks")
}
