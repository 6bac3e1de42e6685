package ledger_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// marketChain has a funded consumer and prov1, a staked CPU provider of
// 16 cores asking 36,000 usync per core-hour that takes maxJobs jobs, and
// epochs of 5 blocks.
func marketChain(t *testing.T, maxJobs uint64, tune func(*ledger.Params)) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "consumer", "prov1", "prov2", "prov3")
	g.Params.LivenessRatePPM = 0
	g.Params.EpochBlocks = 5
	if tune != nil {
		tune(&g.Params)
	}
	c := lt.NewChain(t, g)
	info := lt.ProviderInfo("", 0, 36_000)
	info.MaxJobs = maxJobs
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: info})})
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStake{Amount: 10_000_000})})
	return c
}

func cpuJob(name string, cores, maxPrice uint64, tier string) ledger.JobSpec {
	s := lt.WasmJob(name, maxPrice, 3600)
	s.CPUMilli = cores * 1000
	s.Tier = tier
	return s
}

func marketClass(t *testing.T, c *lt.Chain, class string) *ledger.MarketClass {
	t.Helper()
	m, ok, err := ledger.GetMarketClass(c.KV, class)
	if err != nil || !ok {
		t.Fatalf("market of %s: ok=%v err=%v", class, ok, err)
	}
	return m
}

// TestMarketIndexFollowsUtilisation: a class kept full raises its index
// each epoch by at most one step; idle again, the index comes down at most
// one step an epoch and stops at the floor, never below.
func TestMarketIndexFollowsUtilisation(t *testing.T) {
	c := marketChain(t, 4, func(p *ledger.Params) {
		p.MarketTargetPPM = 500_000
		p.MarketSmoothingPPM = 1_000_000 // no smoothing: each epoch's u is the EMA
		p.MarketFloor = 1_000
	})
	p, _ := ledger.GetParams(c.KV)
	for i := range 4 {
		must(t, []ledger.TxResult{submit(t, c, cpuJob("full", 4, 10_000_000, ""))})
		grantStart(t, c, uint64(i+1))
	}
	if live := marketClass(t, c, ledger.CPUClass); live.Offered != 16 || live.Reserved != 16 {
		t.Fatalf("counts: %d offered, %d reserved; want 16, 16", live.Offered, live.Reserved)
	}
	step := func(from uint64, up bool) (lo, hi uint64) {
		if up {
			return from, from + from*p.MarketStepPPM/1_000_000 + 1
		}
		return from - from*p.MarketStepPPM/1_000_000 - 1, from
	}
	prev := marketClass(t, c, ledger.CPUClass).IndexMicro
	var rose int
	epoch := ledger.GetEpoch(c.KV).Number
	for range 40 {
		c.ApplyBlock(t)
		m := marketClass(t, c, ledger.CPUClass)
		if e := ledger.GetEpoch(c.KV).Number; e != epoch {
			epoch = e
			lo, hi := step(prev, true)
			if m.IndexMicro < lo || m.IndexMicro > hi {
				t.Fatalf("epoch %d: u %d ppm, index %d → %d, want within [%d, %d]", e, m.LastPPM, prev, m.IndexMicro, lo, hi)
			}
			if m.IndexMicro > prev {
				rose++
			}
			prev = m.IndexMicro
		}
	}
	if rose < 5 {
		t.Fatalf("index rose in %d epochs of full use, want every one", rose)
	}
	high := prev
	for i := range 4 {
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgCancelJob{JobID: uint64(i + 1)})})
	}
	var fell int
	first := true // the epoch the jobs ended in was busy in part
	for range 400 {
		c.ApplyBlock(t)
		m := marketClass(t, c, ledger.CPUClass)
		if e := ledger.GetEpoch(c.KV).Number; e != epoch {
			epoch = e
			lo, hi := step(prev, false)
			if first {
				_, hi = step(prev, true)
				first = false
			}
			if m.IndexMicro < max(lo, p.MarketFloor*1_000_000) || m.IndexMicro > hi {
				t.Fatalf("idle epoch %d: index %d → %d, want within [%d, %d] and above the floor", e, prev, m.IndexMicro, lo, hi)
			}
			if m.IndexMicro < prev {
				fell++
			}
			prev = m.IndexMicro
		}
	}
	if fell < 5 || prev != p.MarketFloor*1_000_000 || high <= prev {
		t.Fatalf("idle: fell in %d epochs, index %d (floor %d, high %d)", fell, prev, p.MarketFloor*1_000_000, high)
	}
	info, err := ledger.Market(c.KV, ledger.CPUClass, 1000)
	if err != nil || len(info) != 1 || len(info[0].History) == 0 || len(info[0].History) > ledger.MarketHistoryEpochs {
		t.Fatalf("market query: %v, %+v", err, info)
	}
}

// TestTierPrices: a job pays max(ask, index × its tier's factor) per
// unit-hour, and waits with over_market when that is above its ceiling.
func TestTierPrices(t *testing.T) {
	c := marketChain(t, 8, func(p *ledger.Params) { p.MarketFloor = 100_000 }) // above the 36,000 ask
	for i, tc := range []struct {
		tier string
		want uint64 // per hour, 2 cores
	}{
		{ledger.TierSpot, 2 * 60_000},
		{"", 2 * 100_000},
		{ledger.TierOnDemand, 2 * 100_000},
		{ledger.TierPriority, 2 * 150_000},
	} {
		must(t, []ledger.TxResult{submit(t, c, cpuJob("tier", 2, 1_000_000, tc.tier))})
		j := job(t, c, uint64(i+1))
		if j.State != ledger.JobAssigned || j.Assignments[0].PricePerHour != tc.want {
			t.Errorf("tier %q: %s, price %v; want %d", tc.tier, j.State, j.Assignments, tc.want)
		}
	}
	q, err := ledger.QuoteJob(c.KV, ptr(cpuJob("cheap", 2, 150_000, "")))
	if err != nil || q.Code != ledger.QuoteOverMarket || q.Miss == nil || q.Miss.OverMarket == 0 || q.Miss.MarketPrice != 200_000 || q.Reason != "" {
		t.Fatalf("quote under the market: %v %+v miss %+v; want the market price 200000/h, no words (the API renders them)", err, q, q.Miss)
	}
	if len(q.Tiers) != 3 || q.Tiers[0].Tier != ledger.TierSpot || q.Tiers[0].PricePerHour != 120_000 || q.Tiers[0].Why != "index" {
		t.Errorf("tier quotes: %+v", q.Tiers)
	}
	must(t, []ledger.TxResult{submit(t, c, cpuJob("cheap", 2, 150_000, ""))})
	if j := job(t, c, 5); j.State != ledger.JobQueued || j.WaitCode != ledger.QuoteOverMarket {
		t.Fatalf("job under the market: %s %q (%s)", j.State, j.WaitCode, j.Reason)
	}
	if r := submit(t, c, cpuJob("bad", 1, 1_000_000, "gold")); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("unknown tier: %v", r.Err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestPriorityPlacedFirst: with one slot, the priority job submitted after
// an on-demand one gets it first. (Both are placed when it frees, the
// on-demand job beside the priority job's ungranted placement; the
// priority job's grant bumps it, and it waits for the next slot.)
func TestPriorityPlacedFirst(t *testing.T) {
	c := marketChain(t, 1, nil)
	must(t, []ledger.TxResult{submit(t, c, cpuJob("busy", 1, 1_000_000, ""))})
	grantStart(t, c, 1)
	must(t, []ledger.TxResult{submit(t, c, cpuJob("od", 1, 1_000_000, ""))})
	must(t, []ledger.TxResult{submit(t, c, cpuJob("prio", 1, 1_000_000, ledger.TierPriority))})
	if od, prio := job(t, c, 2), job(t, c, 3); prio.State != ledger.JobQueued || od.State != ledger.JobQueued {
		t.Fatalf("on-demand %s, priority %s; want both queued behind the granted job", od.State, prio.State)
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgCancelJob{JobID: 1})})
	prio := job(t, c, 3)
	if prio.State != ledger.JobAssigned {
		t.Fatalf("priority %s; want it placed", prio.State)
	}
	if od := job(t, c, 2); od.State == ledger.JobAssigned && od.Assignments[0].AssignedAt != prio.Assignments[0].AssignedAt {
		t.Fatalf("on-demand placed at %d, the priority job at %d", od.Assignments[0].AssignedAt, prio.Assignments[0].AssignedAt)
	}
	grantStart(t, c, 3)
	if od := job(t, c, 2); od.State != ledger.JobQueued || len(od.Assignments) != 0 || od.Attempts != 0 {
		t.Fatalf("on-demand after the priority job's grant: %s, %d assignments, %d attempts; want bumped back to the queue", od.State, len(od.Assignments), od.Attempts)
	}
}

// TestSpotPreemptedAndRequeued: a priority job that finds no free slot
// preempts a running spot job; after the grace the spot job is requeued
// (not failed, its attempt not counted), its provider paid for the
// seconds it ran and not slashed, and the priority job takes the slot.
func TestSpotPreemptedAndRequeued(t *testing.T) {
	c := marketChain(t, 1, nil)
	p, _ := ledger.GetParams(c.KV)
	must(t, []ledger.TxResult{submit(t, c, cpuJob("spot", 2, 1_000_000, ledger.TierSpot))})
	grantStart(t, c, 1)
	started := job(t, c, 1).Assignments[0].StartedAt
	c.Advance(100 * time.Second)
	earned := provider(t, c, prov1).Earned
	res := send(t, c, consumer, &ledger.MsgSubmitJob{Spec: cpuJob("prio", 2, 1_000_000, ledger.TierPriority), ConsumerKey: lt.AgeKey("consumer")})
	must(t, []ledger.TxResult{res})
	spot := job(t, c, 1)
	at := spot.Assignments[0].PreemptAt
	if at == 0 || at != c.Now().Unix()+int64(p.PreemptGraceSeconds) || spot.State != ledger.JobRunning {
		t.Fatalf("spot job after the priority submit: %s, preempt_at %d (%s)", spot.State, at, spot.Reason)
	}
	if prio := job(t, c, 2); prio.State != ledger.JobQueued || prio.PreemptWait != at {
		t.Fatalf("priority job: %s wait %d (%s)", prio.State, prio.PreemptWait, prio.Reason)
	}
	// Within the grace nothing moves, and no second spot job is wanted.
	c.ApplyBlock(t)
	if j := job(t, c, 1); j.State != ledger.JobRunning {
		t.Fatalf("spot job within the grace: %s", j.State)
	}
	c.Advance(time.Duration(p.PreemptGraceSeconds) * time.Second)
	c.ApplyBlock(t)
	// Requeued, the spot job waits (its attempt not counted): the freed
	// slot is the priority job's, whose placement waits there for its
	// key, and is not offered to a lower tier meanwhile (offer.go,
	// yieldsToHigherTier).
	spot, prio := job(t, c, 1), job(t, c, 2)
	if spot.State != ledger.JobQueued || spot.Preempted != 1 || spot.Attempts != 0 || len(spot.Assignments) != 0 {
		t.Fatalf("spot job after the grace: %s preempted %d attempts %d %+v (%s)", spot.State, spot.Preempted, spot.Attempts, spot.Assignments, spot.Reason)
	}
	if prio.State != ledger.JobAssigned || prio.Assignments[0].Provider != prov1.Addr {
		t.Fatalf("priority job after the grace: %s (%s)", prio.State, prio.Reason)
	}
	ran := uint64(c.Now().Unix() - started)
	want := 2 * 36_000 * ran / 3600 // spot at the floor pays the ask
	pr := provider(t, c, prov1)
	if got := pr.Earned - earned; got != want || pr.Slashed != 0 || pr.Invalid != 0 {
		t.Fatalf("provider paid %d for %ds (want %d), slashed %d, invalid %d", got, ran, want, pr.Slashed, pr.Invalid)
	}
	if spot.Escrow != ledger.JobEscrow(&spot.Spec, p) {
		t.Fatalf("requeued escrow %d, want a whole run's %d", spot.Escrow, ledger.JobEscrow(&spot.Spec, p))
	}
	// The priority job's grant takes the slot; the spot job waits on.
	grantStart(t, c, 2)
	spot = job(t, c, 1)
	if spot.State != ledger.JobQueued || spot.Attempts != 0 || len(spot.Assignments) != 0 {
		t.Fatalf("spot job after the priority job's grant: %s attempts %d %+v", spot.State, spot.Attempts, spot.Assignments)
	}
	if spot.Escrow != ledger.JobEscrow(&spot.Spec, p) {
		t.Fatalf("waiting escrow %d, want a whole run's %d", spot.Escrow, ledger.JobEscrow(&spot.Spec, p))
	}
	// When the priority job is done, the spot job runs again.
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgCancelJob{JobID: 2})})
	if j := job(t, c, 1); j.State != ledger.JobAssigned {
		t.Fatalf("spot job after the priority job: %s (%s)", j.State, j.Reason)
	}
}

// TestMarketProperties runs random market sequences: jobs of every tier,
// run, cancelled or left to time out, providers coming and going, and a
// wash trader renting its own provider under another address. After every
// block ledgertest checks the invariants (supply = genesis + minted −
// burned, and every balance adds up); after every epoch each index is
// within its floor and ceiling; at the end the wash trader holds less than
// it started with: rewards never repay the fees.
func TestMarketProperties(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	var washRewarded uint64
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 14))
		washProv, washCons := lt.NewKey("wash-prov"), lt.NewKey("wash-cons")
		g := lt.Genesis(100_000_000_000, "consumer", "prov1", "prov2", "prov3", "wash-prov", "wash-cons")
		g.Params.LivenessRatePPM = 0
		// The walk lets minutes pass between a placement and its grant;
		// the market, not the grant window, is under test.
		g.Params.JobGrantTimeout = 120
		g.Params.EpochBlocks = uint64(3 + r.IntN(5))
		g.Params.EmissionTarget = 1_000_000_000_000 // the fee cap binds
		g.Params.FeeBurnPPM = uint64(r.IntN(300_000))
		g.Params.ProtocolFeeBps = uint64(50 + r.IntN(500))
		g.Params.MarketFloor = uint64(1 + r.IntN(50_000))
		g.Params.MarketCeiling = g.Params.MarketFloor * uint64(2+r.IntN(20))
		g.Params.MarketTargetPPM = uint64(100_000 + r.IntN(800_000))
		c := lt.NewChain(t, g)
		p, _ := ledger.GetParams(c.KV)
		for i, k := range []lt.Key{prov1, prov2} {
			info := lt.ProviderInfo("", 0, uint64(20_000*(i+1)))
			info.MaxJobs = 2
			must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: info})})
			must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: 10_000_000})})
		}
		// The wash trader's provider offers a GPU class no one else has,
		// and only it, so that only its own jobs reach it.
		wi := lt.ProviderInfo("WASH_GPU", 2, 1_000)
		wi.Asks = wi.Asks[:1]
		must(t, []ledger.TxResult{send(t, c, washProv, &ledger.MsgRegisterProvider{ProviderInfo: wi})})
		must(t, []ledger.TxResult{send(t, c, washProv, &ledger.MsgStake{Amount: 200_000_000})})
		wealth := func() uint64 {
			return c.Balance(t, washProv.Addr) + c.Balance(t, washCons.Addr) + provider(t, c, washProv).Stake
		}
		start := wealth()
		keys := map[string]lt.Key{prov1.Addr.String(): prov1, prov2.Addr.String(): prov2, washProv.Addr.String(): washProv}
		var washFees uint64
		epoch := ledger.GetEpoch(c.KV).Number
		checkIndexes := func() {
			if e := ledger.GetEpoch(c.KV).Number; e == epoch {
				return
			}
			epoch = ledger.GetEpoch(c.KV).Number
			ms, err := ledger.Market(c.KV, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if m.IndexMicro < p.MarketFloor*1_000_000 || m.IndexMicro > p.MarketCeiling*1_000_000 {
					t.Fatalf("seed %d: class %s index %d outside [%d, %d]", seed, m.Class, m.IndexMicro, p.MarketFloor, p.MarketCeiling)
				}
			}
		}
		var live []uint64
		next := uint64(1)
		for range 150 {
			switch r.IntN(6) {
			case 0, 1: // an honest job
				tier := ledger.Tiers[r.IntN(3)]
				res := send(t, c, consumer, &ledger.MsgSubmitJob{Spec: cpuJob("honest", uint64(1+r.IntN(2)), uint64(50_000+r.IntN(3_000_000)), tier), ConsumerKey: lt.AgeKey("consumer")})
				if res.Err == nil {
					live = append(live, next)
					next++
				}
			case 2: // a wash trade
				s := lt.WasmJob("wash", uint64(2_000+r.IntN(100_000)), 3600)
				s.GPUCount, s.GPUModels = 2, []string{"WASH_GPU"}
				res := send(t, c, washCons, &ledger.MsgSubmitJob{Spec: s, ConsumerKey: lt.AgeKey("wash")})
				if res.Err == nil {
					live = append(live, next)
					next++
				}
			case 3, 5: // move a job along
				live = slices.DeleteFunc(live, func(id uint64) bool { return job(t, c, id).Done() })
				if len(live) == 0 {
					continue
				}
				id := live[r.IntN(len(live))]
				j := job(t, c, id)
				owner := consumer
				if j.Owner == washCons.Addr {
					owner = washCons
				}
				switch {
				case j.Done() || len(j.Assignments) == 0:
				case j.Assignments[0].KeyGrant == nil:
					send(t, c, owner, &ledger.MsgGrantKey{JobID: id, Grants: []ledger.Grant{{Provider: j.Assignments[0].Provider, WrappedKey: []byte("k")}}})
				case j.Assignments[0].StartedAt == 0:
					send(t, c, keys[j.Assignments[0].Provider.String()], &ledger.MsgStartJob{JobID: id})
				default:
					secs := uint64(1 + r.IntN(600))
					c.Advance(time.Duration(secs) * time.Second)
					send(t, c, keys[j.Assignments[0].Provider.String()], &ledger.MsgCommitResult{JobID: id, MeteredSeconds: secs, Result: &ledger.JobResult{
						ManifestHash: ledger.Hash{1}, OutputBlob: "sha256:" + strings.Repeat("cd", 32), MeteredSeconds: secs}})
				}
			case 4: // time passes
				c.Advance(time.Duration(r.IntN(300)) * time.Second)
				c.ApplyBlock(t)
			}
			checkIndexes()
		}
		for range 3 * p.EpochBlocks {
			c.ApplyBlock(t)
			checkIndexes()
		}
		// What the wash trader paid in fees, and what it was given back.
		for id := uint64(1); id < next; id++ {
			if j := job(t, c, id); j.Owner == washCons.Addr {
				washFees += j.Fee
			}
		}
		if w := ledger.GetRewardWork(c.KV, washProv.Addr); w.Work > 0 && w.Epoch < ledger.GetEpoch(c.KV).Number {
			send(t, c, washProv, &ledger.MsgClaimRewards{})
		}
		rewarded := ledger.GetRewardWork(c.KV, washProv.Addr).Rewarded
		if end := wealth(); washFees > 0 && end >= start {
			t.Fatalf("seed %d: wash trader paid %d in fees, got %d in rewards, and went from %d to %d", seed, washFees, rewarded, start, end)
		}
		if rewarded >= washFees && washFees > 0 {
			t.Fatalf("seed %d: wash trader's rewards %d >= its fees %d", seed, rewarded, washFees)
		}
		t.Logf("seed %d: %d blocks, minted %d, burned %d, wash fees %d, wash rewards %d", seed, c.Height, ledger.Minted(c.KV), ledger.Burned(c.KV), washFees, rewarded)
		washRewarded += rewarded
	}
	if washRewarded == 0 {
		t.Fatal("no seed rewarded the wash trader at all: the sequences do not test the cap")
	}
}
