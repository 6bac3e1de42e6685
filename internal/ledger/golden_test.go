package ledger_test

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// goldenLifecycle is the app hash after lifecycleChain's blocks. It
// changes only with a deliberate change of the state machine or of the
// records' encoding: a change that only moves code (a planner split, a
// tally split) must leave it as it is. When it changes on purpose, say
// why in the commit, and put the reason here:
//   - (first recorded, record version 5)
//   - record version 6 (issue 28, words out of consensus): jobs record a
//     Wait (code and numbers) instead of a Reason sentence, slash events
//     a code; changes again when the scheduler's and verification's
//     sites are converted.
//   - verification.go and checkpoint.go converted (issue 28): the audit,
//     reveal, escalation and verdict waits, and the outvoted and
//     unrevealed slash events, are codes and numbers.
//   - scheduler.go and service_place.go converted (issue 28): job 3
//     waits unplaced with a PlacementMiss (its record changes), and a
//     placed job's wait is a code (WaitPlaced, WaitExtraPlaced…).
//   - hwchallenge.go converted (issue 28): a failed hardware challenge
//     keeps a ChallengeFailure (code, device, numbers), not a sentence.
//   - ungranted placements hold their slot only tentatively (issue 27,
//     record version 7): lifecycleChain ends with job 5 placed and not
//     granted, so its provider's record counts it in Tentative, not Jobs.
//     (The chain without job 5 keeps its hash: its end state holds no
//     ungranted placement.)
//   - GPU challenges ruled busy (issue 26) share record version 7: a
//     provider's ChallengeRecord and DeviceProofs carry Busy, so every
//     provider record of version 7 encodes it (zero here).
const goldenLifecycle = "d5a6ac5b682a916a93a127f27b9b38fecdd92594a867d34a27bd520f7119f821"

// lifecycleChain runs jobs through every step the ledger has: a spot job
// placed, granted, started, committed, audited by a second provider,
// revealed and settled; a job whose primary cheats, is outvoted by the
// audit and a tie-break replica and slashed; a job nobody can place (it
// waits, with the scheduler's miss stored); a job whose owner never grants the
// key (the grant window lapses and the slots are paid for); and a job
// placed, its key not granted yet (its slot held tentatively).
func lifecycleChain(t *testing.T) *lt.Chain {
	c := verifyChain(t, 4, nil)
	// Job 1: honest, audited, validated.
	must(t, []ledger.TxResult{submit(t, c, spotJob("honest"))})
	primary := runReplicas(t, c, 1, 100, nil)[0]
	auditor := runReplicas(t, c, 1, 100, nil)[0]
	must(t, []ledger.TxResult{reveal(t, c, 1, primary, false)})
	must(t, []ledger.TxResult{reveal(t, c, 1, auditor, false)})

	// Job 2: the primary cheats; the audit disagrees; a third replica
	// breaks the tie and the cheater is slashed.
	must(t, []ledger.TxResult{submit(t, c, spotJob("cheat"))})
	cheater := runReplicas(t, c, 2, 50, map[address.Address]bool{prov1.Addr: true})[0]
	second := runReplicas(t, c, 2, 50, nil)[0]
	must(t, []ledger.TxResult{reveal(t, c, 2, cheater, cheater.Addr == prov1.Addr)})
	must(t, []ledger.TxResult{reveal(t, c, 2, second, second.Addr == prov1.Addr)})
	third := runReplicas(t, c, 2, 50, nil)[0]
	must(t, []ledger.TxResult{reveal(t, c, 2, third, third.Addr == prov1.Addr)})

	// Job 3: a GPU nobody offers; it waits, with the scheduler's miss.
	gpu := spotJob("gpu")
	gpu.GPUCount, gpu.GPUModels = 1, []string{"H100_SXM"}
	must(t, []ledger.TxResult{submit(t, c, gpu)})

	// Job 4: placed, never granted; the grant window lapses.
	must(t, []ledger.TxResult{submit(t, c, spotJob("ungranted"))})
	c.Advance(10 * time.Minute)
	c.ApplyBlock(t)
	c.ApplyBlock(t)

	// Job 5: placed, its key not granted yet: its provider holds the slot
	// tentatively (Provider.Tentative, record version 7).
	must(t, []ledger.TxResult{submit(t, c, spotJob("waiting"))})
	return c
}

// TestAppHashLifecycle: the same blocks of a whole job lifecycle give the
// same app hash twice, and the golden one.
func TestAppHashLifecycle(t *testing.T) {
	a, b := lifecycleChain(t), lifecycleChain(t)
	if !bytes.Equal(a.Hash, b.Hash) {
		t.Fatalf("hashes differ: %x vs %x", a.Hash, b.Hash)
	}
	for id, want := range map[uint64]string{1: ledger.JobSucceeded, 2: ledger.JobSucceeded, 3: ledger.JobQueued} {
		if j := job(t, a, id); j.State != want {
			t.Errorf("job %d is %s (%+v), want %s", id, j.State, j.Wait, want)
		}
	}
	if j := job(t, a, 3); j.WaitCode != ledger.QuoteNoOffer || unplaced(j) == nil {
		t.Errorf("job 3 waits with code %q, %+v; want no_offer with the scheduler's miss", j.WaitCode, j.Wait)
	}
	if j := job(t, a, 2); j.Assignments[0].Slashed == 0 {
		t.Errorf("job 2's cheater was not slashed: %+v", j.Assignments[0])
	}
	if j := job(t, a, 4); !j.Done() {
		t.Errorf("job 4 is %s (%+v), want ended by its grant window", j.State, j.Wait)
	}
	if j := job(t, a, 5); j.State != ledger.JobAssigned || j.Assignments[0].KeyGrant != nil {
		t.Errorf("job 5 is %s, want placed and waiting for its key", j.State)
	}
	if got := hex.EncodeToString(a.Hash); got != goldenLifecycle {
		t.Errorf("app hash = %s, want golden %s", got, goldenLifecycle)
	}
}
