package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// hwChain has one staked CPU provider claiming gops int8 GOPS, challenged
// as soon as it is online, with challenges of about 100 ms.
func hwChain(t *testing.T, gops uint64) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "prov1")
	g.Params.LivenessRatePPM = 0
	g.Params.HWTargetMillis = 100
	g.Params.HWAllowanceMillis = 5_000
	g.Params.HWRatePPM = 1_000_000 // drawn as soon as it is online
	c := lt.NewChain(t, g)
	info := lt.ProviderInfo("", 0, 36_000)
	info.Measured.Int8GOPS = gops
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: info})})
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStake{Amount: stake})})
	if provider(t, c, prov1).HWChallenge == nil {
		t.Fatal("no hardware challenge issued")
	}
	return c
}

func hwChallengeOf(t *testing.T, c *lt.Chain) (challenge.Challenge, *ledger.HardwareChallenge) {
	t.Helper()
	hc := provider(t, c, prov1).HWChallenge
	if hc == nil {
		t.Fatal("no open challenge")
	}
	return challenge.Challenge{Seed: hc.Seed, Size: challenge.Size{N: int(hc.N), K: int(hc.K), M: int(hc.M)}, Openings: challenge.DefaultOpenings}, hc
}

// prove computes the challenge with the real CPU prover and commits at
// block time +after.
func proveAndCommit(t *testing.T, c *lt.Chain, after time.Duration) prove.Commitment {
	t.Helper()
	ch, _ := hwChallengeOf(t, c)
	cm, err := (&prove.CPU{}).Commit(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(after)
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgChallengeCommit{Root: cm.Root()})})
	return cm
}

func open(t *testing.T, c *lt.Chain, cm prove.Commitment, tamper bool) ledger.TxResult {
	t.Helper()
	c.ApplyBlock(t) // the block after the commit brings the randomness
	hc := provider(t, c, prov1).HWChallenge
	if hc == nil || hc.Randomness == nil {
		t.Fatalf("no randomness for the committed challenge: %+v", hc)
	}
	op, err := cm.Open(context.Background(), *hc.Randomness)
	if err != nil {
		t.Fatal(err)
	}
	if tamper {
		op.Leaves[len(op.Leaves)/2].Entries[3]++
	}
	b, err := op.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return send(t, c, prov1, &ledger.MsgChallengeOpen{Opening: b})
}

func TestHardwareChallengePassed(t *testing.T) {
	c := hwChain(t, 2)
	cm := proveAndCommit(t, c, 500*time.Millisecond)
	must(t, []ledger.TxResult{open(t, c, cm, false)})
	p := provider(t, c, prov1)
	if p.HWChallenge != nil || p.Challenges.Passed != 1 || p.Challenges.Failed != 0 || p.Slashed != 0 || p.Stake != stake {
		t.Fatalf("after an honest challenge: %+v", p.Challenges)
	}
	if !p.Challenges.Proven || p.EffectiveGOPS() != 2 {
		t.Fatalf("claim not proven: %+v effective %d", p.Challenges, p.EffectiveGOPS())
	}
	// The gap keeps it from being challenged again at once.
	c.ApplyBlock(t)
	if provider(t, c, prov1).HWChallenge != nil {
		t.Fatal("challenged again within the minimum gap")
	}
}

func TestHardwareChallengeWrongOpeningSlashed(t *testing.T) {
	c := hwChain(t, 2)
	cm := proveAndCommit(t, c, 500*time.Millisecond)
	must(t, []ledger.TxResult{open(t, c, cm, true)})
	p := provider(t, c, prov1)
	want := uint64(stake) / 10
	if p.Challenges.Failed != 1 || p.Slashed != want || p.Stake != stake-want || (p.Challenges.LastFail == nil || p.Challenges.LastFail.Code != ledger.ChallengeWrongOpening || p.Challenges.LastFail.Cause == "" || p.Challenges.LastFailure != "") {
		t.Fatalf("after a wrong opening: slashed %d stake %d record %+v", p.Slashed, p.Stake, p.Challenges)
	}
	if p.EffectiveGOPS() != 0 {
		t.Fatalf("a failed challenge left %d GOPS", p.EffectiveGOPS())
	}
}

// TestHardwareChallengeOverclaimLate: a provider that claims more than it
// has commits after the deadline: not slashed (slow is not a lie), and the
// throughput its late commit shows replaces the claim.
func TestHardwareChallengeOverclaimLate(t *testing.T) {
	c := hwChain(t, 2)
	_, hc := hwChallengeOf(t, c)
	late := time.Duration(hc.Deadline-hc.IssuedAt+1_000) * time.Millisecond
	cm := proveAndCommit(t, c, late)
	must(t, []ledger.TxResult{open(t, c, cm, false)})
	p := provider(t, c, prov1)
	if p.Challenges.Late != 1 || p.Challenges.Failed != 0 || p.Slashed != 0 || p.Stake != stake {
		t.Fatalf("late commit: %+v slashed %d", p.Challenges, p.Slashed)
	}
	if g := p.EffectiveGOPS(); g == 0 || g >= 2 {
		t.Fatalf("effective throughput %d after a late commit, want the shown figure (0 < x < 2)", g)
	}
}

func TestHardwareChallengeMissed(t *testing.T) {
	c := hwChain(t, 2)
	_, hc := hwChallengeOf(t, c)
	c.Advance(pastLateWindow(hc))
	// A commit in a block after the late window is refused; the block
	// rules the challenge missed.
	if r := send(t, c, prov1, &ledger.MsgChallengeCommit{Root: ledger.Hash{1}}); !errors.Is(r.Err, ledger.ErrNoChallenge) {
		t.Fatalf("commit after the late window: %v, want ErrNoChallenge", r.Err)
	}
	p := provider(t, c, prov1)
	if p.Challenges.Missed != 1 || p.Challenges.Failed != 0 || p.Slashed != 0 || p.Stake != stake {
		t.Fatalf("missed commit: %+v slashed %d", p.Challenges, p.Slashed)
	}
	if next := p.HWChallenge; next != nil && next.Seed == hc.Seed {
		t.Fatalf("the missed challenge is still open: %+v", next)
	}
}

// pastLateWindow is how far past hc's block the late window has closed.
func pastLateWindow(hc *ledger.HardwareChallenge) time.Duration {
	return time.Duration(hc.LateBy-hc.IssuedAt+1) * time.Millisecond
}
