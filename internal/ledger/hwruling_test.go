package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// The rulings of issue 26 (docs/challenge.md, "Rulings"): slow is not a
// lie. Each test drives the real ledger with real proofs of small plans
// (a 200-GOPS claim, a 5-ms target: 10⁹ operations) and chooses when the
// commit lands, as a device of a given real throughput would.

const rulingClaim = 200 // GOPS

// rulingChain has prov1 claiming rulingClaim on its CPU, challenged as soon
// as it is online; the deadline is in the default's proportions (a 3-ms
// allowance for a 5-ms target, as 6 s is for 10 s).
func rulingChain(t *testing.T, tune func(*ledger.Params)) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "prov1")
	g.Params.LivenessRatePPM = 0
	g.Params.HWTargetMillis = 5
	g.Params.HWAllowanceMillis = 3
	g.Params.HWRatePPM = 1_000_000
	if tune != nil {
		tune(&g.Params)
	}
	c := lt.NewChain(t, g)
	info := lt.ProviderInfo("", 0, 36_000)
	info.Measured.Int8GOPS = rulingClaim
	// One block, so that the first challenge is issued to a staked
	// provider and no test starts with a miss.
	must(t, c.ApplyBlock(t, prov1.Tx(lt.ChainID, 0, 0, &ledger.MsgRegisterProvider{ProviderInfo: info}), prov1.Tx(lt.ChainID, 1, 0, &ledger.MsgStake{Amount: stake})))
	if p := provider(t, c, prov1); p.Challenges.Passed+p.Challenges.Late+p.Challenges.Missed+p.Challenges.Failed != 0 || p.HWChallenge == nil {
		t.Fatalf("a new provider's record: %+v, open %+v", p.Challenges, p.HWChallenge)
	}
	return c
}

// plan is the plan of the open challenge.
func plan(t *testing.T, c *lt.Chain, hc *ledger.HardwareChallenge) challenge.Plan {
	t.Helper()
	p, err := ledger.GetParams(c.KV)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := challenge.NewPlan(hc.ClaimedGOPS, challengeParams(p))
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// answerAs answers the open challenge as a device doing 1/slowdown of
// its claim would: the commit lands slowdown × the plan's compute time
// × 1.1 (expansion and hashing) after the challenge, plus 1 ms of block
// latency, and the opening is correct (or tampered with).
func answerAs(t *testing.T, c *lt.Chain, slowdown float64, tamper bool) *ledger.HardwareChallenge {
	t.Helper()
	ch, hc := hwChallengeOf(t, c)
	pl := plan(t, c, hc)
	cm, err := (&prove.CPU{}).Commit(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	elapsed := time.Duration(slowdown*1.1*float64(pl.ComputeMillis)*float64(time.Millisecond)) + time.Millisecond
	// The next block, which carries the commit, is at BlockTime(h+1) +
	// Offset.
	c.Offset = time.UnixMilli(hc.IssuedAt).Add(elapsed).Sub(lt.BlockTime(c.Height + 1))
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgChallengeCommit{Root: cm.Root()})})
	if got := c.Now().UnixMilli() - hc.IssuedAt; got != elapsed.Milliseconds() {
		t.Fatalf("commit landed %d ms after the challenge, want %d", got, elapsed.Milliseconds())
	}
	must(t, []ledger.TxResult{open(t, c, cm, tamper)})
	return hc
}

// nextChallenge applies empty blocks, each d later, until prov1 has a
// challenge again, at most n of them.
func nextChallenge(t *testing.T, c *lt.Chain, d time.Duration, n int) *ledger.HardwareChallenge {
	t.Helper()
	for range n {
		if hc := provider(t, c, prov1).HWChallenge; hc != nil {
			return hc
		}
		c.Advance(d - time.Second) // blocks are a second apart
		c.ApplyBlock(t)
	}
	return provider(t, c, prov1).HWChallenge
}

func TestRulingLateCorrectMeasuresAndRechecksSoon(t *testing.T) {
	c := rulingChain(t, nil)
	before := provider(t, c, prov1)
	answerAs(t, c, 3, false) // honest, but its machine was busy: 3× slower
	p := provider(t, c, prov1)
	if p.Slashed != 0 || p.Stake != stake || p.Challenges.Failed != 0 || p.Challenges.Late != 1 || p.Challenges.Passed != 0 {
		t.Fatalf("late but correct: slashed %d stake %d record %+v", p.Slashed, p.Stake, p.Challenges)
	}
	r := p.DeviceRuling(0)
	if !r.Proven || r.ProvenGOPS == 0 || r.ProvenGOPS > rulingClaim/3 || !r.Recheck || r.Strikes != 0 {
		t.Fatalf("CPU ruling %+v, want proven at what it showed (≤ %d) and a recheck", r, rulingClaim/3)
	}
	if p.EffectiveGOPS() != r.ProvenGOPS {
		t.Fatalf("effective %d, want the shown %d", p.EffectiveGOPS(), r.ProvenGOPS)
	}
	if want := before.Reputation - before.Reputation/20; p.Reputation != want {
		t.Fatalf("reputation %d → %d, want a twentieth less (%d)", before.Reputation, p.Reputation, want)
	}
	// Checked again soon (TestRecheckGap checks the gap itself).
	if next := nextChallenge(t, c, time.Minute, 3); next == nil {
		t.Fatal("no challenge after a late proof")
	}
	// Passing it restores the claim and ends the recheck.
	answerAs(t, c, 1, false)
	p = provider(t, c, prov1)
	if r := p.DeviceRuling(0); r.ProvenGOPS != rulingClaim || r.Recheck || p.Challenges.Passed != 1 || p.Slashed != 0 {
		t.Fatalf("after passing the recheck: ruling %+v record %+v", r, p.Challenges)
	}
	// Offers show the share passed in time: the late one counts against it.
	if got := p.ChallengePassRatePPM(); got != 500_000 {
		t.Fatalf("pass rate %d ppm after one late and one passed, want 500000: %+v", got, p.Challenges)
	}
}

// longWindows gives a challenge a 5-s deadline (a 50-s late window), so
// that the ledgertest's one-second blocks do not miss it on their own.
func longWindows(p *ledger.Params) { p.HWAllowanceMillis = 5_000 }

func TestRulingMissedOnceNotSlashed(t *testing.T) {
	c := rulingChain(t, longWindows)
	before := provider(t, c, prov1)
	_, hc := hwChallengeOf(t, c)
	c.Advance(pastLateWindow(hc))
	c.ApplyBlock(t)
	p := provider(t, c, prov1)
	if p.Slashed != 0 || p.Stake != stake || p.Challenges.Missed != 1 || p.Challenges.MissesInARow != 1 || p.Challenges.Failed != 0 {
		t.Fatalf("one miss: slashed %d record %+v", p.Slashed, p.Challenges)
	}
	if r := p.DeviceRuling(0); !r.Proven || r.ProvenGOPS != 0 || !r.Recheck {
		t.Fatalf("after a miss the CPU ruling is %+v, want counted 0 and rechecked", r)
	}
	if want := before.Reputation - before.Reputation/5; p.Reputation != want {
		t.Fatalf("reputation %d → %d, want a fifth less (%d)", before.Reputation, p.Reputation, want)
	}
}

// TestRulingMissedRepeatedlySlashed: hw_miss_limit misses in a row are
// slashed; a correct proof between them starts the count over.
func TestRulingMissedRepeatedlySlashed(t *testing.T) {
	c := rulingChain(t, longWindows)
	miss := func() {
		t.Helper()
		hc := nextChallenge(t, c, time.Minute, 3)
		if hc == nil {
			t.Fatal("no challenge to miss")
		}
		c.Advance(pastLateWindow(hc))
		c.ApplyBlock(t)
	}
	miss()
	miss()
	nextChallenge(t, c, time.Minute, 3)
	answerAs(t, c, 1000, false) // late (past the 5-s deadline) but correct: the run of misses ends
	miss()
	miss()
	p := provider(t, c, prov1)
	if p.Slashed != 0 || p.Challenges.Missed != 4 || p.Challenges.MissesInARow != 2 || p.Challenges.Late != 1 {
		t.Fatalf("two runs of two misses: slashed %d record %+v", p.Slashed, p.Challenges)
	}
	miss()
	p = provider(t, c, prov1)
	if p.Slashed != stake/10 || p.Challenges.Failed != 1 || p.Challenges.MissesInARow != 0 ||
		(p.Challenges.LastFail == nil || p.Challenges.LastFail.Code != ledger.ChallengeMissLimit || p.Challenges.LastFail.Misses != 3) {
		t.Fatalf("the third miss in a row: slashed %d record %+v", p.Slashed, p.Challenges)
	}
}

func TestRulingWrongOpeningSlashedAtOnce(t *testing.T) {
	c := rulingChain(t, nil)
	answerAs(t, c, 1, true)
	p := provider(t, c, prov1)
	if p.Slashed != stake/10 || p.Challenges.Failed != 1 || p.EffectiveGOPS() != 0 || (p.Challenges.LastFail == nil || p.Challenges.LastFail.Code != ledger.ChallengeWrongOpening) {
		t.Fatalf("wrong opening: slashed %d effective %d record %+v", p.Slashed, p.EffectiveGOPS(), p.Challenges)
	}
	// Late and wrong is wrong: slashed too.
	c = rulingChain(t, nil)
	answerAs(t, c, 4, true)
	if p := provider(t, c, prov1); p.Slashed != stake/10 || p.Challenges.Late != 0 {
		t.Fatalf("late and wrong: slashed %d record %+v", p.Slashed, p.Challenges)
	}
}

// TestRulingOverclaim: a device that does 1/k of its claim is caught on
// its first challenge (it counts at most what it does from then on) and,
// within the overclaim factor, never slashed, however often it is checked.
// An honest device slowed k times by load is ruled alike.
func TestRulingOverclaim(t *testing.T) {
	for _, k := range []float64{2, 10, 60} {
		c := rulingChain(t, nil)
		for i := range 3 {
			if nextChallenge(t, c, time.Minute, 3) == nil {
				t.Fatalf("%g×: no challenge %d", k, i+1)
			}
			answerAs(t, c, k, false)
			p := provider(t, c, prov1)
			if real := uint64(rulingClaim / k); p.EffectiveGOPS() > real || p.EffectiveGOPS() == 0 {
				t.Fatalf("%g× overclaim, challenge %d: counts %d GOPS, its real rate is %d", k, i+1, p.EffectiveGOPS(), real)
			}
			if p.Slashed != 0 || p.DeviceRuling(0).Strikes != 0 || p.Challenges.Late != uint64(i+1) {
				t.Fatalf("%g× overclaim, challenge %d: slashed %d record %+v", k, i+1, p.Slashed, p.Challenges)
			}
		}
	}
}

// TestRulingFarOverclaimSlashedTheSecondTime: a device shown twice in a
// row to do less than 1/hw_overclaim_factor of its claim is slashed; a
// proof in time between two such strikes clears the first.
func TestRulingFarOverclaimSlashedTheSecondTime(t *testing.T) {
	c := rulingChain(t, func(p *ledger.Params) { p.HWLateFactor = 100 })
	answerAs(t, c, 150, false)
	p := provider(t, c, prov1)
	if p.Slashed != 0 || p.DeviceRuling(0).Strikes != 1 {
		t.Fatalf("first 150× proof: slashed %d ruling %+v", p.Slashed, p.DeviceRuling(0))
	}
	nextChallenge(t, c, time.Minute, 3)
	answerAs(t, c, 1, false) // in time: the strike is cleared
	nextChallenge(t, c, time.Minute, 3)
	answerAs(t, c, 150, false)
	if p := provider(t, c, prov1); p.Slashed != 0 || p.DeviceRuling(0).Strikes != 1 {
		t.Fatalf("a strike after a pass: slashed %d ruling %+v", p.Slashed, p.DeviceRuling(0))
	}
	nextChallenge(t, c, time.Minute, 3)
	answerAs(t, c, 150, false)
	p = provider(t, c, prov1)
	if p.Slashed != stake/10 || p.Challenges.Failed != 1 || (p.Challenges.LastFail == nil || p.Challenges.LastFail.Code != ledger.ChallengeOverclaim || p.Challenges.LastFail.Factor != 100 || p.Challenges.LastFail.ShownGOPS*100 >= p.Challenges.LastFail.ClaimedGOPS) {
		t.Fatalf("second strike in a row: slashed %d record %+v", p.Slashed, p.Challenges)
	}
	if r := p.DeviceRuling(0); r.ProvenGOPS == 0 || r.ProvenGOPS > rulingClaim/150 || r.Strikes != 0 {
		t.Fatalf("after the slash the CPU ruling is %+v, want what it showed and the strikes spent", r)
	}
}

// TestLaterParamsKeepTheStoredState: the rulings' parameters at their
// defaults are left out of chain/params, so a chain from before them
// hashes as it did; a chain that sets one stores it.
func TestLaterParamsKeepTheStoredState(t *testing.T) {
	c := lt.NewChain(t, lt.Genesis(1, "alice"))
	if b := string(c.KV.Get([]byte("chain/params"))); strings.Contains(b, "hw_late_factor") || strings.Contains(b, "hw_miss_limit") {
		t.Fatalf("defaults stored: %s", b)
	}
	p, err := ledger.GetParams(c.KV)
	if err != nil {
		t.Fatal(err)
	}
	d := ledger.DefaultParams()
	if p.HWLateFactor != d.HWLateFactor || p.HWOverclaimFactor != d.HWOverclaimFactor || p.HWMissLimit != d.HWMissLimit || p.HWRecheckPermille != d.HWRecheckPermille {
		t.Fatalf("read back %+v", p)
	}
	g := lt.Genesis(1, "alice")
	g.Params.HWMissLimit = 5
	c = lt.NewChain(t, g)
	if p, _ := ledger.GetParams(c.KV); p.HWMissLimit != 5 || !strings.Contains(string(c.KV.Get([]byte("chain/params"))), `"hw_miss_limit":5`) {
		t.Fatalf("a set hw_miss_limit not stored: %+v", p)
	}
}
