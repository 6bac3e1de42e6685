package ledger_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// teeMarketFloor is teeMarketChain's index floor, above every ask, so that
// the indexes set the prices.
const teeMarketFloor = 100_000

// teeMarketChain is teeChain (prov1 and prov2, 16 cores each, asking
// 36,000 and 72,000 usync per core-hour) with prov3 like prov1, epochs of
// 5 blocks, no smoothing, a target of 50% and the floor at
// teeMarketFloor; prov2 is attested.
func teeMarketChain(t *testing.T) (*lt.Chain, *ledger.Attestation) {
	t.Helper()
	c := teeChain(t, func(g *ledger.Genesis) {
		g.Params.EpochBlocks = 5
		g.Params.MarketTargetPPM = 500_000
		g.Params.MarketSmoothingPPM = 1_000_000
		g.Params.MarketFloor = teeMarketFloor
	})
	pi := lt.ProviderInfo("", 0, 36_000)
	pi.EncryptionKey = lt.AgeKey(prov3.Addr.String())
	must(t, []ledger.TxResult{send(t, c, prov3, &ledger.MsgRegisterProvider{ProviderInfo: pi})})
	must(t, []ledger.TxResult{send(t, c, prov3, &ledger.MsgStake{Amount: 10_000_000})})
	return c, attestNow(t, c, prov2)
}

// teeCPUJob is a trust: tee job of cores cores, ceiling high enough for
// any index these tests reach.
func teeCPUJob(name string, cores uint64) ledger.JobSpec {
	s := cpuJob(name, cores, 100_000_000, "")
	s.Trust = ledger.TrustTEE
	return s
}

// cpuMarket is the cpu class's market as the query answers it.
func cpuMarket(t *testing.T, c *lt.Chain) ledger.MarketInfo {
	t.Helper()
	ms, err := ledger.Market(c.KV, ledger.CPUClass, 0)
	if err != nil || len(ms) != 1 {
		t.Fatalf("market of cpu: %v, %+v", err, ms)
	}
	return ms[0]
}

// TestTEEMarketRisesAlone: trust: tee jobs that fill the one attested
// provider make the cpu class's TEE market full while the plain market,
// with three providers' cores, stays under its target: the TEE index
// rises every epoch and the plain index stays at the floor. A trust: tee
// job then pays the TEE index price (quote and placement), a plain job
// the plain one.
func TestTEEMarketRisesAlone(t *testing.T) {
	c, _ := teeMarketChain(t)
	m := cpuMarket(t, c)
	if m.TEE == nil || m.TEE.OfferedUnits != 16 || m.TEE.ReservedUnits != 0 || m.OfferedUnits != 48 {
		t.Fatalf("attested prov2: market %+v, tee %+v; want 48 plain and 16 attested cores offered", m, m.TEE)
	}
	for i := range 4 {
		must(t, []ledger.TxResult{submit(t, c, teeCPUJob("tee", 4))})
		j := job(t, c, uint64(i+1))
		if j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov2.Addr {
			t.Fatalf("tee job %d: %s on %v, want assigned to the attested prov2", j.ID, j.State, j.Assignments)
		}
		grantStart(t, c, j.ID)
	}
	m = cpuMarket(t, c)
	if m.ReservedUnits != 16 || m.TEE.ReservedUnits != 16 || m.TEE.OfferedUnits != 16 {
		t.Fatalf("counts: plain %d of %d, tee %d of %d reserved; want 16 of 48 and 16 of 16", m.ReservedUnits, m.OfferedUnits, m.TEE.ReservedUnits, m.TEE.OfferedUnits)
	}
	floor := uint64(teeMarketFloor * 1_000_000)
	epoch, rose := ledger.GetEpoch(c.KV).Number, 0
	prev := m.TEE.IndexMicro
	for range 30 {
		c.ApplyBlock(t)
		if e := ledger.GetEpoch(c.KV).Number; e != epoch {
			epoch = e
			m = cpuMarket(t, c)
			if m.IndexMicro != floor {
				t.Fatalf("epoch %d: plain index %d (utilisation %d ppm), want the floor %d", e, m.IndexMicro, m.UtilisationPPM, floor)
			}
			if m.TEE.IndexMicro > prev {
				rose++
			}
			prev = m.TEE.IndexMicro
		}
	}
	if rose < 5 || m.TEE.UtilisationPPM != 1_000_000 {
		t.Fatalf("TEE index rose in %d epochs (utilisation %d ppm, index %d), want every one at 100%%", rose, m.TEE.UtilisationPPM, m.TEE.IndexMicro)
	}
	p, err := ledger.GetParams(c.KV)
	if err != nil {
		t.Fatal(err)
	}
	teePrice := m.TEE.IndexMicro * p.TierOnDemandPPM / 1_000_000 / 1_000_000
	plainPrice := m.IndexMicro * p.TierOnDemandPPM / 1_000_000 / 1_000_000
	if i := slices.IndexFunc(m.TEE.Prices, func(tp ledger.TierPrice) bool { return tp.Tier == ledger.TierOnDemand }); i < 0 || m.TEE.Prices[i].PricePerHour != teePrice {
		t.Fatalf("query's TEE prices %+v, want on-demand at %d", m.TEE.Prices, teePrice)
	}

	// Quotes: a trust: tee spec at the TEE index, a plain one at the plain.
	spec := teeCPUJob("q", 4)
	q, err := ledger.QuoteJobAt(c.KV, &spec, c.Now())
	if err != nil {
		t.Fatal(err)
	}
	qt := q.Tiers[slices.IndexFunc(q.Tiers, func(qt ledger.QuoteTier) bool { return qt.Tier == ledger.TierOnDemand })]
	if qt.TEEIndex != teePrice || qt.Market != teePrice*4 || qt.Why != "index" {
		t.Fatalf("quote of a tee job: %+v, want tee index %d, market %d", qt, teePrice, teePrice*4)
	}
	plain := cpuJob("q", 4, 100_000_000, "")
	if q, err = ledger.QuoteJobAt(c.KV, &plain, c.Now()); err != nil {
		t.Fatal(err)
	}
	qt = q.Tiers[slices.IndexFunc(q.Tiers, func(qt ledger.QuoteTier) bool { return qt.Tier == ledger.TierOnDemand })]
	if qt.TEEIndex != 0 || qt.Market != plainPrice*4 {
		t.Fatalf("quote of a plain job: %+v, want market %d", qt, plainPrice*4)
	}

	// Placement: a tee job that takes a freed slot pays the TEE price, a
	// plain job the plain one.
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgCancelJob{JobID: 1})})
	must(t, []ledger.TxResult{submit(t, c, teeCPUJob("tee-late", 4))})
	j := job(t, c, 5)
	if j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov2.Addr || j.Assignments[0].PricePerHour != teePrice*4 {
		t.Fatalf("tee job after the rise: %s on %+v, want prov2 at %d/h", j.State, j.Assignments, teePrice*4)
	}
	must(t, []ledger.TxResult{submit(t, c, cpuJob("plain", 4, 100_000_000, ""))})
	if j := job(t, c, 6); j.State != ledger.JobAssigned || j.Assignments[0].PricePerHour != plainPrice*4 {
		t.Fatalf("plain job: %s on %+v, want %d/h", j.State, j.Assignments, plainPrice*4)
	}
	if teePrice <= plainPrice {
		t.Fatalf("TEE price %d not above the plain %d", teePrice, plainPrice)
	}
}

// TestTEEPriceNotBelowPlain: when the plain market is the busier one, a
// trust: tee job pays the plain index price, never the lower TEE one.
func TestTEEPriceNotBelowPlain(t *testing.T) {
	c, _ := teeMarketChain(t)
	for i := range 4 { // prov1 and prov3 full of plain jobs, prov2 idle
		must(t, []ledger.TxResult{submit(t, c, cpuJob("plain", 4, 100_000_000, ""))})
		grantStart(t, c, uint64(i+1))
	}
	for range 4 {
		must(t, []ledger.TxResult{submit(t, c, cpuJob("plain", 4, 100_000_000, ""))})
	}
	for range 20 {
		c.ApplyBlock(t)
	}
	m := cpuMarket(t, c)
	if m.TEE == nil || m.TEE.IndexMicro >= m.IndexMicro {
		t.Fatalf("plain index %d, TEE index %+v: want the plain one higher", m.IndexMicro, m.TEE)
	}
	p, _ := ledger.GetParams(c.KV)
	plainPrice := m.IndexMicro * p.TierOnDemandPPM / 1_000_000 / 1_000_000
	for _, tp := range m.TEE.Prices {
		if tp.Tier == ledger.TierOnDemand && tp.PricePerHour != plainPrice {
			t.Fatalf("TEE on-demand price %d, want the plain %d", tp.PricePerHour, plainPrice)
		}
	}
	spec := teeCPUJob("q", 4)
	q, err := ledger.QuoteJobAt(c.KV, &spec, c.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, qt := range q.Tiers {
		if qt.Tier == ledger.TierOnDemand && qt.Market != plainPrice*4 {
			t.Fatalf("tee quote %+v, want market %d", qt, plainPrice*4)
		}
	}
}

// TestTEEAttestationLapses: the first block at or after an attestation's
// expiry lapses it: the provider's cores leave the TEE market (the plain
// one keeps them), and new evidence brings them back.
func TestTEEAttestationLapses(t *testing.T) {
	c := teeChain(t, func(g *ledger.Genesis) { g.Params.AttestMaxValidity = 600 })
	a := attestNow(t, c, prov2)
	c.ApplyBlock(t)
	if m := cpuMarket(t, c); m.TEE == nil || m.TEE.OfferedUnits != 16 {
		t.Fatalf("attested: TEE market %+v, want 16 cores offered", m.TEE)
	}
	c.Advance(time.Duration(a.Expiry-c.Now().Unix()-10) * time.Second)
	c.ApplyBlock(t)
	if p := provider(t, c, prov2); p.TEE.Lapsed || cpuMarket(t, c).TEE.OfferedUnits != 16 {
		t.Fatalf("before the expiry: lapsed %v, TEE market %+v", p.TEE.Lapsed, cpuMarket(t, c).TEE)
	}
	c.Advance(10 * time.Second)
	c.ApplyBlock(t)
	if !slices.ContainsFunc(c.Events, func(e ledger.Event) bool { return e.Type == "attestation_lapsed" }) {
		t.Fatalf("the block after the expiry has no attestation_lapsed event: %+v", c.Events)
	}
	if p := provider(t, c, prov2); !p.TEE.Lapsed || p.AttestedAt(c.Now().Unix()) {
		t.Fatalf("after the expiry: %+v", p.TEE)
	}
	if m := cpuMarket(t, c); m.TEE.OfferedUnits != 0 || m.OfferedUnits != 32 {
		t.Fatalf("after the expiry: plain %d, TEE %d cores offered; want 32 and 0", m.OfferedUnits, m.TEE.OfferedUnits)
	}
	if p := attestNow(t, c, prov2); p.Lapsed {
		t.Fatalf("renewed attestation lapsed: %+v", p)
	}
	if m := cpuMarket(t, c); m.TEE.OfferedUnits != 16 {
		t.Fatalf("renewed: TEE market %+v, want 16 cores offered", m.TEE)
	}
}
