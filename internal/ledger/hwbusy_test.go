package ledger_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// GPU challenges ruled busy (docs/challenge.md, "Rulings"): a GPU that
// runs a job may have no memory left for a proof for longer than the late
// window. Such a challenge is not a miss.

// busyGPUClaim is the GPU's claim in busyChain: with a 100-ms target, a
// plan of 10⁹ operations (a 1.125-s deadline with the 1-s allowance, a
// 56-s late window, a 7.5-s gap and a 1.875-s recheck).
const busyGPUClaim = 10

// busyChain has prov1 staked for one GPU claiming busyGPUClaim (its CPU
// claims nothing, so every challenge is for the GPU), running wasm and
// oci, with a GPU challenge open; and a funded consumer.
func busyChain(t *testing.T) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "prov1", "consumer")
	g.Params.LivenessRatePPM = 0
	g.Params.HWTargetMillis = 100
	g.Params.HWAllowanceMillis = 1_000
	g.Params.HWRatePPM = 1_000_000
	c := lt.NewChain(t, g)
	info := gpuInfo(0, busyGPUClaim)
	info.Executors = []string{"wasm", "oci"}
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: info})})
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStake{Amount: 100_000_000})})
	if hc := provider(t, c, prov1).HWChallenge; hc == nil || hc.Device != 1 {
		t.Fatalf("challenge %+v, want one open for the GPU", hc)
	}
	return c
}

// startGPUJob places a one-GPU job on prov1 and starts it; it returns the
// job's id.
func startGPUJob(t *testing.T, c *lt.Chain) uint64 {
	t.Helper()
	spec := lt.WasmJob("train", 1_000_000, 3600)
	spec.GPUCount = 1
	res := submit(t, c, spec)
	must(t, []ledger.TxResult{res})
	id := jobID(t, res)
	if j := job(t, c, id); j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov1.Addr {
		t.Fatalf("GPU job %d is %s on %v, want assigned to prov1", id, j.State, j.Assignments)
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: id, Grants: []ledger.Grant{{Provider: prov1.Addr, WrappedKey: []byte("k")}}})})
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStartJob{JobID: id})})
	return id
}

// jobID is the id in a submit's job_submitted event.
func jobID(t *testing.T, r ledger.TxResult) uint64 {
	t.Helper()
	for _, e := range r.Events {
		for _, a := range e.Attrs {
			if a.Key == "job" {
				var id uint64
				for _, ch := range a.Value {
					id = id*10 + uint64(ch-'0')
				}
				return id
			}
		}
	}
	t.Fatalf("no job id in %+v", r.Events)
	return 0
}

// commitJob ends prov1's run of job id (its result committed).
func commitJob(t *testing.T, c *lt.Chain, id uint64) {
	t.Helper()
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgCommitResult{JobID: id, MeteredSeconds: 60, Result: &ledger.JobResult{
		ManifestHash: ledger.Hash{7}, OutputBlob: "sha256:" + strings.Repeat("ab", 32), MeteredSeconds: 60,
	}})})
}

// missWindow lets the open challenge's late window pass in one block.
func missWindow(t *testing.T, c *lt.Chain) *ledger.HardwareChallenge {
	t.Helper()
	_, hc := hwChallengeOf(t, c)
	c.Advance(pastLateWindow(hc))
	c.ApplyBlock(t)
	return hc
}

// blockEvent is the last block's event of type typ (nil: none).
func blockEvent(c *lt.Chain, typ string) map[string]string {
	for _, e := range c.Events {
		if e.Type == typ {
			m := map[string]string{}
			for _, a := range e.Attrs {
				m[a.Key] = a.Value
			}
			return m
		}
	}
	return nil
}

// TestBusyGPUIsNotAMiss: a GPU challenge with no commit in the late
// window while the provider runs a GPU job (or a GPU service's replica)
// is ruled busy: no miss, no slash, no reputation lost, but the GPU's
// claim, which no challenge proved, no longer counts. Without the GPU
// work the same silence is a miss.
func TestBusyGPUIsNotAMiss(t *testing.T) {
	for _, tc := range []struct {
		name string
		work func(t *testing.T, c *lt.Chain)
		busy bool
	}{
		{"no GPU work", func(*testing.T, *lt.Chain) {}, false},
		{"a CPU job", func(t *testing.T, c *lt.Chain) {
			must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("cpu", 1_000_000, 3600))})
			must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: prov1.Addr, WrappedKey: []byte("k")}}})})
			must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStartJob{JobID: 1})})
		}, false},
		{"a GPU job placed, not started", func(t *testing.T, c *lt.Chain) {
			spec := lt.WasmJob("train", 1_000_000, 3600)
			spec.GPUCount = 1
			must(t, []ledger.TxResult{submit(t, c, spec)})
		}, false},
		{"a GPU job committed", func(t *testing.T, c *lt.Chain) { commitJob(t, c, startGPUJob(t, c)) }, false},
		{"a GPU job running", func(t *testing.T, c *lt.Chain) { startGPUJob(t, c) }, true},
		{"a GPU service's replica", func(t *testing.T, c *lt.Chain) {
			spec := lt.ServiceSpec("llm", 1_000_000)
			spec.GPUCount = 1
			must(t, []ledger.TxResult{deploy(t, c, spec, 100_000_000)})
			if s := service(t, c, 1); len(s.Replicas) != 1 || s.Replicas[0].Provider != prov1.Addr {
				t.Fatalf("GPU service replicas %+v, want one on prov1", s.Replicas)
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := busyChain(t)
			before := provider(t, c, prov1)
			tc.work(t, c)
			missWindow(t, c)
			p := provider(t, c, prov1)
			ch := p.Challenges
			if p.Slashed != 0 || ch.Failed != 0 || ch.Passed+ch.Late != 0 {
				t.Fatalf("slashed %d, record %+v", p.Slashed, ch)
			}
			r := p.DeviceRuling(1)
			if !r.Proven || r.ProvenGOPS != 0 || !r.Recheck {
				t.Errorf("GPU ruling %+v, want counted 0 and rechecked", r)
			}
			busy, missed := blockEvent(c, "hw_challenge_busy"), blockEvent(c, "hw_challenge_missed")
			if !tc.busy {
				if ch.Missed != 1 || ch.MissesInARow != 1 || ch.Busy != 0 || r.Busy != 0 || missed == nil || busy != nil {
					t.Fatalf("record %+v, GPU ruling %+v, events %v: want a miss", ch, r, c.Events)
				}
				return
			}
			if ch.Busy != 1 || r.Busy != 1 || ch.Missed != 0 || ch.MissesInARow != 0 || missed != nil {
				t.Fatalf("record %+v, GPU ruling %+v: want busy, not missed", ch, r)
			}
			if p.Reputation != before.Reputation {
				t.Errorf("reputation %d → %d, want unchanged", before.Reputation, p.Reputation)
			}
			if busy == nil || busy["device"] != "1" || busy["device_uuid"] != "GPU-A" || busy["cause"] != ledger.ChallengeCauseNoCommit || busy["busy_in_a_row"] != "1" ||
				busy["gpu_jobs"]+"/"+busy["gpu_replicas"] != map[bool]string{true: "1/0", false: "0/1"}[strings.Contains(tc.name, "job")] {
				t.Errorf("hw_challenge_busy event %v", busy)
			}
			if got := p.ChallengePassRatePPM(); got != 1_000_000 {
				t.Errorf("pass rate %d ppm with only a busy ruling, want it untouched", got)
			}
		})
	}
}

// TestBusyGPURecheckedWhenTheWorkEnds: after a busy ruling the GPU is not
// challenged while the job runs, even past the recheck's share of its gap,
// and is challenged in the block after the job commits; while work lasts,
// it is challenged again after its whole gap, counted from the ruling.
func TestBusyGPURecheckedWhenTheWorkEnds(t *testing.T) {
	c := busyChain(t)
	p, _ := ledger.GetParams(c.KV)
	_, hc := hwChallengeOf(t, c)
	pl := plan(t, c, hc)
	recheck := time.Duration(pl.MinGapMillis*p.HWRecheckPermille/1000) * time.Millisecond
	gap := time.Duration(pl.MinGapMillis) * time.Millisecond
	if recheck < time.Second || gap < recheck+3*time.Second {
		t.Fatalf("recheck %s, gap %s: the test wants them blocks apart", recheck, gap)
	}

	id := startGPUJob(t, c)
	missWindow(t, c)
	ruledAt := c.Now()
	if provider(t, c, prov1).Challenges.Busy != 1 {
		t.Fatalf("not ruled busy: %+v", provider(t, c, prov1).Challenges)
	}
	// Past the recheck, within the gap: the job still runs, no challenge.
	for c.Now().Sub(ruledAt) < gap-time.Second {
		c.ApplyBlock(t)
		if hc := provider(t, c, prov1).HWChallenge; hc != nil {
			t.Fatalf("challenged %s after the busy ruling while the GPU job runs (recheck %s, gap %s)", c.Now().Sub(ruledAt), recheck, gap)
		}
	}
	// The job ends: the GPU is challenged in the next block.
	commitJob(t, c, id)
	if provider(t, c, prov1).HWChallenge == nil {
		c.ApplyBlock(t)
	}
	if hc := provider(t, c, prov1).HWChallenge; hc == nil || hc.Device != 1 {
		t.Fatalf("after the job committed: challenge %+v, want one for the GPU", hc)
	}

	// Busy again, with work that lasts: challenged again after the gap.
	startGPUJob(t, c)
	missWindow(t, c)
	ruledAt = c.Now()
	if got := provider(t, c, prov1).DeviceRuling(1).Busy; got != 2 {
		t.Fatalf("busy rulings in a row %d, want 2", got)
	}
	for provider(t, c, prov1).HWChallenge == nil {
		if c.Now().Sub(ruledAt) > gap+time.Second {
			t.Fatalf("no challenge %s after the busy ruling while the work lasts, want one after the gap (%s)", c.Now().Sub(ruledAt), gap)
		}
		c.ApplyBlock(t)
	}
	if d := c.Now().Sub(ruledAt); d < gap {
		t.Fatalf("challenged %s after the busy ruling while the work lasts, want the whole gap (%s)", d, gap)
	}
}

// TestBusyGPUKeepsOnlyWhatWasProven: a GPU that passed keeps its proven
// claim through busy rulings, up to hw_miss_limit of them in a row; that
// one counts it 0 (still no miss, no slash); a pass restores it and ends
// the run. A claim re-declared after a busy ruling gets no new faith.
func TestBusyGPUKeepsOnlyWhatWasProven(t *testing.T) {
	c := busyChain(t)
	p, _ := ledger.GetParams(c.KV)
	answerAs(t, c, 1, false)
	if r := provider(t, c, prov1).DeviceRuling(1); !r.Proven || r.ProvenGOPS != busyGPUClaim {
		t.Fatalf("GPU ruling after a pass: %+v", r)
	}
	startGPUJob(t, c)
	gap := time.Duration(plan(t, c, &ledger.HardwareChallenge{ClaimedGOPS: busyGPUClaim}).MinGapMillis) * time.Millisecond
	for n := uint64(1); n <= p.HWMissLimit; n++ {
		if nextChallenge(t, c, gap, 3) == nil {
			t.Fatalf("busy ruling %d: no challenge", n)
		}
		missWindow(t, c)
		pr := provider(t, c, prov1)
		r := pr.DeviceRuling(1)
		want := uint64(busyGPUClaim)
		if n >= p.HWMissLimit {
			want = 0
		}
		if r.Busy != n || r.ProvenGOPS != want || pr.EffectiveGOPS() != want || pr.Challenges.Missed != 0 || pr.Slashed != 0 {
			t.Fatalf("busy ruling %d: GPU ruling %+v, counts %d (want %d), record %+v, slashed %d", n, r, pr.EffectiveGOPS(), want, pr.Challenges, pr.Slashed)
		}
	}
	// A new claim for the same GPU gets no new faith: capped at what it
	// counted (0).
	info := provider(t, c, prov1).ProviderInfo
	info.Inventory.GPUs = slices.Clone(info.Inventory.GPUs)
	info.Inventory.GPUs[0].Int8GOPS = 2 * busyGPUClaim
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: info})})
	if got := provider(t, c, prov1).EffectiveGOPS(); got != 0 {
		t.Fatalf("re-declared after busy rulings: counts %d, want 0", got)
	}
}
