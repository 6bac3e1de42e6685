package ledger_test

import (
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestSquattersCannotKeepAnHonestJobWaiting: a squatter's jobs hold every
// slot of the network and are never granted, and it keeps as many more
// queued, submitted every block, to take the slots back when they lapse. An honest job submitted meanwhile is
// placed within job_grant_timeout (and a block) of its submission, in block
// time, and the squatter pays every provider its price for every second it
// held a slot. Before, the grant window was 120 s and the scheduler walked
// the jobs submitted after the honest one first (its round-robin cursor had
// moved past it), so the squatter's fresh jobs took every freed slot and the
// honest job waited as long as the squatter kept paying.
func TestSquattersCannotKeepAnHonestJobWaiting(t *testing.T) {
	squatter := lt.NewKey("squatter")
	g := lt.Genesis(100_000_000_000, "consumer", "squatter", "prov1", "prov2")
	g.Params.LivenessRatePPM = 0
	c := lt.NewChain(t, g)
	slots := 0
	for _, k := range []lt.Key{prov1, prov2} {
		info := lt.ProviderInfo("", 0, 36_000)
		slots += int(info.MaxJobs)
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: info})})
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: 10_000_000})})
	}
	grant := g.Params.JobGrantTimeout
	if grant > 30 {
		t.Errorf("job_grant_timeout defaults to %d s; an honest client grants within seconds, and a squatter holds each slot that long per job", grant)
	}

	var squats []uint64
	// squat submits n squatter jobs in one block.
	squat := func(n int) {
		t.Helper()
		seq := seqOf(t, c, squatter)
		txs := make([][]byte, n)
		for i := range txs {
			txs[i] = squatter.Tx(lt.ChainID, seq+uint64(i), 0, &ledger.MsgSubmitJob{Spec: lt.WasmJob("squat", 100_000, 10), ConsumerKey: lt.AgeKey("squatter")})
		}
		must(t, c.ApplyBlock(t, txs...))
		last := ledger.LastJobID(c.KV)
		for i := range uint64(n) {
			squats = append(squats, last-uint64(n)+1+i)
		}
	}
	squat(slots)
	for _, k := range []lt.Key{prov1, prov2} {
		if p := provider(t, c, k); p.Jobs != p.MaxJobs {
			t.Fatalf("%s holds %d jobs, want every slot (%d) taken by the squatter", k.Addr, p.Jobs, p.MaxJobs)
		}
	}
	c.Advance(5 * time.Second)
	must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("honest", 100_000, 60))})
	honest := ledger.LastJobID(c.KV)
	submitted := c.Now()
	if j := job(t, c, honest); j.State != ledger.JobQueued {
		t.Fatalf("honest job: %s (%s), want queued behind the squatter", j.State, j.Reason)
	}
	queuedSquats := func() int {
		n := 0
		for _, id := range squats {
			if job(t, c, id).State == ledger.JobQueued {
				n++
			}
		}
		return n
	}
	for job(t, c, honest).State == ledger.JobQueued && c.Now().Sub(submitted) < 10*time.Minute {
		// Every block the squatter tops its queue up to as many jobs as
		// there are slots, to take every slot back the moment it frees.
		if n := slots - queuedSquats(); n > 0 {
			squat(n)
		} else {
			c.ApplyBlock(t)
		}
	}
	j := job(t, c, honest)
	if j.State != ledger.JobAssigned {
		t.Fatalf("honest job after %v of block time: %s (%s)", c.Now().Sub(submitted), j.State, j.Reason)
	}
	// A freed slot goes to the job that waited longest in its queue,
	// before any submitted after it: the honest job waits for the
	// squatter's grant window to lapse, and a block.
	waited := time.Unix(j.Assignments[0].AssignedAt, 0).Sub(submitted)
	if limit := time.Duration(grant+1) * time.Second; waited > limit {
		t.Errorf("honest job placed %v after its submission, want at most %v (job_grant_timeout and a block)", waited, limit)
	}
	// What the squatter paid: every lapsed job the price of its slot for
	// the grant window, and the providers got it.
	for _, id := range squats {
		if sj := job(t, c, id); sj.State == ledger.JobFailed {
			if want := 36_000 * grant / 3600; sj.Cost != want {
				t.Errorf("squatter's job %d paid %d for its slot, want %d (the grant window at the ask)", id, sj.Cost, want)
			}
		}
	}
}
