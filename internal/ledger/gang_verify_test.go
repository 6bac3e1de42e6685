package ledger_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// fullGangSpec is gangSpec(nodes) at verification full, deterministic.
func fullGangSpec(nodes uint64) ledger.JobSpec {
	s := gangSpec(nodes)
	s.Verification, s.Deterministic = ledger.VerifyFull, true
	return s
}

// euProvs is n gang providers in eu, the first the cheapest.
func euProvs(n int) []gangProv {
	ps := make([]gangProv, n)
	for i := range ps {
		ps[i] = gangProv{"eu", false, uint64(10_000 + 1_000*i)}
	}
	return ps
}

// replicaGangsOf is j's members as [gang][rank]; it fails the test when a
// provider is in two places or a gang's ranks are not 0..nodes-1.
func replicaGangsOf(t *testing.T, j *ledger.Job) [][]address.Address {
	t.Helper()
	var out [][]address.Address
	seen := map[address.Address]bool{}
	for _, a := range j.Assignments {
		for uint64(len(out)) <= a.Gang {
			out = append(out, make([]address.Address, j.Spec.Nodes))
		}
		if seen[a.Provider] || a.Rank >= j.Spec.Nodes || out[a.Gang][a.Rank] != (address.Address{}) {
			t.Fatalf("job %d: a provider or a (gang, rank) repeats: %+v", j.ID, j.Assignments)
		}
		seen[a.Provider], out[a.Gang][a.Rank] = true, a.Provider
	}
	return out
}

// gangManifest is what rank rank of a gang outputs: the honest one, or
// (corrupted) what every rank of a gang with a cheating member outputs.
func gangManifest(rank uint64, corrupted bool) ledger.Hash {
	h := ledger.Hash{0x60, byte(rank)}
	if corrupted {
		h[2] = 0xee
	}
	return h
}

func gangSalt(a address.Address) ledger.Hash { return ledger.Hash{0x5a, a[0], a[1], a[2]} }

// runGangMembers grants the key to j's members that have none, has each
// post a member key, start, and commit its rank's output after 100 s
// (corrupted for the providers in bad). It returns who committed.
func runGangMembers(t *testing.T, c *lt.Chain, ks []lt.Key, id uint64, bad map[address.Address]bool) []*ledger.Assignment {
	t.Helper()
	var grants []ledger.Grant
	for _, a := range job(t, c, id).Assignments {
		if a.KeyGrant == nil {
			grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("wrapped")})
		}
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: id, Grants: grants})})
	var ran []*ledger.Assignment
	for _, a := range job(t, c, id).Assignments {
		if a.StartedAt == 0 {
			must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgGangMember{JobID: id, PublicKey: ledger.Hash{0xbb, byte(a.Gang), byte(a.Rank), a.Provider[0], a.Provider[1]}})})
		}
	}
	for _, a := range job(t, c, id).Assignments {
		if a.StartedAt == 0 {
			must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgStartJob{JobID: id})})
			ran = append(ran, &a)
		}
	}
	c.Advance(100 * time.Second)
	for _, a := range ran {
		cm := ledger.ResultCommitment(gangManifest(a.Rank, bad[a.Provider]), a.Provider, gangSalt(a.Provider))
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgCommitResult{JobID: id, Commitment: &cm, MeteredSeconds: 90})})
	}
	return ran
}

// revealGang has each member in who open its commitment.
func revealGang(t *testing.T, c *lt.Chain, ks []lt.Key, id uint64, who []*ledger.Assignment, bad map[address.Address]bool) {
	t.Helper()
	for _, a := range who {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgRevealResult{JobID: id, Salt: gangSalt(a.Provider), Result: ledger.JobResult{
			ManifestHash: gangManifest(a.Rank, bad[a.Provider]), OutputBlob: fmt.Sprintf("sha256:%064x", a.Provider[0]),
		}})})
	}
}

// TestGangFullRefusals: spot is still refused for a gang; full needs a
// deterministic job, an exact comparison and no checkpoints.
func TestGangFullRefusals(t *testing.T) {
	if s := fullGangSpec(2); s.Validate() != nil {
		t.Fatalf("a deterministic gang at full: %v", s.Validate())
	}
	for _, tc := range []struct {
		name string
		edit func(*ledger.JobSpec)
		want string
	}{
		{"spot", func(s *ledger.JobSpec) { s.Verification = ledger.VerifySpot }, "verification spot"},
		{"not deterministic", func(s *ledger.JobSpec) { s.Deterministic = false }, "deterministic"},
		{"checkpoint", func(s *ledger.JobSpec) { s.Checkpoint = &ledger.CheckpointSpec{Path: "/ckpt", IntervalSeconds: 600} }, "checkpoint"},
	} {
		s := fullGangSpec(2)
		tc.edit(&s)
		if err := s.Validate(); !errors.Is(err, ledger.ErrInvalidMsg) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want refused saying %q", tc.name, err, tc.want)
		}
	}
}

// TestGangFullPlacesWholeReplicaGangs: a gang of 2 at full takes 2 whole
// gangs, 4 distinct providers, each gang ranked 0..1 in one site, and its
// escrow covers R × N members; with 3 that fit it waits (too few), and with
// 4 that fit of which no 2 pairs share a site, it waits apart.
func TestGangFullPlacesWholeReplicaGangs(t *testing.T) {
	c, _ := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"us", false, 11_000}, gangProv{"eu", false, 12_000}, gangProv{"us", false, 13_000}, gangProv{"ap", false, 14_000})
	must(t, []ledger.TxResult{submit(t, c, fullGangSpec(2))})
	j := job(t, c, 1)
	if j.State != ledger.JobAssigned || len(j.Assignments) != 4 || j.Replicas != 4 {
		t.Fatalf("full gang of 2: %s with %d members (replicas %d), want assigned with 4 (%+v)", j.State, len(j.Assignments), j.Replicas, unplaced(j))
	}
	gs := replicaGangsOf(t, j)
	if len(gs) != 2 {
		t.Fatalf("%d replica gangs, want 2", len(gs))
	}
	region := map[address.Address]string{}
	for _, k := range []int{0, 1, 2, 3, 4} {
		region[lt.NewKey(fmt.Sprintf("gang%d", k)).Addr] = []string{"eu", "us", "eu", "us", "ap"}[k]
	}
	for g, m := range gs {
		if region[m[0]] != region[m[1]] {
			t.Errorf("replica gang %d spans %s and %s", g, region[m[0]], region[m[1]])
		}
	}
	p, _ := ledger.GetParams(c.KV)
	single := gangSpec(2)
	if j.Escrow != ledger.JobEscrow(&j.Spec, p) || j.Escrow != 2*ledger.JobEscrow(&single, p) {
		t.Errorf("escrow %d, want twice a single gang's %d", j.Escrow, ledger.JobEscrow(&single, p))
	}

	// A quote prices the 4 members it would get.
	spec := fullGangSpec(2)
	if q, err := ledger.QuoteJob(c.KV, &spec); err != nil || q.Replicas != 4 || q.Nodes != 2 || q.Code != "" || q.MaxCost == 0 {
		t.Errorf("quote of a full gang of 2 beside it: %+v, %v; want 4 members, 2 per gang, placeable", q, err)
	}

	// Too few: 3 providers fit.
	c2, _ := gangChain(t, euProvs(3)...)
	must(t, []ledger.TxResult{submit(t, c2, fullGangSpec(2))})
	if m := unplaced(job(t, c2, 1)); m == nil || job(t, c2, 1).WaitCode != ledger.QuoteTooFew || m.Fit != 3 || m.Need != 4 {
		t.Errorf("3 providers for 2 gangs of 2: waits %q %+v, want too few (fit 3, need 4)", job(t, c2, 1).WaitCode, m)
	}
	// Apart: 4 fit, one pair in eu, the others alone.
	c3, _ := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"eu", false, 11_000}, gangProv{"us", false, 12_000}, gangProv{"ap", false, 13_000})
	must(t, []ledger.TxResult{submit(t, c3, fullGangSpec(2))})
	if m := unplaced(job(t, c3, 1)); m == nil || job(t, c3, 1).WaitCode != ledger.QuoteApart || m.Fit != 4 {
		t.Errorf("4 providers, one pair in a site: waits %q %+v, want apart", job(t, c3, 1).WaitCode, m)
	}
	// A single gang of the same shape is placed there: the site rule is
	// per replica gang.
	must(t, []ledger.TxResult{submit(t, c3, gangSpec(2))})
	if j := job(t, c3, 2); j.State != ledger.JobAssigned {
		t.Errorf("a single gang of 2 beside it: %s", j.State)
	}
}

// TestGangFullHonestGangsValidated: two honest replica gangs agree rank
// for rank: the job is validated, every member paid its seconds and
// credited a validated result, rank 0 of the first gang delivered.
func TestGangFullHonestGangsValidated(t *testing.T) {
	c, ks := gangChain(t, euProvs(4)...)
	must(t, []ledger.TxResult{submit(t, c, fullGangSpec(2))})
	ran := runGangMembers(t, c, ks, 1, nil)
	if j := job(t, c, 1); !j.Revealing || j.State != ledger.JobVerifying {
		t.Fatalf("after every member committed: %s revealing=%v, want revealing", j.State, j.Revealing)
	}
	revealGang(t, c, ks, 1, ran, nil)
	j := job(t, c, 1)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated {
		t.Fatalf("honest gangs: %s %s (%+v), want succeeded, validated", j.State, j.Verdict, j.Wait)
	}
	checkWait(t, "verdict", j.Wait, ledger.Wait{Code: ledger.WaitAgreed, Count: 2, Of: 2})
	gs := replicaGangsOf(t, j)
	if j.Delivered == nil || *j.Delivered != gs[0][0] {
		t.Errorf("delivered %v, want rank 0 of gang 0 %s", j.Delivered, gs[0][0])
	}
	for _, a := range j.Assignments {
		pr, _, _ := ledger.GetProvider(c.KV, a.Provider)
		if a.Outcome != ledger.OutcomeMajority || a.Paid != a.PricePerHour*90/3600 || a.Slashed != 0 || pr.Validated != 1 {
			t.Errorf("gang %d rank %d: %s paid %d slashed %d validated %d, want majority, paid %d", a.Gang, a.Rank, a.Outcome, a.Paid, a.Slashed, pr.Validated, a.PricePerHour*90/3600)
		}
	}
}

// TestGangFullCheatingMemberOutvoted: one member of gang 1 cheats, which
// corrupts every rank's output of its gang. The two gangs differ: the job
// gets a third whole gang, which agrees with gang 0. Gang 1's members,
// the honest one too, are not paid and count one invalid result, and
// nobody is slashed; the owner gets gang 1's share back.
func TestGangFullCheatingMemberOutvoted(t *testing.T) {
	c, ks := gangChain(t, euProvs(6)...)
	must(t, []ledger.TxResult{submit(t, c, fullGangSpec(2))})
	gs := replicaGangsOf(t, job(t, c, 1))
	bad := map[address.Address]bool{gs[1][0]: true, gs[1][1]: true}
	stake := map[address.Address]uint64{}
	for _, k := range ks {
		pr, _, _ := ledger.GetProvider(c.KV, k.Addr)
		stake[k.Addr] = pr.Stake
	}
	ran := runGangMembers(t, c, ks, 1, bad)
	revealGang(t, c, ks, 1, ran, bad)
	j := job(t, c, 1)
	if j.State != ledger.JobVerifying || j.Replicas != 6 || len(j.Assignments) != 6 {
		t.Fatalf("gangs differ: %s, replicas %d, %d members (%+v), want a third gang placed", j.State, j.Replicas, len(j.Assignments), j.Wait)
	}
	third := replicaGangsOf(t, j)[2]
	for _, a := range j.Assignments {
		if slices.Contains(third, a.Provider) && !a.Extra {
			t.Errorf("the escalation gang's member %s is not extra (the treasury pays it)", a.Provider)
		}
	}
	ran3 := runGangMembers(t, c, ks, 1, nil)
	revealGang(t, c, ks, 1, ran3, nil)
	j = job(t, c, 1)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated {
		t.Fatalf("after the third gang: %s %s (%+v), want validated", j.State, j.Verdict, j.Wait)
	}
	checkWait(t, "verdict", j.Wait, ledger.Wait{Code: ledger.WaitAgreed, Count: 2, Of: 3})
	var paid uint64
	for _, a := range j.Assignments {
		pr, _, _ := ledger.GetProvider(c.KV, a.Provider)
		if pr.Stake != stake[a.Provider] || a.Slashed != 0 || pr.Slashed != 0 {
			t.Errorf("gang %d rank %d slashed (stake %d → %d): nobody's lie is objective", a.Gang, a.Rank, stake[a.Provider], pr.Stake)
		}
		if a.Gang == 1 {
			if a.Outcome != ledger.OutcomeGangOutvoted || a.Paid != 0 || pr.Invalid != 1 || pr.Validated != 0 {
				t.Errorf("outvoted gang's rank %d: %s paid %d invalid %d", a.Rank, a.Outcome, a.Paid, pr.Invalid)
			}
			continue
		}
		if a.Outcome != ledger.OutcomeMajority || a.Paid == 0 || pr.Validated != 1 {
			t.Errorf("gang %d rank %d: %s paid %d validated %d, want majority, paid", a.Gang, a.Rank, a.Outcome, a.Paid, pr.Validated)
		}
		if !a.Extra {
			paid += a.Paid
		}
	}
	// The owner paid gang 0's members (and the fee) from the escrow; the
	// rest, gang 1's half included, came back.
	if esc := ledger.JobEscrow(&j.Spec, mustParams(t, c)); j.Cost != paid || j.Refund < esc/2 || j.Refund >= esc-paid {
		t.Errorf("cost %d refund %d paid to gang 0 %d, escrow %d", j.Cost, j.Refund, paid, ledger.JobEscrow(&j.Spec, mustParams(t, c)))
	}
}

func mustParams(t *testing.T, c *lt.Chain) ledger.Params {
	t.Helper()
	p, err := ledger.GetParams(c.KV)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGangFullSilentMember: a member that committed and does not reveal
// is slashed, as a silent replica is; its gang has no vote, so with one
// gang left the vote escalates... unless its co-member's own rank result
// equals the majority's: here the silent member is in gang 1 of 3 (one
// escalation first): gang 0 and 2 agree, the silent one is slashed, its
// honest co-member paid.
func TestGangFullSilentMember(t *testing.T) {
	c, ks := gangChain(t, euProvs(6)...)
	p := mustParams(t, c)
	must(t, []ledger.TxResult{submit(t, c, fullGangSpec(2))})
	gs := replicaGangsOf(t, job(t, c, 1))
	ran := runGangMembers(t, c, ks, 1, nil)
	silent := gs[1][1]
	var talk []*ledger.Assignment
	for _, a := range ran {
		if a.Provider != silent {
			talk = append(talk, a)
		}
	}
	revealGang(t, c, ks, 1, talk, nil)
	// The reveal window closes: gang 0 alone has a vote, 1 of 2 is no
	// majority: a third gang is asked for.
	c.Advance(time.Duration(p.RevealTimeout+1) * time.Second)
	c.ApplyBlock(t)
	j := job(t, c, 1)
	if j.State != ledger.JobVerifying || len(j.Assignments) != 6 {
		t.Fatalf("with one gang silent: %s, %d members (%+v), want a third gang", j.State, len(j.Assignments), j.Wait)
	}
	ran3 := runGangMembers(t, c, ks, 1, nil)
	revealGang(t, c, ks, 1, ran3, nil)
	c.Advance(time.Duration(p.RevealTimeout+1) * time.Second)
	c.ApplyBlock(t)
	j = job(t, c, 1)
	if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated {
		t.Fatalf("after the third gang: %s %s (%+v)", j.State, j.Verdict, j.Wait)
	}
	for _, a := range j.Assignments {
		switch {
		case a.Provider == silent:
			if a.Outcome != ledger.OutcomeUnrevealed || a.Slashed == 0 || a.Paid != 0 {
				t.Errorf("the silent member: %s slashed %d paid %d, want unrevealed, slashed", a.Outcome, a.Slashed, a.Paid)
			}
		default:
			if a.Outcome != ledger.OutcomeMajority || a.Slashed != 0 || a.Paid == 0 {
				t.Errorf("gang %d rank %d: %s slashed %d paid %d, want paid (its own rank's result is the majority's)", a.Gang, a.Rank, a.Outcome, a.Slashed, a.Paid)
			}
		}
	}
}

// TestGangFullLostMember: a member lost before anything was committed
// sends the whole job back (both gangs); one lost after gang 0 committed
// replaces only its own gang, as a whole, and gang 0 keeps its
// commitments and its place; the job then ends validated.
func TestGangFullLostMember(t *testing.T) {
	c, ks := gangChain(t, euProvs(7)...)
	must(t, []ledger.TxResult{submit(t, c, fullGangSpec(2))})
	gs := replicaGangsOf(t, job(t, c, 1))
	must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, gs[1][1]), &ledger.MsgSetProviderStatus{Online: false})})
	j := job(t, c, 1)
	if j.Attempts != 2 || len(j.Assignments) != 4 || slices.ContainsFunc(j.Assignments, func(a ledger.Assignment) bool { return a.Provider == gs[1][1] }) {
		t.Fatalf("lost before any commit: %d attempts, %d members, want placed again whole without the lost one", j.Attempts, len(j.Assignments))
	}

	// Now gang 0 runs and commits; gang 1's rank 0 goes offline.
	gs = replicaGangsOf(t, j)
	var grants []ledger.Grant
	for _, a := range j.Assignments {
		grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("w")})
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: grants})})
	for _, a := range j.Assignments {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgGangMember{JobID: 1, PublicKey: ledger.Hash{0xcc, byte(a.Gang), byte(a.Rank)}})})
	}
	var gang0 []*ledger.Assignment
	for _, a := range j.Assignments {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgStartJob{JobID: 1})})
		if a.Gang == 0 {
			gang0 = append(gang0, &a)
		}
	}
	c.Advance(100 * time.Second)
	for _, a := range gang0 {
		cm := ledger.ResultCommitment(gangManifest(a.Rank, false), a.Provider, gangSalt(a.Provider))
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: 90})})
	}
	must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, gs[1][0]), &ledger.MsgSetProviderStatus{Online: false})})
	j = job(t, c, 1)
	if j.Attempts != 3 || len(j.Assignments) != 4 || j.State != ledger.JobVerifying {
		t.Fatalf("lost after gang 0 committed: %s, %d attempts, %d members (%+v), want gang 1 replaced", j.State, j.Attempts, len(j.Assignments), j.Wait)
	}
	now := replicaGangsOf(t, j)
	if fmt.Sprint(now[0]) != fmt.Sprint(gs[0]) {
		t.Errorf("gang 0 is %v, was %v: it should keep its place", now[0], gs[0])
	}
	for _, a := range j.Assignments {
		if a.Gang == 0 && a.Commitment == nil {
			t.Errorf("gang 0's rank %d lost its commitment", a.Rank)
		}
		// Its surviving member may be placed again; the lost one not.
		if a.Gang == 1 && (a.Provider == gs[1][0] || a.Commitment != nil || a.Placement != 3) {
			t.Errorf("gang 1's new rank %d: %s (placement %d), was %v", a.Rank, a.Provider, a.Placement, gs[1])
		}
	}
	ran := runGangMembers(t, c, ks, 1, nil)
	if len(ran) != 2 {
		t.Fatalf("%d members ran after the replacement, want gang 1's 2", len(ran))
	}
	revealGang(t, c, ks, 1, append(gang0, ran...), nil)
	if j := job(t, c, 1); j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated {
		t.Fatalf("after the replacement gang: %s %s (%+v)", j.State, j.Verdict, j.Wait)
	}
}

// TestGangFullMemberCannotClaimAnothersOutput: a member that copies
// another gang's member's commitment (it is on chain) cannot open it: the
// commitment binds the committer's address, so revealing the other's salt
// and result is refused, and at the reveal deadline the copier is slashed
// as silent, its gang has no vote, and it is paid nothing.
func TestGangFullMemberCannotClaimAnothersOutput(t *testing.T) {
	c, ks := gangChain(t, euProvs(4)...)
	p := mustParams(t, c)
	must(t, []ledger.TxResult{submit(t, c, fullGangSpec(2))})
	gs := replicaGangsOf(t, job(t, c, 1))
	var grants []ledger.Grant
	for _, a := range job(t, c, 1).Assignments {
		grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("w")})
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: grants})})
	for _, a := range job(t, c, 1).Assignments {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgGangMember{JobID: 1, PublicKey: ledger.Hash{0xdd, byte(a.Gang), byte(a.Rank)}})})
	}
	for _, a := range job(t, c, 1).Assignments {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgStartJob{JobID: 1})})
	}
	c.Advance(100 * time.Second)
	honest, copier := gs[0][0], gs[1][0]
	var theirs ledger.Hash
	for _, a := range job(t, c, 1).Assignments {
		cm := ledger.ResultCommitment(gangManifest(a.Rank, false), a.Provider, gangSalt(a.Provider))
		if a.Provider == copier {
			cm = theirs // rank 0 of gang 0 committed first
		}
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: 90})})
		if a.Provider == honest {
			theirs = *job(t, c, 1).Assignments[0].Commitment
		}
	}
	if theirs == (ledger.Hash{}) {
		t.Fatal("gang 0's rank 0 is not the first assignment")
	}
	claim := &ledger.MsgRevealResult{JobID: 1, Salt: gangSalt(honest), Result: ledger.JobResult{ManifestHash: gangManifest(0, false), OutputBlob: fmt.Sprintf("sha256:%064x", honest[0])}}
	if r := send(t, c, keyFor(t, ks, copier), claim); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("the copier revealing the other's salt and result: %v, want refused", r.Err)
	}
	for _, a := range job(t, c, 1).Assignments {
		if a.Provider != copier {
			must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgRevealResult{JobID: 1, Salt: gangSalt(a.Provider), Result: ledger.JobResult{
				ManifestHash: gangManifest(a.Rank, false), OutputBlob: fmt.Sprintf("sha256:%064x", a.Provider[0])}})})
		}
	}
	// The reveal window closes: one gang of two has a vote, no majority;
	// the job asks for a third gang, which nobody can take (4 providers,
	// all in it), and at the end of the grant window it ends as a single
	// job with a lone result does: failed, nobody who revealed paid or
	// slashed, the silent copier slashed.
	c.Advance(time.Duration(p.RevealTimeout+1) * time.Second)
	c.ApplyBlock(t)
	if j := job(t, c, 1); j.State != ledger.JobVerifying || j.Replicas != 6 {
		t.Fatalf("after the reveal window: %s, %d members wanted (%+v), want a third gang asked for", j.State, j.Replicas, j.Wait)
	}
	c.Advance(time.Duration(p.JobGrantTimeout+1) * time.Second)
	c.ApplyBlock(t)
	j := job(t, c, 1)
	if j.State != ledger.JobFailed || j.Verdict != ledger.VerdictNoMajority || j.Wait == nil || j.Wait.Code != ledger.WaitLoneResult {
		t.Fatalf("after the grant window: %s %s (%+v), want failed, lone result", j.State, j.Verdict, j.Wait)
	}
	for _, a := range j.Assignments {
		switch {
		case a.Provider == copier:
			if a.Outcome != ledger.OutcomeUnrevealed || a.Slashed == 0 || a.Paid != 0 {
				t.Errorf("the copier: %s slashed %d paid %d, want unrevealed, slashed, unpaid", a.Outcome, a.Slashed, a.Paid)
			}
		case a.Outcome != ledger.OutcomeNoMajority || a.Slashed != 0 || a.Paid != 0:
			t.Errorf("gang %d rank %d: %s slashed %d paid %d, want no_majority, neither", a.Gang, a.Rank, a.Outcome, a.Slashed, a.Paid)
		}
	}
}
