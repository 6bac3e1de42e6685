package ledger_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/ledger/verify"
)

// Issue 26, "a job never stays verifying forever": a job whose vote cannot
// be decided with the replicas it has asks for one more; when that one
// cannot be added the job is decided for good, within the bound the docs
// state (ledger.VerdictWindow, ledger.VerifyingBound).

// blockAt applies an empty block whose time is at (unix seconds), which
// must not be before the next block's own time.
func blockAt(t *testing.T, c *lt.Chain, at int64) {
	t.Helper()
	next := lt.BlockTime(c.Height + 1).Add(c.Offset).Unix()
	if at < next {
		t.Fatalf("block at %d: the next block is at %d already", at, next)
	}
	c.Advance(time.Duration(at-next) * time.Second)
	c.ApplyBlock(t)
}

// commitOne starts (if it has not) and commits job id on k: a wrong result
// if wrong, else the honest one (reveal opens either).
func commitOne(t *testing.T, c *lt.Chain, id uint64, k lt.Key, metered uint64, wrong bool) {
	t.Helper()
	if a := assignmentOf(job(t, c, id), k.Addr); a.StartedAt == 0 {
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStartJob{JobID: id})})
	}
	cm := ledger.ResultCommitment(manifest(!wrong, k), k.Addr, salt(k))
	must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgCommitResult{JobID: id, Commitment: &cm, MeteredSeconds: metered})})
}

func slashOf(p ledger.Params) uint64 { return uint64(stake) * p.SlashBps / 10_000 }

// TestUnrevealedReplicaWithNoProviderFreeEnds is the case measured on a
// devnet: every replica committed, one did not reveal (its provider was
// killed), so the one revealed result is no majority; the job asks for one
// more replica, and no provider is free to take it. Before, the job dropped
// the slot at the grant deadline, decided again with the same numbers and
// asked again, moving its deadline forever with the owner's escrow locked.
// Now it fails exactly VerdictWindow after the last commit: the silent
// replica is slashed as one that withheld its reveal, the lone revealed
// result is neither paid nor delivered (else killing the replica that
// checks it would pay), and the owner gets the escrow back in full plus
// the compensation share of the slash.
func TestUnrevealedReplicaWithNoProviderFreeEnds(t *testing.T) {
	p := ledger.DefaultParams()
	for _, tc := range []struct {
		name         string
		verification string
		silent       int // index of the assignment that does not reveal
	}{
		{"spot, the primary killed before its reveal", "spot", 0},
		{"spot, the audit replica killed before its reveal", "spot", 1},
		{"full, one planned replica killed before its reveal", "full", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := verifyChain(t, 2, nil) // two providers: nobody else can check
			before := c.Balance(t, consumer.Addr)
			treasury := ledger.Treasury(c.KV)
			spec := spotJob("lone")
			spec.Verification = tc.verification
			must(t, []ledger.TxResult{submit(t, c, spec)})
			escrow := job(t, c, 1).Escrow
			runReplicas(t, c, 1, 60, nil)
			if tc.verification == "spot" {
				runReplicas(t, c, 1, 60, nil) // the audit replica
			}
			j := job(t, c, 1)
			if !j.Revealing || len(j.Assignments) != 2 {
				t.Fatalf("want two committed replicas revealing: %s (%s) %+v", j.State, j.Reason, j.Assignments)
			}
			committedAt := c.Now().Unix()
			silent := provKey(t, j.Assignments[tc.silent].Provider)
			talker := provKey(t, j.Assignments[1-tc.silent].Provider)
			must(t, []ledger.TxResult{reveal(t, c, 1, talker, false)})

			// The reveal window closes: one result of two is no majority,
			// so the job asks for a third replica.
			blockAt(t, c, committedAt+int64(p.RevealTimeout))
			j = job(t, c, 1)
			if j.Done() || j.Replicas != 3 || ledger.QueueLen(c.KV) != 1 {
				t.Fatalf("after the reveal window: %s replicas %d queue %d (%s); want an escalation", j.State, j.Replicas, ledger.QueueLen(c.KV), j.Reason)
			}
			// Nobody takes it by the grant deadline: decided for good.
			blockAt(t, c, committedAt+int64(ledger.VerdictWindow(p)))
			j = job(t, c, 1)
			if !j.Done() {
				t.Fatalf("%s after the verdict window (%s), deadline %d: the job asks again", j.State, j.Reason, j.Deadline)
			}
			if got := j.FinishedAt - committedAt; got > int64(ledger.VerdictWindow(p)) {
				t.Fatalf("final %d s after the last commit, bound %d", got, ledger.VerdictWindow(p))
			}
			if j.State != ledger.JobFailed || j.Verdict != ledger.VerdictNoMajority || j.Delivered != nil || j.Dropped == nil {
				t.Fatalf("got %s %s delivered %v dropped %+v (%s)", j.State, j.Verdict, j.Delivered, j.Dropped, j.Reason)
			}
			s, l := assignmentOf(j, silent.Addr), assignmentOf(j, talker.Addr)
			if s.Outcome != ledger.OutcomeUnrevealed || s.Slashed != slashOf(p) || s.Paid != 0 {
				t.Errorf("silent replica: outcome %q slashed %d paid %d; want unrevealed, %d, 0", s.Outcome, s.Slashed, s.Paid, slashOf(p))
			}
			if pr := provider(t, c, silent); pr.Unrevealed != 1 || pr.Jobs != 0 {
				t.Errorf("silent provider: unrevealed %d jobs %d", pr.Unrevealed, pr.Jobs)
			}
			if l.Outcome != ledger.OutcomeNoMajority || l.Slashed != 0 || l.Paid != 0 {
				t.Errorf("lone revealer: outcome %q slashed %d paid %d; want no_majority, not slashed, not paid", l.Outcome, l.Slashed, l.Paid)
			}
			comp := slashOf(p) * p.SlashCompensationBps / 10_000
			if j.Cost != 0 || j.Fee != 0 || j.AuditCost != 0 || j.Refund != escrow || c.Balance(t, consumer.Addr) != before+comp {
				t.Errorf("cost %d fee %d audit %d refund %d of %d; owner %d → %d, want a full refund plus %d", j.Cost, j.Fee, j.AuditCost, j.Refund, escrow, before, c.Balance(t, consumer.Addr), comp)
			}
			if got, want := ledger.Treasury(c.KV), treasury+slashOf(p)-comp; got != want {
				t.Errorf("treasury %d, want %d (the slash less the compensation)", got, want)
			}
			// Nothing more happens to it, however long nobody is free.
			final := *j
			for range 3 {
				c.Advance(time.Duration(p.JobGrantTimeout) * time.Second)
				c.ApplyBlock(t)
			}
			if j = job(t, c, 1); j.FinishedAt != final.FinishedAt || j.Reason != final.Reason || ledger.QueueLen(c.KV) != 0 || j.Deadline != 0 {
				t.Fatalf("the finished job changed: %+v", j)
			}
		})
	}
}

// TestRepeatedEscalationWithoutProviderEnds: replicas disagree, and the
// escalation replica the job asks for never commits: nobody free, a
// provider the owner (offline) never grants, or one that takes the key and
// never starts (replaced by itself until the placement budget is spent).
// Before, each dropped escalation was followed by the same verdict and the
// same request, forever. Now the job fails with no majority, refunded in
// full, nobody who revealed slashed, within VerifyingBound of its first
// commit and after at most job_max_attempts + max_replicas placements.
func TestRepeatedEscalationWithoutProviderEnds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		providers  int  // the fourth, if any, takes the escalation replica
		ownerGrant bool // the owner grants the fourth the key
	}{
		{"no fourth provider", 3, false},
		{"the owner never grants the fourth", 4, false},
		{"the fourth never starts", 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := verifyChain(t, tc.providers, nil)
			p := ledger.DefaultParams()
			before := c.Balance(t, consumer.Addr)
			spec := spotJob("disagree")
			must(t, []ledger.TxResult{submit(t, c, spec)})
			all := map[address.Address]bool{}
			for _, k := range provs {
				all[k.Addr] = true // every replica a different result
			}
			firstCommit := c.Now().Unix() + 1
			ran := runReplicas(t, c, 1, 30, all)
			ran = append(ran, runReplicas(t, c, 1, 30, all)...) // the audit
			for _, k := range ran {
				must(t, []ledger.TxResult{reveal(t, c, 1, k, true)})
			}
			third := runReplicas(t, c, 1, 30, all) // the first escalation
			must(t, []ledger.TxResult{reveal(t, c, 1, third[0], true)})
			ran = append(ran, third...)
			j := job(t, c, 1)
			if j.Done() || j.Replicas != 4 {
				t.Fatalf("three results from three replicas: %s replicas %d (%s); want a fourth asked for", j.State, j.Replicas, j.Reason)
			}
			fourth := provs[3].Addr
			for step := 0; !j.Done(); step++ {
				if step > 50 {
					t.Fatalf("not final after %d deadlines: %s (%s), attempts %d", step, j.State, j.Reason, j.Attempts)
				}
				if a := assignmentOf(j, fourth); a != nil && a.KeyGrant == nil && tc.ownerGrant {
					must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: fourth, WrappedKey: []byte("wrapped")}}})})
					j = job(t, c, 1)
				}
				blockAt(t, c, max(j.Deadline, c.Now().Unix()+1))
				j = job(t, c, 1)
			}
			if j.State != ledger.JobFailed || j.Verdict != ledger.VerdictNoMajority || len(j.Assignments) != 3 {
				t.Fatalf("got %s %s with %d assignments (%s)", j.State, j.Verdict, len(j.Assignments), j.Reason)
			}
			if lim := p.JobMaxAttempts + p.MaxReplicas; j.Attempts > lim {
				t.Errorf("%d placements, budget %d", j.Attempts, lim)
			}
			if got, lim := j.FinishedAt-firstCommit, int64(ledger.VerifyingBound(&spec, p)); got > lim {
				t.Errorf("final %d s after the first commit, bound %d", got, lim)
			}
			for _, k := range ran {
				if a := assignmentOf(j, k.Addr); a.Outcome != ledger.OutcomeNoMajority || a.Slashed != 0 || a.Paid != 0 {
					t.Errorf("%s: outcome %q slashed %d paid %d; want no_majority, neither", k.Addr.String(), a.Outcome, a.Slashed, a.Paid)
				}
			}
			// The fourth, if it held the slot, was paid for that time by
			// the treasury (an extra replica); the owner paid nothing.
			if j.Cost != 0 || c.Balance(t, consumer.Addr) != before {
				t.Errorf("cost %d, owner %d → %d; want a full refund", j.Cost, before, c.Balance(t, consumer.Addr))
			}
			if tc.providers == 4 {
				if pr := provider(t, c, provs[3]); pr.Jobs != 0 || pr.Slashed != 0 {
					t.Errorf("the fourth provider: jobs %d slashed %d", pr.Jobs, pr.Slashed)
				}
			}
		})
	}
}

// handOverTo seals jobKeyText from `from` to the handover key that `to`
// posted on job id.
func handOverTo(t *testing.T, c *lt.Chain, id uint64, from, to lt.Key) ledger.TxResult {
	t.Helper()
	a := assignmentOf(job(t, c, id), to.Addr)
	if a == nil || a.HandoverKey == nil {
		t.Fatalf("%s posted no handover key on job %d", to.Addr.String(), id)
	}
	sealed, err := ledger.SealHandover(jobKeyText, *a.HandoverKey, primaryEphem, id)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, c, from, &ledger.MsgHandOverKey{JobID: id, Provider: to.Addr, Sealed: sealed})
}

// requestKey posts k's handover key on job id.
func requestKey(t *testing.T, c *lt.Chain, id uint64, k lt.Key, secret ledger.Hash) ledger.TxResult {
	t.Helper()
	pub, err := ledger.HandoverPublicKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, c, k, &ledger.MsgRequestKeyHandover{JobID: id, PublicKey: pub})
}

// TestNewReplicaGetsKeyByHandover: with the owner offline after its first
// grant, a replica placed on a committed job gets the job key from a
// committed replica, not only a spot job's first audit replica: an
// escalation replica from the audit replica that itself got the key by
// handover (the primary was killed before it revealed), and a full job's
// replacement replica from the replica that committed. Before, only an
// extra replica could ask, so a replacement waited for the owner until the
// job failed.
func TestNewReplicaGetsKeyByHandover(t *testing.T) {
	p := ledger.DefaultParams()
	escSecret := ledger.Hash{0x43, 9}

	t.Run("escalation replica, from the audit replica", func(t *testing.T) {
		c, primary, auditor := offlineOwnerAudit(t)
		before := c.Balance(t, consumer.Addr)
		escrow := job(t, c, 1).Escrow
		must(t, []ledger.TxResult{handOver(t, c, primary, auditor, jobKeyText)})
		commitOne(t, c, 1, auditor, 60, false)
		committedAt := c.Now().Unix()
		must(t, []ledger.TxResult{reveal(t, c, 1, auditor, false)})
		// The primary was killed after its commit: it never reveals.
		blockAt(t, c, committedAt+int64(p.RevealTimeout))
		j := job(t, c, 1)
		if j.Replicas != 3 || len(j.Assignments) != 3 || !j.Assignments[2].Extra {
			t.Fatalf("no escalation replica placed: %s (%s) %+v", j.State, j.Reason, j.Assignments)
		}
		third := provKey(t, j.Assignments[2].Provider)
		must(t, []ledger.TxResult{requestKey(t, c, 1, third, escSecret)})
		// The auditor's own key came by handover; it hands it on.
		must(t, []ledger.TxResult{handOverTo(t, c, 1, auditor, third)})
		a := assignmentOf(job(t, c, 1), third.Addr)
		if a.HandedBy == nil || *a.HandedBy != auditor.Addr {
			t.Fatalf("handover to the escalation replica not recorded: %+v", a)
		}
		if got, err := ledger.OpenHandover(a.KeyGrant, escSecret, 1); err != nil || ledger.JobKeyCommitment(got) != *job(t, c, 1).KeyCommitment {
			t.Fatalf("the escalation replica opens %q, %v; want the committed key", got, err)
		}
		commitOne(t, c, 1, third, 60, false)
		committedAt = c.Now().Unix()
		must(t, []ledger.TxResult{reveal(t, c, 1, third, false)})
		blockAt(t, c, committedAt+int64(p.RevealTimeout))
		j = job(t, c, 1)
		if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || *j.Delivered != auditor.Addr {
			t.Fatalf("got %s %s delivered %v (%s)", j.State, j.Verdict, j.Delivered, j.Reason)
		}
		if pa := assignmentOf(j, primary.Addr); pa.Outcome != ledger.OutcomeUnrevealed || pa.Slashed != slashOf(p) || pa.Paid != 0 {
			t.Errorf("the silent primary: outcome %q slashed %d paid %d", pa.Outcome, pa.Slashed, pa.Paid)
		}
		// Both checkers are extra replicas, paid by the treasury; the owner
		// planned only the primary, which earned nothing.
		if aa, ta := assignmentOf(j, auditor.Addr), assignmentOf(j, third.Addr); aa.Paid == 0 || ta.Paid == 0 || j.AuditCost != aa.Paid+ta.Paid {
			t.Errorf("auditor paid %d, escalation paid %d, audit cost %d", aa.Paid, ta.Paid, j.AuditCost)
		}
		comp := slashOf(p) * p.SlashCompensationBps / 10_000
		if j.Cost != 0 || j.Refund != escrow || c.Balance(t, consumer.Addr) != before+escrow+comp {
			t.Errorf("cost %d refund %d of %d; owner %d → %d, want the escrow back in full plus %d", j.Cost, j.Refund, escrow, before, c.Balance(t, consumer.Addr), comp)
		}
	})

	t.Run("replacement replica, from the committed replica", func(t *testing.T) {
		c := verifyChain(t, 3, nil)
		kc := ledger.JobKeyCommitment(jobKeyText)
		spec := spotJob("replace")
		spec.Verification = "full"
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: lt.AgeKey("consumer"), KeyCommitment: &kc})})
		j := job(t, c, 1)
		var grants []ledger.Grant
		for _, a := range j.Assignments {
			grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("wrapped")})
		}
		// The owner's one grant; it sends nothing after this.
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: grants})})
		done := provKey(t, j.Assignments[0].Provider)
		commitOne(t, c, 1, done, 60, false)
		// The other never starts: at the start deadline it is replaced.
		blockAt(t, c, max(job(t, c, 1).Deadline, c.Now().Unix()+1))
		j = job(t, c, 1)
		var repl lt.Key
		for _, a := range j.Assignments {
			if a.Provider != done.Addr && a.KeyGrant == nil && !a.Extra {
				repl = provKey(t, a.Provider)
			}
		}
		if repl.Addr.IsZero() || j.Attempts != 2 {
			t.Fatalf("no planned replacement placed: %s (%s) attempts %d %+v", j.State, j.Reason, j.Attempts, j.Assignments)
		}
		if r := requestKey(t, c, 1, repl, escSecret); r.Err != nil {
			t.Fatalf("the replacement asks for the key: %v", r.Err)
		}
		must(t, []ledger.TxResult{handOverTo(t, c, 1, done, repl)})
		commitOne(t, c, 1, repl, 60, false)
		must(t, []ledger.TxResult{reveal(t, c, 1, done, false)})
		must(t, []ledger.TxResult{reveal(t, c, 1, repl, false)})
		j = job(t, c, 1)
		if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || assignmentOf(j, repl.Addr).HandedBy == nil {
			t.Fatalf("got %s %s (%s) %+v", j.State, j.Verdict, j.Reason, j.Assignments)
		}
	})

	t.Run("only a replica placed after a commit asks", func(t *testing.T) {
		c := verifyChain(t, 3, nil)
		kc := ledger.JobKeyCommitment(jobKeyText)
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSubmitJob{Spec: spotJob("first"), ConsumerKey: lt.AgeKey("consumer"), KeyCommitment: &kc})})
		first := provKey(t, job(t, c, 1).Assignments[0].Provider)
		if r := requestKey(t, c, 1, first, escSecret); !errors.Is(r.Err, ledger.ErrJobState) {
			t.Fatalf("the first placement asks before anyone committed: %v", r.Err)
		}
	})
}

// TestVerifyingJobsEndWithinBound drives jobs through random behaviour of
// their providers and owner (wrong results, silence at each step, handovers
// or not, an owner online or not, time jumping to the deadlines) and checks
// that every job that committed a result reaches a final state within
// VerifyingBound of its first commit, settled by the rules: a replica that
// committed and did not reveal is slashed and unpaid, one in no majority
// neither paid nor slashed, the escrow empty.
func TestVerifyingJobsEndWithinBound(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 40
	}
	rounds, judgesSettled := uint64(0), 0
	for seed := range uint64(seeds) {
		r, s := runRandomJob(t, seed)
		rounds, judgesSettled = rounds+r, judgesSettled+s
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	// The compare jobs among them went through judging rounds, and some
	// judges were settled by their judgment (lying or silent).
	if rounds == 0 || judgesSettled == 0 {
		t.Errorf("%d judging rounds, %d judges settled by them across %d seeds: the random jobs do not exercise judging", rounds, judgesSettled, seeds)
	}
	t.Logf("%d judging rounds, %d judges slashed by their judgment", rounds, judgesSettled)
}

// runRandomJob drives one random job to its end and returns how many
// judging rounds it had and how many judges they settled.
func runRandomJob(t *testing.T, seed uint64) (uint64, int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 26))
	n := 2 + rng.IntN(3)
	maxReplicas := uint64(3 + rng.IntN(3))
	c := verifyChain(t, n, func(p *ledger.Params) { p.MaxReplicas = maxReplicas })
	p := ledger.DefaultParams()
	p.MaxReplicas = maxReplicas
	spec := spotJob("random")
	spec.TimeoutSeconds = 300
	if n > 2 && rng.IntN(2) == 0 {
		spec.Verification = "full"
	}
	// Half of the jobs judge outputs within a tolerance (issue 29): every
	// replica's output is then its own bytes, and a judging round follows
	// each reveal; judges may lie or stay silent. A second generator
	// keeps the draws above as they were for every seed.
	jrng := rand.New(rand.NewPCG(seed, 29))
	judged := jrng.IntN(2) == 0
	if judged {
		spec.Compare = &ledger.CompareSpec{RTolE18: 10_000_000_000_000}
	}
	m := &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: lt.AgeKey("consumer")}
	if rng.IntN(3) > 0 {
		kc := ledger.JobKeyCommitment(jobKeyText)
		m.KeyCommitment = &kc
	}
	must(t, []ledger.TxResult{send(t, c, consumer, m)})
	ownerOnline := rng.IntN(2) == 0
	type behaviour struct{ wrong, silent, neverStarts, lyingJudge, silentJudge bool }
	how := map[address.Address]behaviour{}
	for _, k := range provs[:n] {
		how[k.Addr] = behaviour{wrong: rng.IntN(4) == 0, silent: rng.IntN(4) == 0, neverStarts: rng.IntN(6) == 0,
			lyingJudge: jrng.IntN(5) == 0, silentJudge: jrng.IntN(6) == 0}
	}
	resultOf := func(k lt.Key, wrong bool) ledger.Hash {
		if judged {
			return floatManifest(k, wrong)
		}
		return manifest(!wrong, k)
	}
	var firstCommit int64
	bound := int64(ledger.VerifyingBound(&spec, p))
	for step := 0; ; step++ {
		j := job(t, c, 1)
		if firstCommit == 0 {
			for _, a := range j.Assignments {
				if a.Commitment != nil {
					firstCommit = c.Now().Unix()
				}
			}
		}
		if j.Done() {
			checkSettled(t, c, j, firstCommit, bound)
			settled := 0
			for _, a := range j.Assignments {
				if a.Result != nil && !isJudge(a) {
					settled++
				}
			}
			return j.JudgeRound, settled
		}
		if firstCommit != 0 && c.Now().Unix()-firstCommit > bound || step > 5000 {
			t.Fatalf("seed %d: %s (%s) %d s after its first commit (bound %d), %d steps: %+v", seed, j.State, j.Reason, c.Now().Unix()-firstCommit, bound, step, j)
		}
		if j.Deadline != 0 && j.Deadline <= c.Now().Unix()+1 {
			// The next block (a second later) reaches the deadline: the
			// ledger acts on it before any tx in that block.
			c.ApplyBlock(t)
			continue
		}
		// At most one action a step, so that each sees the job as it is.
		acted := false
		act := func(r ledger.TxResult) {
			acted = true
			if r.Err != nil {
				t.Fatalf("seed %d step %d: %v (job %s: %s)", seed, step, r.Err, j.State, j.Reason)
			}
		}
		committed := 0
		for _, a := range j.Assignments {
			if a.Commitment != nil {
				committed++
			}
		}
		for i := range j.Assignments {
			a := j.Assignments[i]
			k := provKey(t, a.Provider)
			b := how[a.Provider]
			switch {
			case a.KeyGrant == nil && (ownerOnline || committed == 0) && rng.IntN(4) > 0:
				// An owner offline still grants its first placement (its
				// CLI does at submit).
				act(send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: a.Provider, WrappedKey: []byte("wrapped")}}}))
			case a.KeyGrant == nil && a.HandoverKey == nil && j.KeyCommitment != nil && committed > 0 && rng.IntN(3) > 0:
				act(requestKey(t, c, 1, k, ledger.Hash{0x44, byte(i), byte(a.AssignedAt)}))
			case a.KeyGrant == nil && a.HandoverKey != nil:
				for _, o := range j.Assignments {
					if o.Commitment != nil && rng.IntN(3) > 0 {
						act(handOverTo(t, c, 1, provKey(t, o.Provider), k))
						break
					}
				}
			case a.KeyGrant != nil && a.StartedAt == 0 && !b.neverStarts && rng.IntN(4) > 0:
				act(send(t, c, k, &ledger.MsgStartJob{JobID: 1}))
			case a.StartedAt != 0 && a.Commitment == nil && rng.IntN(3) > 0:
				cm := ledger.ResultCommitment(resultOf(k, b.wrong), k.Addr, salt(k))
				act(send(t, c, k, &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: uint64(rng.IntN(200))}))
			case j.Revealing && a.Commitment != nil && a.Result == nil && !b.silent && rng.IntN(3) > 0:
				act(send(t, c, k, &ledger.MsgRevealResult{JobID: 1, Salt: salt(k), Result: ledger.JobResult{
					ManifestHash: resultOf(k, b.wrong), OutputBlob: fmt.Sprintf("sha256:%064x", k.Addr[0]),
				}}))
			case j.Judging && !j.JudgeRevealing && isJudge(a) && a.JudgeCommitment == nil && !b.silentJudge && jrng.IntN(3) > 0:
				act(commitJudgment(t, c, 1, k, judgeVector(j, b.lyingJudge, func(a address.Address) bool { return how[a].wrong })))
			case j.Judging && j.JudgeRevealing && a.JudgeCommitment != nil && a.Judgment == nil && !b.silentJudge && jrng.IntN(3) > 0:
				act(revealJudgment(t, c, 1, k, judgeVector(j, b.lyingJudge, func(a address.Address) bool { return how[a].wrong })))
			}
			if acted {
				break
			}
		}
		if acted {
			continue
		}
		// Nobody acted: time passes, to some point or to the deadline.
		if j.Deadline > c.Now().Unix() && rng.IntN(3) == 0 {
			blockAt(t, c, j.Deadline)
		} else {
			c.Advance(time.Duration(rng.IntN(20)) * time.Second)
			c.ApplyBlock(t)
		}
	}
}

// checkSettled checks a finished job against the settlement rules.
func checkSettled(t *testing.T, c *lt.Chain, j *ledger.Job, firstCommit, bound int64) {
	t.Helper()
	if firstCommit != 0 && j.FinishedAt-firstCommit > bound {
		t.Errorf("final %d s after the first commit, bound %d", j.FinishedAt-firstCommit, bound)
	}
	if j.Escrow != 0 || j.Deadline != 0 || ledger.QueueLen(c.KV) != 0 {
		t.Errorf("finished with escrow %d, deadline %d, queue %d", j.Escrow, j.Deadline, ledger.QueueLen(c.KV))
	}
	for _, a := range j.Assignments {
		switch {
		case a.Commitment != nil && a.Result == nil:
			if a.Slashed == 0 || a.Paid != 0 || (a.Outcome != ledger.OutcomeUnrevealed && a.Outcome != ledger.OutcomeWithheldKey) {
				t.Errorf("%s committed and did not reveal: outcome %q slashed %d paid %d (%s)", a.Provider, a.Outcome, a.Slashed, a.Paid, j.Reason)
			}
		case a.Outcome == ledger.OutcomeNoMajority:
			if a.Slashed != 0 || a.Paid != 0 {
				t.Errorf("%s in no majority: slashed %d paid %d", a.Provider, a.Slashed, a.Paid)
			}
		case a.Outcome == ledger.OutcomeJudgeOutvoted || a.Outcome == ledger.OutcomeJudgeSilent:
			if a.Slashed == 0 || a.Paid != 0 {
				t.Errorf("%s settled as a judge (%s): slashed %d paid %d", a.Provider, a.Outcome, a.Slashed, a.Paid)
			}
		case a.Outcome == ledger.OutcomeMinority:
			if a.Slashed == 0 || a.Paid != 0 {
				t.Errorf("%s outvoted: slashed %d paid %d", a.Provider, a.Slashed, a.Paid)
			}
		}
	}
	if j.State == ledger.JobSucceeded && (j.Verdict == ledger.VerdictNoMajority || j.Delivered == nil) {
		t.Errorf("succeeded with verdict %q, delivered %v", j.Verdict, j.Delivered)
	}
	for _, k := range provs {
		if pr, ok, _ := ledger.GetProvider(c.KV, k.Addr); ok && pr.Jobs != 0 {
			t.Errorf("%s still holds %d slots", k.Addr.String(), pr.Jobs)
		}
	}
}

func isJudge(a ledger.Assignment) bool {
	return a.Result != nil && a.Outcome != ledger.OutcomeJudgeOutvoted && a.Outcome != ledger.OutcomeJudgeSilent
}

// judgeVector is a judge's vector in j's round: the truth (a pair is the
// same unless one of them is wrong), or, for a liar, the same vector
// drawn from the round so that its commit and reveal match.
func judgeVector(j *ledger.Job, lie bool, wrong func(address.Address) bool) uint64 {
	judges := make([]bool, len(j.Assignments))
	for i, a := range j.Assignments {
		judges[i] = isJudge(a)
	}
	mask := verify.PairMask(judges)
	if lie {
		return (uint64(j.JudgeRound) * 0x9E3779B97F4A7C15) & mask
	}
	var v uint64
	for y := range judges {
		for x := range y {
			if judges[x] && judges[y] && !wrong(j.Assignments[x].Provider) && !wrong(j.Assignments[y].Provider) {
				v |= verify.PairBit(x, y)
			}
		}
	}
	return v
}
