package ledger_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

var (
	provNames = []string{"prov1", "prov2", "prov3", "prov4", "prov5"}
	provs     = []lt.Key{prov1, prov2, prov3, lt.NewKey("prov4"), lt.NewKey("prov5")}
)

func assignmentOf(j *ledger.Job, a address.Address) *ledger.Assignment {
	for i := range j.Assignments {
		if j.Assignments[i].Provider == a {
			return &j.Assignments[i]
		}
	}
	return nil
}

const stake = 10_000_000

// checkWait fails unless got is want: the code and the numbers behind it.
func checkWait(t *testing.T, what string, got *ledger.Wait, want ledger.Wait) {
	t.Helper()
	if got == nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("%s: wait %+v, want %+v", what, got, want)
	}
}

// lastSlash is k's latest slash event (the zero event if none).
func lastSlash(t *testing.T, c *lt.Chain, k lt.Key) ledger.SlashEvent {
	t.Helper()
	evs := provider(t, c, k).SlashEvents
	if len(evs) == 0 {
		return ledger.SlashEvent{}
	}
	return evs[len(evs)-1]
}

// verifyChain has a funded consumer and n staked CPU providers asking
// 36,000 × (i+1) usync per core-hour, and a treasury to pay audits.
func verifyChain(t *testing.T, n int, tune func(*ledger.Params)) *lt.Chain {
	t.Helper()
	names := []string{"consumer"}
	for i := range provs[:n] {
		names = append(names, provNames[i])
	}
	g := lt.Genesis(100_000_000_000, names...)
	g.Params.LivenessRatePPM = 0
	g.Treasury = 1_000_000_000
	if tune != nil {
		tune(&g.Params)
	}
	c := lt.NewChain(t, g)
	for i, k := range provs[:n] {
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("", 0, uint64(36_000*(i+1)))})})
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: stake})})
	}
	return c
}

func provKey(t *testing.T, a address.Address) lt.Key {
	t.Helper()
	for _, k := range append(provs, consumer) {
		if k.Addr == a {
			return k
		}
	}
	t.Fatalf("no test key for %s", a)
	return lt.Key{}
}

func spotJob(name string) ledger.JobSpec {
	s := lt.WasmJob(name, 1_000_000, 600)
	s.Verification = "spot"
	return s
}

// manifest is the result a replica computes: honest ones agree.
func manifest(honest bool, who lt.Key) ledger.Hash {
	if honest {
		return ledger.Hash{1}
	}
	return ledger.Hash{0xEE, who.Addr[0]}
}

func salt(k lt.Key) ledger.Hash { return ledger.Hash{9, k.Addr[1], k.Addr[2]} }

// runReplicas grants, starts and commits every assignment of job id that
// has not committed yet; wrong lists the providers that commit a wrong
// result. It returns who committed.
func runReplicas(t *testing.T, c *lt.Chain, id uint64, metered uint64, wrong map[address.Address]bool) []lt.Key {
	t.Helper()
	j := job(t, c, id)
	var grants []ledger.Grant
	for _, a := range j.Assignments {
		if a.KeyGrant == nil {
			grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("wrapped")})
		}
	}
	if len(grants) > 0 {
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: id, Grants: grants})})
	}
	var ran []lt.Key
	for _, a := range job(t, c, id).Assignments {
		if a.Commitment != nil {
			continue
		}
		k := provKey(t, a.Provider)
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStartJob{JobID: id})})
		ran = append(ran, k)
	}
	c.Advance(time.Duration(metered) * time.Second)
	for _, k := range ran {
		cm := ledger.ResultCommitment(manifest(!wrong[k.Addr], k), k.Addr, salt(k))
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgCommitResult{JobID: id, Commitment: &cm, MeteredSeconds: metered})})
	}
	return ran
}

func reveal(t *testing.T, c *lt.Chain, id uint64, k lt.Key, wrong bool) ledger.TxResult {
	t.Helper()
	return send(t, c, k, &ledger.MsgRevealResult{JobID: id, Salt: salt(k), Result: ledger.JobResult{
		ManifestHash: manifest(!wrong, k), OutputBlob: fmt.Sprintf("sha256:%064x", k.Addr[0]),
	}})
}

// TestSpotAuditValidates: a new provider's spot job is always audited by a
// second, distinct provider after it commits; both agree; the primary is
// paid from the escrow, the auditor from the treasury; both gain a
// validated result in the class.
func TestSpotAuditValidates(t *testing.T) {
	c := verifyChain(t, 3, nil)
	must(t, []ledger.TxResult{submit(t, c, spotJob("spot"))})
	j := job(t, c, 1)
	if j.Replicas != 1 || len(j.Assignments) != 1 {
		t.Fatalf("spot job placed on %d providers, wants %d", len(j.Assignments), j.Replicas)
	}
	primary := runReplicas(t, c, 1, 100, nil)[0]
	j = job(t, c, 1)
	if !j.AuditDrawn || j.Replicas != 2 || len(j.Assignments) != 2 || !j.Assignments[1].Extra {
		t.Fatalf("no audit after a new provider's commit: %+v", j)
	}
	if j.Assignments[1].Provider == primary.Addr {
		t.Fatal("the auditor is the primary itself")
	}
	// Nobody can reveal before the audit replica committed.
	if r := reveal(t, c, 1, primary, false); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("early reveal: %v", r.Err)
	}
	treasury := ledger.Treasury(c.KV)
	auditor := runReplicas(t, c, 1, 100, nil)[0]
	if j = job(t, c, 1); !j.Revealing {
		t.Fatalf("not revealing after both committed: %s (%+v)", j.State, j.Wait)
	}
	checkWait(t, "both committed", j.Wait, ledger.Wait{Code: ledger.WaitRevealing, Count: 0, Of: 2})
	// A reveal that does not open the commitment is refused.
	bad := send(t, c, primary, &ledger.MsgRevealResult{JobID: 1, Salt: ledger.Hash{1}, Result: ledger.JobResult{ManifestHash: ledger.Hash{1}, OutputBlob: "sha256:" + strings.Repeat("0", 64)}})
	if !errors.Is(bad.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("reveal with a wrong salt: %v", bad.Err)
	}
	must(t, []ledger.TxResult{reveal(t, c, 1, primary, false)})
	checkWait(t, "one revealed", job(t, c, 1).Wait, ledger.Wait{Code: ledger.WaitRevealing, Count: 1, Of: 2})
	must(t, []ledger.TxResult{reveal(t, c, 1, auditor, false)})
	j = job(t, c, 1)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || *j.Delivered != primary.Addr {
		t.Fatalf("after agreeing reveals: %s %s delivered %v (%+v)", j.State, j.Verdict, j.Delivered, j.Wait)
	}
	checkWait(t, "validated", j.Wait, ledger.Wait{Code: ledger.WaitAgreed, Count: 2, Of: 2})
	// 100 s at 36,000/h = 1000 from the escrow; the auditor (72,000/h)
	// gets 2000 from the treasury.
	if j.Cost != 1000 || j.AuditCost != 2000 || ledger.Treasury(c.KV) != treasury-2000+10 {
		t.Fatalf("cost %d audit %d treasury %d → %d", j.Cost, j.AuditCost, treasury, ledger.Treasury(c.KV))
	}
	for _, k := range []lt.Key{primary, auditor} {
		if p := provider(t, c, k); p.Consecutive(ledger.CPUClass) != 1 || p.Validated != 1 || p.Jobs != 0 {
			t.Errorf("%s after a validated result: consecutive %d validated %d jobs %d", k.Addr.String(), p.Consecutive(ledger.CPUClass), p.Validated, p.Jobs)
		}
	}
}

// TestCheaterOutvotedAndSlashed: the primary returns a wrong result; the
// auditor disagrees; a third replica breaks the tie; the cheater is
// slashed exactly slash_bps of its stake, the owner gets the compensation
// share and the honest output.
func TestCheaterOutvotedAndSlashed(t *testing.T) {
	c := verifyChain(t, 3, nil)
	must(t, []ledger.TxResult{submit(t, c, spotJob("cheat"))})
	cheater := runReplicas(t, c, 1, 100, map[address.Address]bool{prov1.Addr: true})[0]
	if cheater.Addr != prov1.Addr {
		t.Fatalf("the cheapest provider should be the primary, got %s", cheater.Addr.String())
	}
	auditor := runReplicas(t, c, 1, 100, nil)[0]
	must(t, []ledger.TxResult{reveal(t, c, 1, cheater, true)})
	must(t, []ledger.TxResult{reveal(t, c, 1, auditor, false)})
	j := job(t, c, 1)
	if j.Done() || j.Replicas != 3 || j.Revealing {
		t.Fatalf("2 disagreeing replicas did not escalate: %s replicas %d (%+v)", j.State, j.Replicas, j.Wait)
	}
	ownerBefore, treasury := c.Balance(t, consumer.Addr), ledger.Treasury(c.KV)
	third := runReplicas(t, c, 1, 100, nil)[0]
	must(t, []ledger.TxResult{reveal(t, c, 1, third, false)})
	j = job(t, c, 1)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || *j.Delivered != auditor.Addr {
		t.Fatalf("after the tie-break: %s %s delivered %v (%+v)", j.State, j.Verdict, j.Delivered, j.Wait)
	}
	checkWait(t, "after the tie-break", j.Wait, ledger.Wait{Code: ledger.WaitAgreed, Count: 2, Of: 3})
	want := uint64(stake) * 1000 / 10_000 // 10%
	if got := lastSlash(t, c, cheater); got != (ledger.SlashEvent{Height: got.Height, Amount: want, Code: ledger.SlashOutvoted, Job: 1, Count: 2, Of: 3}) {
		t.Errorf("cheater's slash event %+v, want code %s, job 1, outvoted by 2 of 3, amount %d", got, ledger.SlashOutvoted, want)
	}
	p := provider(t, c, cheater)
	if j.Assignments[0].Outcome != ledger.OutcomeMinority || j.Assignments[0].Slashed != want || p.Stake != stake-want || p.Slashed != want {
		t.Fatalf("cheater: outcome %s slashed %d, stake %d", j.Assignments[0].Outcome, j.Assignments[0].Slashed, p.Stake)
	}
	if p.Consecutive(ledger.CPUClass) != 0 || p.Invalid != 1 || p.Reputation >= 500_000 || p.Jobs != 0 {
		t.Fatalf("cheater's record: %+v", p)
	}
	comp := want / 2
	// The owner: refund of the unused escrow (the cheater was never paid
	// from it) plus the compensation.
	if got := c.Balance(t, consumer.Addr) - ownerBefore; got != j.Refund+comp {
		t.Fatalf("owner got %d, want refund %d + compensation %d", got, j.Refund, comp)
	}
	// The treasury paid the auditor and the third replica, got the fee and
	// the rest of the slash.
	if got, want := int64(ledger.Treasury(c.KV))-int64(treasury), int64(want-comp)+int64(j.Fee)-int64(j.AuditCost); got != want {
		t.Fatalf("treasury moved %d, want %d", got, want)
	}
	for _, k := range []lt.Key{auditor, third} {
		if provider(t, c, k).Slashed != 0 {
			t.Errorf("honest %s slashed", k.Addr.String())
		}
	}
}

// TestNoMajorityRefundsInFull: replicas that all disagree up to
// max_replicas fail the job, refund the owner everything and slash nobody.
func TestNoMajorityRefundsInFull(t *testing.T) {
	c := verifyChain(t, 3, func(p *ledger.Params) { p.MaxReplicas = 3 })
	before := c.Balance(t, consumer.Addr)
	must(t, []ledger.TxResult{submit(t, c, spotJob("chaos"))})
	all := map[address.Address]bool{prov1.Addr: true, prov2.Addr: true, provs[2].Addr: true}
	p1 := runReplicas(t, c, 1, 50, all)[0] // the primary; an audit follows
	p2 := runReplicas(t, c, 1, 50, all)[0]
	must(t, []ledger.TxResult{reveal(t, c, 1, p1, true)})
	must(t, []ledger.TxResult{reveal(t, c, 1, p2, true)})
	p3 := runReplicas(t, c, 1, 50, all)[0] // the escalation, the last allowed
	must(t, []ledger.TxResult{reveal(t, c, 1, p3, true)})
	ran := []lt.Key{p1, p2, p3}
	j := job(t, c, 1)
	if j.State != ledger.JobFailed || j.Verdict != ledger.VerdictNoMajority || j.Cost != 0 {
		t.Fatalf("3 different results: %s %s cost %d (%+v)", j.State, j.Verdict, j.Cost, j.Wait)
	}
	checkWait(t, "3 different results", j.Wait, ledger.Wait{Code: ledger.WaitNoMajority, Of: 3, Distinct: 3})
	if got := c.Balance(t, consumer.Addr); got != before {
		t.Fatalf("owner balance %d → %d, want a full refund", before, got)
	}
	for _, k := range ran {
		if provider(t, c, k).Slashed != 0 {
			t.Errorf("%s slashed without a majority", k.Addr.String())
		}
	}
}

// TestCopiedCommitmentGainsNothing: a replica that copies another's
// commitment cannot open it, so it is neither paid nor counted.
func TestCopiedCommitmentGainsNothing(t *testing.T) {
	c := verifyChain(t, 3, nil)
	spec := spotJob("full")
	spec.Verification = "full"
	must(t, []ledger.TxResult{submit(t, c, spec)})
	j := job(t, c, 1)
	if len(j.Assignments) != 2 {
		t.Fatalf("full job on %d providers", len(j.Assignments))
	}
	a, b := provKey(t, j.Assignments[0].Provider), provKey(t, j.Assignments[1].Provider)
	var grants []ledger.Grant
	for _, x := range j.Assignments {
		grants = append(grants, ledger.Grant{Provider: x.Provider, WrappedKey: []byte("k")})
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: grants})})
	must(t, []ledger.TxResult{send(t, c, a, &ledger.MsgStartJob{JobID: 1})})
	must(t, []ledger.TxResult{send(t, c, b, &ledger.MsgStartJob{JobID: 1})})
	c.Advance(60 * time.Second)
	honest := ledger.ResultCommitment(manifest(true, a), a.Addr, salt(a))
	must(t, []ledger.TxResult{send(t, c, a, &ledger.MsgCommitResult{JobID: 1, Commitment: &honest, MeteredSeconds: 60})})
	must(t, []ledger.TxResult{send(t, c, b, &ledger.MsgCommitResult{JobID: 1, Commitment: &honest, MeteredSeconds: 60})})
	must(t, []ledger.TxResult{reveal(t, c, 1, a, false)})
	// b saw a's reveal, but the commitment binds a's address and salt.
	r := send(t, c, b, &ledger.MsgRevealResult{JobID: 1, Salt: salt(a), Result: ledger.JobResult{ManifestHash: manifest(true, a), OutputBlob: fmt.Sprintf("sha256:%064x", 1)}})
	if !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("copied commitment opened: %v", r.Err)
	}
	// The reveal window passes: b does not vote; a alone of 2 is no
	// majority, so a third replica is added.
	c.Advance(time.Duration(ledger.DefaultParams().RevealTimeout+1) * time.Second)
	c.ApplyBlock(t)
	j = job(t, c, 1)
	if bj := assignmentOf(j, b.Addr); bj.Outcome != "" && bj.Paid != 0 {
		t.Fatalf("copier paid %d", bj.Paid)
	}
	if j.Replicas != 3 {
		t.Fatalf("after a missing reveal: replicas %d, %s (%s)", j.Replicas, j.State, j.Reason)
	}
	if p := provider(t, c, b); p.Unrevealed != 0 && p.Slashed != 0 {
		t.Fatalf("copier slashed: %+v", p)
	}
}

func TestAuditRate(t *testing.T) {
	p := ledger.DefaultParams()
	for _, c := range []struct{ consecutive, want uint64 }{{0, 1_000_000}, {9, 1_000_000}, {10, 100_000}, {14, 71_428}, {15, 70_000}, {1000, 70_000}} {
		if got := ledger.AuditRatePPM(c.consecutive, p); got != c.want {
			t.Errorf("AuditRatePPM(%d) = %d, want %d", c.consecutive, got, c.want)
		}
	}
}

// FuzzRevealResult: on a spot job whose two replicas committed, a reveal
// with any salt and result is refused unless it opens the sender's
// commitment; nothing panics and the invariants hold after each block.
func FuzzRevealResult(f *testing.F) {
	f.Add([]byte{9}, []byte{1}, int64(0), false, "sha256:"+strings.Repeat("ab", 32), true)
	f.Add([]byte{}, []byte{}, int64(-1), true, "", false)
	f.Fuzz(func(t *testing.T, saltB, manifestB []byte, exit int64, failed bool, blob string, asPrimary bool) {
		c := verifyChain(t, 3, nil)
		must(t, []ledger.TxResult{submit(t, c, spotJob("fuzz"))})
		primary := runReplicas(t, c, 1, 10, nil)[0]
		auditor := runReplicas(t, c, 1, 10, nil)[0]
		var s, m ledger.Hash
		copy(s[:], saltB)
		copy(m[:], manifestB)
		who := auditor
		if asPrimary {
			who = primary
		}
		r := send(t, c, who, &ledger.MsgRevealResult{JobID: 1, Salt: s, Result: ledger.JobResult{ManifestHash: m, ExitCode: exit, Failed: failed, OutputBlob: blob}})
		opens := s == salt(who) && m == manifest(true, who)
		if r.Err == nil && !opens {
			t.Fatalf("a reveal that does not open the commitment was accepted")
		}
	})
}

// TestWithheldRevealCostsAtLeastOutvoted: on a full job prov1 computes a
// wrong result. Revealing it gets it outvoted; withholding it must cost at
// least as much (slashed the same, not paid, counted invalid so that its
// reputation and its ceiling fall), else a cheater would always withhold.
// Before the fix the withholder was not slashed and lost a tenth of its
// reputation, less than the half an outvoted replica loses.
func TestWithheldRevealCostsAtLeastOutvoted(t *testing.T) {
	type settled struct {
		outcome            string
		slashed, paid      uint64
		reputation, ceil   uint64
		invalidInClass     uint64
		ownerCompensation  uint64
		stateAfter, reason string
	}
	run := func(t *testing.T, withhold bool) settled {
		c := verifyChain(t, 3, nil)
		spec := spotJob("full")
		spec.Verification = "full"
		must(t, []ledger.TxResult{submit(t, c, spec)})
		ran := runReplicas(t, c, 1, 60, map[address.Address]bool{prov1.Addr: true})
		var cheater, honest lt.Key
		for _, k := range ran {
			if k.Addr == prov1.Addr {
				cheater = k
			} else {
				honest = k
			}
		}
		if cheater.Addr != prov1.Addr {
			t.Fatalf("prov1 did not run the job: %v", ran)
		}
		must(t, []ledger.TxResult{reveal(t, c, 1, honest, false)})
		if withhold {
			c.Advance(time.Duration(ledger.DefaultParams().RevealTimeout+1) * time.Second)
			c.ApplyBlock(t)
		} else {
			must(t, []ledger.TxResult{reveal(t, c, 1, cheater, true)})
		}
		j := job(t, c, 1)
		if j.Done() || j.Replicas != 3 {
			t.Fatalf("one of two revealed results did not escalate: %s replicas %d (%s)", j.State, j.Replicas, j.Reason)
		}
		owner := c.Balance(t, consumer.Addr)
		third := runReplicas(t, c, 1, 60, nil)[0]
		must(t, []ledger.TxResult{reveal(t, c, 1, third, false)})
		if withhold {
			// It may still reveal in this round; it stays silent.
			c.Advance(time.Duration(ledger.DefaultParams().RevealTimeout+1) * time.Second)
			c.ApplyBlock(t)
		}
		j = job(t, c, 1)
		if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated {
			t.Fatalf("after the third replica: %s %s (%s)", j.State, j.Verdict, j.Reason)
		}
		a := assignmentOf(j, cheater.Addr)
		p := provider(t, c, cheater)
		var classInvalid uint64
		for _, r := range p.Classes {
			classInvalid += r.Invalid
		}
		return settled{
			outcome: a.Outcome, slashed: a.Slashed, paid: a.Paid,
			reputation: p.Reputation, ceil: p.ReputationCeiling(), invalidInClass: classInvalid,
			ownerCompensation: c.Balance(t, consumer.Addr) - owner - j.Refund,
			stateAfter:        j.State, reason: j.Reason,
		}
	}
	outvoted := run(t, false)
	withheld := run(t, true)
	if outvoted.outcome != ledger.OutcomeMinority || withheld.outcome != ledger.OutcomeUnrevealed {
		t.Fatalf("outcomes: revealed %q, withheld %q", outvoted.outcome, withheld.outcome)
	}
	if want := uint64(stake) * 1000 / 10_000; outvoted.slashed != want {
		t.Fatalf("outvoted slashed %d, want %d", outvoted.slashed, want)
	}
	if withheld.slashed < outvoted.slashed || withheld.paid > outvoted.paid {
		t.Errorf("withholding slashed %d paid %d; revealing and being outvoted slashed %d paid %d: silence is cheaper", withheld.slashed, withheld.paid, outvoted.slashed, outvoted.paid)
	}
	if withheld.ownerCompensation < outvoted.ownerCompensation {
		t.Errorf("the owner got %d for a withheld result, %d for an outvoted one", withheld.ownerCompensation, outvoted.ownerCompensation)
	}
	if withheld.reputation > outvoted.reputation || withheld.ceil > outvoted.ceil || withheld.invalidInClass != 1 {
		t.Errorf("withheld: reputation %d ceiling %d class invalid %d; outvoted: reputation %d ceiling %d", withheld.reputation, withheld.ceil, withheld.invalidInClass, outvoted.reputation, outvoted.ceil)
	}
	if withheld.reputation >= 500_000/2+1 {
		t.Errorf("withheld reputation %d, want at most half the initial 500000", withheld.reputation)
	}
}

// TestNobodyRevealsEveryoneSlashed: when the reveal window closes and no
// replica opened its commitment, the job fails and is refunded, and each
// silent replica is slashed; its reputation cannot climb back on liveness
// answers past a ceiling that counts the withheld result.
func TestNobodyRevealsEveryoneSlashed(t *testing.T) {
	c := verifyChain(t, 3, nil)
	spec := spotJob("silent")
	spec.Verification = "full"
	before := c.Balance(t, consumer.Addr)
	must(t, []ledger.TxResult{submit(t, c, spec)})
	ran := runReplicas(t, c, 1, 30, nil)
	c.Advance(time.Duration(ledger.DefaultParams().RevealTimeout+1) * time.Second)
	c.ApplyBlock(t)
	j := job(t, c, 1)
	if j.State != ledger.JobFailed || j.Verdict != ledger.VerdictNoMajority || j.Cost != 0 {
		t.Fatalf("nobody revealed: %s %s cost %d (%+v)", j.State, j.Verdict, j.Cost, j.Wait)
	}
	checkWait(t, "nobody revealed", j.Wait, ledger.Wait{Code: ledger.WaitNoneRevealed, Of: 2})
	want := uint64(stake) * 1000 / 10_000
	comp := 2 * (want / 2)
	if got := c.Balance(t, consumer.Addr); got != before+comp {
		t.Fatalf("owner balance %d → %d, want a full refund plus %d compensation", before, got, comp)
	}
	for _, k := range ran {
		p := provider(t, c, k)
		if a := assignmentOf(j, k.Addr); a.Outcome != ledger.OutcomeUnrevealed || a.Slashed != want || p.Slashed != want {
			t.Errorf("%s: outcome %q slashed %d (record %d), want unrevealed and %d", k.Addr.String(), a.Outcome, a.Slashed, p.Slashed, want)
		}
		if got := lastSlash(t, c, k); got != (ledger.SlashEvent{Height: got.Height, Amount: want, Code: ledger.SlashUnrevealed, Job: 1}) {
			t.Errorf("%s: slash event %+v, want code %s, job 1, amount %d", k.Addr.String(), got, ledger.SlashUnrevealed, want)
		}
		if p.Unrevealed != 1 || p.ReputationCeiling() >= 500_000 || p.Reputation > 250_000 {
			t.Errorf("%s: unrevealed %d ceiling %d reputation %d", k.Addr.String(), p.Unrevealed, p.ReputationCeiling(), p.Reputation)
		}
	}
}

// TestUngrantedAuditReplicaPaidForItsSlot: the owner does not grant the key
// to the audit replica placed on its spot job; at the grant deadline the
// job goes on without it, and the auditor is paid, from the treasury as its
// run would have been, for the seconds its slot was held.
func TestUngrantedAuditReplicaPaidForItsSlot(t *testing.T) {
	c := verifyChain(t, 3, nil)
	must(t, []ledger.TxResult{submit(t, c, spotJob("noaudit"))})
	runReplicas(t, c, 1, 100, nil)
	j := job(t, c, 1)
	if len(j.Assignments) != 2 || !j.Assignments[1].Extra {
		t.Fatalf("no audit replica placed: %+v", j.Assignments)
	}
	audit := j.Assignments[1]
	before, treasury := c.Balance(t, audit.Provider), ledger.Treasury(c.KV)
	grant := ledger.DefaultParams().JobGrantTimeout
	c.Advance(time.Duration(grant+1) * time.Second)
	c.ApplyBlock(t)
	j = job(t, c, 1)
	if assignmentOf(j, audit.Provider) != nil {
		t.Fatalf("the ungranted auditor is still assigned: %s (%s)", j.State, j.Reason)
	}
	want := audit.PricePerHour * grant / 3600
	if got := c.Balance(t, audit.Provider) - before; got != want || j.AuditCost != want || ledger.Treasury(c.KV) != treasury-want {
		t.Fatalf("auditor got %d (audit cost %d, treasury %d → %d), want %d for %d s held", got, j.AuditCost, treasury, ledger.Treasury(c.KV), want, grant)
	}
	if p := provider(t, c, provKey(t, audit.Provider)); p.Jobs != 0 {
		t.Fatalf("the auditor's slot is still taken: jobs %d", p.Jobs)
	}
}
