package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// colludedResult is the wrong result that two provider keys of one
// operator agree on.
var colludedResult = ledger.Hash{0xBA, 0xD}

// commitAs is runReplicas with each replica's manifest chosen by results
// (honest when absent); the reveal must then use the same manifest.
func commitAs(t *testing.T, c *lt.Chain, id uint64, results map[address.Address]ledger.Hash) []lt.Key {
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
		if a.Commitment == nil {
			k := provKey(t, a.Provider)
			must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStartJob{JobID: id})})
			ran = append(ran, k)
		}
	}
	c.Advance(100 * time.Second)
	for _, k := range ran {
		cm := ledger.ResultCommitment(resultOf(results, k), k.Addr, salt(k))
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgCommitResult{JobID: id, Commitment: &cm, MeteredSeconds: 100})})
	}
	return ran
}

func resultOf(results map[address.Address]ledger.Hash, k lt.Key) ledger.Hash {
	if h, ok := results[k.Addr]; ok {
		return h
	}
	return manifest(true, k)
}

func revealAs(t *testing.T, c *lt.Chain, id uint64, results map[address.Address]ledger.Hash, ks ...lt.Key) {
	t.Helper()
	for _, k := range ks {
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRevealResult{JobID: id, Salt: salt(k), Result: ledger.JobResult{
			ManifestHash: resultOf(results, k), OutputBlob: fmt.Sprintf("sha256:%064x", k.Addr[0]),
		}})})
	}
}

// TestColludingReplicasAgreeingOnWrongResult: two provider keys of one
// operator agree on a wrong result. The ledger compares committed hashes
// and cannot see that a result is wrong nor that two keys have one
// operator, so when they are a job's only replicas it validates their
// result and raises both records. What catches them is honest replicas
// outnumbering them on a job: a spot audit and its escalation drawn later
// from other providers; the loser is slashed and its class record reset.
// And when the pair outnumbers an honest auditor, the honest one loses:
// majority is all the ledger has (docs/ledger.md, "What the ledger cannot
// see").
func TestColludingReplicasAgreeingOnWrongResult(t *testing.T) {
	// Placement goes by price: prov1 is the cheapest, then prov2, prov3,
	// prov4, so who runs, audits and breaks a tie is known in advance.
	t.Run("only replicas: wrong result validated", func(t *testing.T) {
		c := verifyChain(t, 3, nil)
		spec := spotJob("full")
		spec.Verification = "full"
		must(t, []ledger.TxResult{submit(t, c, spec)})
		bad := map[address.Address]ledger.Hash{prov1.Addr: colludedResult, prov2.Addr: colludedResult}
		ran := commitAs(t, c, 1, bad)
		if len(ran) != 2 || ran[0].Addr != prov1.Addr || ran[1].Addr != prov2.Addr {
			t.Fatalf("full job ran on %v, want prov1 and prov2", ran)
		}
		revealAs(t, c, 1, bad, ran...)
		j := job(t, c, 1)
		if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || deliveredResult(j) != colludedResult {
			t.Fatalf("got %s %s result %x, want the colluded result validated", j.State, j.Verdict, deliveredResult(j))
		}
		for _, k := range ran {
			if p := provider(t, c, k); p.Slashed != 0 || p.Validated != 1 || p.Consecutive(ledger.CPUClass) != 1 {
				t.Errorf("colluder %s: slashed %d validated %d consecutive %d, want 0 1 1", k.Addr, p.Slashed, p.Validated, p.Consecutive(ledger.CPUClass))
			}
		}
	})

	t.Run("honest audit and tie-break catch it", func(t *testing.T) {
		// The operator's keys are prov1 and prov4: prov2 audits, prov3
		// breaks the tie, both honest.
		c := verifyChain(t, 4, nil)
		must(t, []ledger.TxResult{submit(t, c, spotJob("spot"))})
		bad := map[address.Address]ledger.Hash{prov1.Addr: colludedResult, provs[3].Addr: colludedResult}
		primary := commitAs(t, c, 1, bad)[0]
		auditor := commitAs(t, c, 1, bad)[0]
		if primary.Addr != prov1.Addr || auditor.Addr != prov2.Addr {
			t.Fatalf("primary %s auditor %s, want prov1 and prov2", primary.Addr, auditor.Addr)
		}
		revealAs(t, c, 1, bad, primary, auditor)
		third := commitAs(t, c, 1, bad)[0]
		if third.Addr != provs[2].Addr {
			t.Fatalf("tie-break by %s, want prov3", third.Addr)
		}
		revealAs(t, c, 1, bad, third)
		j := job(t, c, 1)
		if j.Verdict != ledger.VerdictValidated || deliveredResult(j) != manifest(true, third) {
			t.Fatalf("got %s %s result %x, want the honest result", j.State, j.Verdict, deliveredResult(j))
		}
		if a := assignmentOf(j, prov1.Addr); a.Outcome != ledger.OutcomeMinority || a.Slashed == 0 {
			t.Errorf("colluder prov1: outcome %s slashed %d, want minority and slashed", a.Outcome, a.Slashed)
		}
		if p := provider(t, c, prov1); p.Invalid != 1 || p.Consecutive(ledger.CPUClass) != 0 {
			t.Errorf("colluder prov1's record: invalid %d consecutive %d, want 1 and 0", p.Invalid, p.Consecutive(ledger.CPUClass))
		}
	})

	t.Run("pair outnumbers an honest auditor", func(t *testing.T) {
		// The operator's keys are prov1 and prov3: prov2 audits honestly,
		// prov3 breaks the tie for its operator.
		c := verifyChain(t, 3, nil)
		must(t, []ledger.TxResult{submit(t, c, spotJob("spot"))})
		bad := map[address.Address]ledger.Hash{prov1.Addr: colludedResult, provs[2].Addr: colludedResult}
		primary := commitAs(t, c, 1, bad)[0]
		auditor := commitAs(t, c, 1, bad)[0]
		revealAs(t, c, 1, bad, primary, auditor)
		third := commitAs(t, c, 1, bad)[0]
		if primary.Addr != prov1.Addr || auditor.Addr != prov2.Addr || third.Addr != provs[2].Addr {
			t.Fatalf("replicas %s %s %s, want prov1 prov2 prov3", primary.Addr, auditor.Addr, third.Addr)
		}
		revealAs(t, c, 1, bad, third)
		j := job(t, c, 1)
		if j.Verdict != ledger.VerdictValidated || deliveredResult(j) != colludedResult {
			t.Fatalf("got %s %s result %x, want the colluded result (2 of 3)", j.State, j.Verdict, deliveredResult(j))
		}
		if a := assignmentOf(j, prov2.Addr); a.Outcome != ledger.OutcomeMinority || a.Slashed == 0 {
			t.Errorf("honest auditor prov2: outcome %s slashed %d; the ledger cannot tell it from a cheater", a.Outcome, a.Slashed)
		}
	})
}

// deliveredResult is the manifest hash of the result delivered to the
// owner, or zero when none was.
func deliveredResult(j *ledger.Job) ledger.Hash {
	if j.Delivered == nil {
		return ledger.Hash{}
	}
	if a := assignmentOf(j, *j.Delivered); a != nil && a.Result != nil {
		return a.Result.ManifestHash
	}
	return ledger.Hash{}
}
