package ledger_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/ledger/verify"
)

// The judging round of a compare job (issue 29; judgment.go): honest
// replicas whose float outputs differ in the low bits commit different
// manifests, judge each other the same, and are validated and paid; a
// replica outside the tolerance, a judge that lies and a judge that stays
// silent are slashed.

// floatSpec is a full job whose outputs are judged within rtol 1e-5.
func floatSpec(name string) ledger.JobSpec {
	s := lt.WasmJob(name, 1_000_000, 600)
	s.Verification = ledger.VerifyFull
	s.Compare = &ledger.CompareSpec{RTolE18: 10_000_000_000_000}
	return s
}

// floatManifest is what a replica of a float job computes: every replica's
// bytes differ (a summation order of its own); a cheater's are marked.
func floatManifest(k lt.Key, cheat bool) ledger.Hash {
	if cheat {
		return ledger.Hash{0xCC, k.Addr[0], k.Addr[1]}
	}
	return ledger.Hash{0xF1, k.Addr[0], k.Addr[1]}
}

// runFloat grants, starts and commits every assignment of job id that has
// not committed, each with its own manifest (a cheater's if cheat[k]), and
// reveals them once the job is revealing. It returns who ran.
func runFloat(t *testing.T, c *lt.Chain, id uint64, cheat map[address.Address]bool) []lt.Key {
	t.Helper()
	var grants []ledger.Grant
	for _, a := range job(t, c, id).Assignments {
		if a.KeyGrant == nil {
			grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("wrapped")})
		}
	}
	if len(grants) > 0 {
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: id, Grants: grants})})
	}
	var ran []lt.Key
	for _, a := range job(t, c, id).Assignments {
		if a.Commitment == nil {
			k := provKey(t, a.Provider)
			must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStartJob{JobID: id})})
			ran = append(ran, k)
		}
	}
	c.Advance(100 * time.Second)
	for _, k := range ran {
		cm := ledger.ResultCommitment(floatManifest(k, cheat[k.Addr]), k.Addr, salt(k))
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgCommitResult{JobID: id, Commitment: &cm, MeteredSeconds: 100})})
	}
	for _, k := range ran {
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRevealResult{JobID: id, Salt: salt(k), Result: ledger.JobResult{
			ManifestHash: floatManifest(k, cheat[k.Addr]), OutputBlob: fmt.Sprintf("sha256:%064x", k.Addr[0]),
		}})})
	}
	return ran
}

func judgeSalt(k lt.Key) ledger.Hash { return ledger.Hash{0x5A, k.Addr[0], k.Addr[1]} }

// honestVector is what an honest judge of job j reveals: a pair of judges
// is the same unless one of them cheated.
func honestVector(j *ledger.Job, cheat map[address.Address]bool) uint64 {
	var judges []int
	for i, a := range j.Assignments {
		if a.Result != nil && a.Outcome == "" {
			judges = append(judges, i)
		}
	}
	var v uint64
	for x, i := range judges {
		for _, k := range judges[x+1:] {
			if !cheat[j.Assignments[i].Provider] && !cheat[j.Assignments[k].Provider] {
				v |= verify.PairBit(i, k)
			}
		}
	}
	return v
}

func commitJudgment(t *testing.T, c *lt.Chain, id uint64, k lt.Key, vector uint64) ledger.TxResult {
	t.Helper()
	round := job(t, c, id).JudgeRound
	return send(t, c, k, &ledger.MsgCommitJudgment{JobID: id, Commitment: ledger.JudgmentCommitment(id, round, vector, k.Addr, judgeSalt(k))})
}

func revealJudgment(t *testing.T, c *lt.Chain, id uint64, k lt.Key, vector uint64) ledger.TxResult {
	t.Helper()
	return send(t, c, k, &ledger.MsgRevealJudgment{JobID: id, Salt: judgeSalt(k), Vector: vector})
}

// judgeAll has every judge in votes commit its vector, then reveal it.
func judgeAll(t *testing.T, c *lt.Chain, id uint64, order []lt.Key, votes map[address.Address]uint64) {
	t.Helper()
	for _, k := range order {
		must(t, []ledger.TxResult{commitJudgment(t, c, id, k, votes[k.Addr])})
	}
	for _, k := range order {
		must(t, []ledger.TxResult{revealJudgment(t, c, id, k, votes[k.Addr])})
	}
}

func checkNotSlashed(t *testing.T, c *lt.Chain, ks ...lt.Key) {
	t.Helper()
	for _, k := range ks {
		if p := provider(t, c, k); p.Slashed != 0 || p.Stake != stake {
			t.Errorf("%s slashed %d (stake %d): want not slashed", k.Addr.String(), p.Slashed, p.Stake)
		}
	}
}

// checkSlashedOnce: k lost slash_bps of its stake exactly once, with code.
func checkSlashedOnce(t *testing.T, c *lt.Chain, k lt.Key, code string) {
	t.Helper()
	want := slashOf(ledger.DefaultParams())
	p := provider(t, c, k)
	if p.Slashed != want || p.Stake != stake-want {
		t.Errorf("%s slashed %d (stake %d), want once: %d", k.Addr.String(), p.Slashed, p.Stake, want)
	}
	if got := lastSlash(t, c, k); got.Code != code || got.Job != 1 {
		t.Errorf("%s's slash %+v, want code %s in job 1", k.Addr.String(), got, code)
	}
}

// TestHonestFloatReplicasJudgedSame: two honest replicas whose bytes
// differ open a judging round, judge each other the same, and the job is
// validated; both are paid, nobody is slashed. Without the round the
// differing manifests would escalate and never agree.
func TestHonestFloatReplicasJudgedSame(t *testing.T) {
	c := verifyChain(t, 3, nil)
	must(t, []ledger.TxResult{submit(t, c, floatSpec("fsum"))})
	ran := runFloat(t, c, 1, nil)
	j := job(t, c, 1)
	if !j.Judging || j.JudgeRevealing || j.JudgeRound != 1 || j.State != ledger.JobVerifying {
		t.Fatalf("differing float outputs did not open a judging round: %s judging %v round %d (%+v)", j.State, j.Judging, j.JudgeRound, j.Wait)
	}
	checkWait(t, "round open", j.Wait, ledger.Wait{Code: ledger.WaitJudging, Seq: 1, Of: 2})
	v := honestVector(j, nil)
	if v != verify.PairBit(0, 1) {
		t.Fatalf("honest vector %#x", v)
	}
	// A reveal before every judge committed is refused: it would show the
	// vector to a judge that has not committed yet.
	must(t, []ledger.TxResult{commitJudgment(t, c, 1, ran[0], v)})
	if r := revealJudgment(t, c, 1, ran[0], v); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("reveal during the commit window: %v", r.Err)
	}
	if r := commitJudgment(t, c, 1, ran[0], v); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("a second commitment: %v", r.Err)
	}
	must(t, []ledger.TxResult{commitJudgment(t, c, 1, ran[1], v)})
	checkWait(t, "committed", job(t, c, 1).Wait, ledger.Wait{Code: ledger.WaitJudgingReveal, Seq: 1, Of: 2})
	if r := revealJudgment(t, c, 1, ran[0], v|verify.PairBit(0, 2)); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("a vector with a pair that is not two judges: %v", r.Err)
	}
	if r := revealJudgment(t, c, 1, ran[0], 0); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("a vector that does not open the commitment: %v", r.Err)
	}
	for _, k := range ran {
		must(t, []ledger.TxResult{revealJudgment(t, c, 1, k, v)})
	}
	j = job(t, c, 1)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || j.Judging || *j.Delivered != ran[0].Addr {
		t.Fatalf("honest float replicas: %s %s judging %v delivered %v (%+v)", j.State, j.Verdict, j.Judging, j.Delivered, j.Wait)
	}
	checkWait(t, "agreed", j.Wait, ledger.Wait{Code: ledger.WaitAgreed, Count: 2, Of: 2})
	for i, a := range j.Assignments {
		if a.Outcome != ledger.OutcomeMajority || a.Paid == 0 {
			t.Errorf("replica %d: outcome %s paid %d", i, a.Outcome, a.Paid)
		}
	}
	checkNotSlashed(t, c, provs[:3]...)
	for _, k := range ran {
		if p := provider(t, c, k); p.Validated != 1 || p.Invalid != 0 {
			t.Errorf("%s: validated %d invalid %d", k.Addr.String(), p.Validated, p.Invalid)
		}
	}
}

// TestFloatCheaterOutvoted: one replica skipped half the work. The two
// judges disagree about it (no majority of two), the job escalates, the
// third replica's judgment joins the honest one: the cheater is left out
// of the class and slashed once, as an outvoted result when it judged
// honestly, as an outvoted judge when it judged itself the same.
func TestFloatCheaterOutvoted(t *testing.T) {
	for _, lies := range []bool{false, true} {
		t.Run(fmt.Sprintf("cheater lies as judge %v", lies), func(t *testing.T) {
			c := verifyChain(t, 3, nil)
			must(t, []ledger.TxResult{submit(t, c, floatSpec("fsum"))})
			cheat := map[address.Address]bool{prov1.Addr: true}
			ran := runFloat(t, c, 1, cheat)
			votes := map[address.Address]uint64{}
			for _, k := range ran {
				votes[k.Addr] = honestVector(job(t, c, 1), cheat)
			}
			if lies {
				votes[prov1.Addr] = honestVector(job(t, c, 1), nil)
			}
			judgeAll(t, c, 1, ran, votes)
			j := job(t, c, 1)
			if j.Done() || j.Replicas != 3 || j.Judging {
				t.Fatalf("a disputed round did not escalate: %s replicas %d (%+v)", j.State, j.Replicas, j.Wait)
			}
			checkNotSlashed(t, c, provs[:3]...)
			third := runFloat(t, c, 1, cheat)
			if len(third) != 1 || third[0].Addr != prov3.Addr {
				t.Fatalf("escalation ran on %v", third)
			}
			j = job(t, c, 1)
			if !j.Judging || j.JudgeRound != 2 {
				t.Fatalf("the escalated job did not open round 2: judging %v round %d (%+v)", j.Judging, j.JudgeRound, j.Wait)
			}
			order := append(ran, third...)
			for _, k := range order {
				votes[k.Addr] = honestVector(j, cheat)
			}
			if lies {
				votes[prov1.Addr] = honestVector(j, nil)
			}
			judgeAll(t, c, 1, order, votes)
			j = job(t, c, 1)
			if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || *j.Delivered != prov2.Addr {
				t.Fatalf("after round 2: %s %s delivered %v (%+v)", j.State, j.Verdict, j.Delivered, j.Wait)
			}
			a := assignmentOf(j, prov1.Addr)
			want, code := ledger.OutcomeMinority, ledger.SlashOutvoted
			if lies {
				want, code = ledger.OutcomeJudgeOutvoted, ledger.SlashJudgeOutvoted
			}
			if a.Outcome != want || a.Paid != 0 {
				t.Errorf("cheater: outcome %s paid %d, want %s, unpaid", a.Outcome, a.Paid, want)
			}
			checkSlashedOnce(t, c, prov1, code)
			checkNotSlashed(t, c, prov2, prov3)
			if p := provider(t, c, prov1); p.Invalid != 1 {
				t.Errorf("cheater's invalid count %d", p.Invalid)
			}
		})
	}
}

// TestLyingJudgeSlashed: every output is honest, but one judge says its
// peer's differs. Its lie cannot sink the honest replica: the round
// escalates, the third replica's judgment joins the truth, and the liar is
// slashed as an outvoted judge and not paid, although its own output is in
// the winning class.
func TestLyingJudgeSlashed(t *testing.T) {
	c := verifyChain(t, 3, nil)
	must(t, []ledger.TxResult{submit(t, c, floatSpec("fsum"))})
	ran := runFloat(t, c, 1, nil)
	liar := prov2
	votes := map[address.Address]uint64{prov1.Addr: honestVector(job(t, c, 1), nil), liar.Addr: 0}
	judgeAll(t, c, 1, ran, votes)
	third := runFloat(t, c, 1, nil)
	j := job(t, c, 1)
	order := append(ran, third...)
	for _, k := range order {
		votes[k.Addr] = honestVector(j, nil)
	}
	votes[liar.Addr] = verify.PairBit(0, 2) // leaves itself out, as before
	judgeAll(t, c, 1, order, votes)
	j = job(t, c, 1)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || *j.Delivered != prov1.Addr {
		t.Fatalf("after round 2: %s %s delivered %v (%+v)", j.State, j.Verdict, j.Delivered, j.Wait)
	}
	if a := assignmentOf(j, liar.Addr); a.Outcome != ledger.OutcomeJudgeOutvoted || a.Paid != 0 {
		t.Errorf("liar: outcome %s paid %d", a.Outcome, a.Paid)
	}
	checkSlashedOnce(t, c, liar, ledger.SlashJudgeOutvoted)
	checkNotSlashed(t, c, prov1, prov3)
	for _, k := range []lt.Key{prov1, prov3} {
		if a := assignmentOf(j, k.Addr); a.Outcome != ledger.OutcomeMajority || a.Paid == 0 {
			t.Errorf("%s: outcome %s paid %d", k.Addr.String(), a.Outcome, a.Paid)
		}
	}
}

// TestSilentJudgeSlashed: one judge never commits its judgment. The commit
// window closes, the other reveals, the silent one is slashed at once (a
// lone vector is no majority of two judges), the job escalates, and the
// silent judge takes no further part: it is neither judged, paid nor
// slashed again when the job is decided.
func TestSilentJudgeSlashed(t *testing.T) {
	c := verifyChain(t, 3, nil)
	must(t, []ledger.TxResult{submit(t, c, floatSpec("fsum"))})
	runFloat(t, c, 1, nil)
	silent, talker := prov2, prov1
	v := honestVector(job(t, c, 1), nil)
	must(t, []ledger.TxResult{commitJudgment(t, c, 1, talker, v)})
	blockAt(t, c, job(t, c, 1).Deadline)
	j := job(t, c, 1)
	if !j.Judging || !j.JudgeRevealing {
		t.Fatalf("the commit window closed without opening reveals: %+v", j.Wait)
	}
	if r := commitJudgment(t, c, 1, silent, v); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("a late commitment: %v", r.Err)
	}
	must(t, []ledger.TxResult{revealJudgment(t, c, 1, talker, v)})
	j = job(t, c, 1)
	if j.Done() || j.Replicas != 3 {
		t.Fatalf("after the round with a silent judge: %s replicas %d (%+v)", j.State, j.Replicas, j.Wait)
	}
	checkSlashedOnce(t, c, silent, ledger.SlashJudgeSilent)
	third := runFloat(t, c, 1, nil)
	j = job(t, c, 1)
	checkWait(t, "round 2", j.Wait, ledger.Wait{Code: ledger.WaitJudging, Seq: 2, Of: 2})
	if r := commitJudgment(t, c, 1, silent, 0); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("a settled judge judging again: %v", r.Err)
	}
	order := []lt.Key{talker, third[0]}
	votes := map[address.Address]uint64{}
	for _, k := range order {
		votes[k.Addr] = honestVector(j, nil)
	}
	judgeAll(t, c, 1, order, votes)
	j = job(t, c, 1)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated {
		t.Fatalf("after round 2: %s %s (%+v)", j.State, j.Verdict, j.Wait)
	}
	if a := assignmentOf(j, silent.Addr); a.Outcome != ledger.OutcomeJudgeSilent || a.Paid != 0 {
		t.Errorf("silent judge: outcome %s paid %d", a.Outcome, a.Paid)
	}
	checkSlashedOnce(t, c, silent, ledger.SlashJudgeSilent)
	checkNotSlashed(t, c, talker, third[0])
}

// TestNobodyJudgesEndsWithinBound: judges that never commit are all
// slashed; with no provider free to escalate to, the job fails within
// VerifyingBound of its first commit, the owner refunded.
func TestNobodyJudgesEndsWithinBound(t *testing.T) {
	p := ledger.DefaultParams()
	c := verifyChain(t, 2, nil)
	spec := floatSpec("fsum")
	must(t, []ledger.TxResult{submit(t, c, spec)})
	runFloat(t, c, 1, nil)
	for i := 0; i < 20 && !job(t, c, 1).Done(); i++ {
		blockAt(t, c, max(job(t, c, 1).Deadline, lt.BlockTime(c.Height+1).Add(c.Offset).Unix()))
	}
	j := job(t, c, 1)
	if j.State != ledger.JobFailed || j.Verdict != ledger.VerdictNoMajority {
		t.Fatalf("nobody judged: %s %s (%+v)", j.State, j.Verdict, j.Wait)
	}
	for _, k := range provs[:2] {
		checkSlashedOnce(t, c, k, ledger.SlashJudgeSilent)
	}
	if j.Cost != 0 || j.Escrow != 0 {
		t.Errorf("nobody should be paid and the escrow returned: cost %d escrow %d refund %d", j.Cost, j.Escrow, j.Refund)
	}
	if took := uint64(j.FinishedAt - j.Assignments[0].StartedAt); took > ledger.VerifyingBound(&spec, p) {
		t.Errorf("took %d s, bound %d", took, ledger.VerifyingBound(&spec, p))
	}
}

// FuzzRevealJudgment: in an open judging round whose two judges committed
// the honest vector, a reveal with any salt and vector is refused unless it
// opens the sender's commitment and has no bit outside the judges' pairs;
// nothing panics and the invariants hold after each block.
func FuzzRevealJudgment(f *testing.F) {
	f.Add([]byte{0x5A}, uint64(1), true)
	f.Add([]byte{}, uint64(0), false)
	f.Add([]byte{0x5A}, ^uint64(0), false)
	f.Fuzz(func(t *testing.T, saltB []byte, vector uint64, first bool) {
		c := verifyChain(t, 2, nil)
		must(t, []ledger.TxResult{submit(t, c, floatSpec("fuzz"))})
		ran := runFloat(t, c, 1, nil)
		v := honestVector(job(t, c, 1), nil)
		for _, k := range ran {
			must(t, []ledger.TxResult{commitJudgment(t, c, 1, k, v)})
		}
		who := ran[1]
		if first {
			who = ran[0]
		}
		var s ledger.Hash
		copy(s[:], saltB)
		r := send(t, c, who, &ledger.MsgRevealJudgment{JobID: 1, Salt: s, Vector: vector})
		if opens := s == judgeSalt(who) && vector == v; r.Err == nil && !opens {
			t.Fatalf("a judgment reveal that does not open the commitment was accepted: %#x", vector)
		} else if r.Err != nil && opens {
			t.Fatalf("the committed judgment was refused: %v", r.Err)
		}
	})
}
