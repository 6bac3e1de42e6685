package ledger_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// slotChain has the consumer, a second owner (the squatter) and one
// provider, prov1, with maxJobs slots at squatPrice per core-hour, which
// runs wasm and oci.
func slotChain(t *testing.T, maxJobs uint64) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "consumer", "squatter", "prov1")
	g.Params.LivenessRatePPM = 0
	c := lt.NewChain(t, g)
	info := lt.ProviderInfo("", 0, squatPrice)
	info.MaxJobs = maxJobs
	info.Executors = []string{"wasm", "oci"}
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: info})})
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStake{Amount: 10_000_000})})
	return c
}

// submitMany submits n of k's jobs in one block and returns their ids.
func submitMany(t *testing.T, c *lt.Chain, k lt.Key, n int) []uint64 {
	t.Helper()
	seq := seqOf(t, c, k)
	txs := make([][]byte, n)
	for i := range txs {
		txs[i] = k.Tx(lt.ChainID, seq+uint64(i), 0, &ledger.MsgSubmitJob{Spec: lt.WasmJob("j", 100_000, 60), ConsumerKey: lt.AgeKey("owner")})
	}
	must(t, c.ApplyBlock(t, txs...))
	last := ledger.LastJobID(c.KV)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = last - uint64(n) + 1 + uint64(i)
	}
	return ids
}

func grantTo(k lt.Key, c *lt.Chain, t *testing.T, id uint64, p lt.Key) ledger.TxResult {
	t.Helper()
	return send(t, c, k, &ledger.MsgGrantKey{JobID: id, Grants: []ledger.Grant{{Provider: p.Addr, WrappedKey: []byte("wrapped")}}})
}

// TestGrantBumpsTheOldestUngrantedPlacements: a provider's free slots
// carry TentativePerSlot ungranted placements each. The first granted
// takes its slot for real; the placements the free slots left can no
// longer carry are bumped, the oldest placement first (placed at once,
// the younger job first): each pays its provider for the seconds it held,
// tops its escrow up to a whole run again and goes back to the queue,
// its placement not counted as an attempt. The provider never has more
// granted jobs than slots.
func TestGrantBumpsTheOldestUngrantedPlacements(t *testing.T) {
	k := sched.TentativePerSlot
	for _, tc := range []struct {
		slots  uint64
		bumped []uint64 // of jobs 1..k*slots, the youngest granted
	}{
		{1, []uint64{1, 2, 3}},
		{2, []uint64{2, 3, 4}},
	} {
		c := slotChain(t, tc.slots)
		p, _ := ledger.GetParams(c.KV)
		n := k * int(tc.slots)
		first := submitMany(t, c, consumer, n/2)
		c.Advance(3 * time.Second)
		ids := append(first, submitMany(t, c, consumer, n-n/2)...)
		for _, id := range ids {
			if j := job(t, c, id); j.State != ledger.JobAssigned {
				t.Fatalf("%d slots: job %d is %s, want placed (every position of the free slots taken)", tc.slots, id, j.State)
			}
		}
		if pr := provider(t, c, prov1); pr.Jobs != 0 || pr.Tentative != uint64(n) {
			t.Fatalf("%d slots: provider counts %d granted, %d ungranted; want 0, %d", tc.slots, pr.Jobs, pr.Tentative, n)
		}
		// One more finds no position.
		extra := submitMany(t, c, consumer, 1)[0]
		if j := job(t, c, extra); j.State != ledger.JobQueued || j.WaitCode != ledger.QuoteNoFit {
			t.Fatalf("%d slots: a job beyond every position is %s (%s), want queued", tc.slots, j.State, j.WaitCode)
		}
		c.Advance(2 * time.Second)
		assigned := map[uint64]int64{}
		for _, id := range ids {
			assigned[id] = job(t, c, id).Assignments[0].AssignedAt
		}
		youngest := ids[len(ids)-1]
		must(t, []ledger.TxResult{grantTo(consumer, c, t, youngest, prov1)})
		now := c.Now().Unix()
		for _, id := range ids[:len(ids)-1] {
			j := job(t, c, id)
			if !slices.Contains(tc.bumped, id) {
				if j.State != ledger.JobAssigned || j.Cost != 0 {
					t.Errorf("%d slots: job %d, not bumped: %s cost %d", tc.slots, id, j.State, j.Cost)
				}
				continue
			}
			held := uint64(now - assigned[id])
			if want := uint64(squatPrice) * held / 3600; j.State != ledger.JobQueued || len(j.Assignments) != 0 || j.Attempts != 0 || j.Cost != want {
				t.Errorf("%d slots: bumped job %d: %s, %d assignments, %d attempts, cost %d; want queued, none, 0, %d (%d s held)", tc.slots, id, j.State, len(j.Assignments), j.Attempts, j.Cost, want, held)
			}
			if want := ledger.JobEscrow(&j.Spec, p); j.Escrow != want {
				t.Errorf("%d slots: bumped job %d escrow %d, want a whole run's %d", tc.slots, id, j.Escrow, want)
			}
		}
		pr := provider(t, c, prov1)
		if want := uint64(n - 1 - (k - 1)); pr.Jobs != 1 || pr.Tentative != want {
			t.Errorf("%d slots: provider counts %d granted, %d ungranted; want 1, %d", tc.slots, pr.Jobs, pr.Tentative, want)
		}
		// The free slots carry as many ungranted placements as they may:
		// the bumped jobs wait.
		if j := job(t, c, youngest); j.State != ledger.JobAssigned || j.Assignments[0].KeyGrant == nil {
			t.Errorf("%d slots: the granted job is %s", tc.slots, j.State)
		}
	}
}

// TestBumpedJobWhoseOwnerCannotRefillEnds: a bumped job's owner tops its
// escrow up to a whole run again; one who cannot has the job end
// (bump_unfunded), paying its provider for the seconds it held and
// getting the rest back.
func TestBumpedJobWhoseOwnerCannotRefillEnds(t *testing.T) {
	c := slotChain(t, 1)
	squatter := lt.NewKey("squatter")
	id := submitMany(t, c, squatter, 1)[0]
	must(t, []ledger.TxResult{send(t, c, squatter, &ledger.MsgSend{To: consumer.Addr, Amount: ledger.Amount(c.Balance(t, squatter.Addr))})})
	other := submitMany(t, c, consumer, 1)[0]
	placed := job(t, c, id).Assignments[0].AssignedAt
	locked := job(t, c, id).Escrow
	must(t, []ledger.TxResult{grantTo(consumer, c, t, other, prov1)})
	j := job(t, c, id)
	held := uint64(c.Now().Unix() - placed)
	cost := uint64(squatPrice) * held / 3600
	if j.State != ledger.JobFailed || j.Wait == nil || j.Wait.Code != ledger.WaitBumpUnfunded || j.Cost != cost || j.Refund != locked-cost-cost/100 {
		t.Fatalf("bumped job of a broke owner: %s %+v cost %d refund %d; want failed, %s, cost %d, refund %d", j.State, j.Wait, j.Cost, j.Refund, ledger.WaitBumpUnfunded, cost, locked-cost-cost/100)
	}
	if w := j.Wait; w.Amount != 0 || w.Needed != cost+cost/100 || !slices.Equal(w.Providers, []address.Address{prov1.Addr}) {
		t.Errorf("wait %+v, want it to have 0 of the %d another run needs", w, cost+cost/100)
	}
}

// TestExtraReplicaGrantsTakeSlots: an audit replica holds its slot
// tentatively like any placement, and takes it for real when it gets the
// key, from the owner or handed over by a committed replica. The prov2 of
// these chains has one slot; prov1 ran the primary and went offline.
func TestExtraReplicaGrantsTakeSlots(t *testing.T) {
	setup := func(t *testing.T) (*lt.Chain, lt.Key, uint64) {
		g := lt.Genesis(100_000_000_000, "consumer", "squatter", "prov1", "prov2")
		g.Params.LivenessRatePPM = 0
		g.Treasury = 1_000_000_000
		c := lt.NewChain(t, g)
		for i, k := range []lt.Key{prov1, prov2} {
			info := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
			info.MaxJobs = 1
			must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: info})})
			must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: stake})})
		}
		kc := ledger.JobKeyCommitment(jobKeyText)
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSubmitJob{Spec: spotJob("audited"), ConsumerKey: lt.AgeKey("consumer"), KeyCommitment: &kc})})
		primary := runReplicas(t, c, 1, 100, nil)[0]
		if j := job(t, c, 1); len(j.Assignments) != 2 || j.Assignments[1].Provider != prov2.Addr || j.Assignments[1].KeyGrant != nil {
			t.Fatalf("want an ungranted audit replica on prov2: %+v", j.Assignments)
		}
		must(t, []ledger.TxResult{send(t, c, primary, &ledger.MsgSetProviderStatus{Online: false})})
		other := submitMany(t, c, lt.NewKey("squatter"), 1)[0]
		if j := job(t, c, other); j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov2.Addr {
			t.Fatalf("the other job: %s %+v, want it beside the audit replica on prov2", j.State, j.Assignments)
		}
		if pr := provider(t, c, prov2); pr.Jobs != 0 || pr.Tentative != 2 {
			t.Fatalf("prov2 counts %d granted, %d ungranted; want 0, 2", pr.Jobs, pr.Tentative)
		}
		return c, primary, other
	}

	t.Run("the other job's grant bumps the audit replica", func(t *testing.T) {
		c, _, other := setup(t)
		audit := *assignmentOf(job(t, c, 1), prov2.Addr)
		treasury := ledger.Treasury(c.KV)
		must(t, []ledger.TxResult{grantTo(lt.NewKey("squatter"), c, t, other, prov2)})
		j := job(t, c, 1)
		held := uint64(c.Now().Unix() - audit.AssignedAt)
		want := audit.PricePerHour * held / 3600
		if len(j.Assignments) != 1 || j.Replicas != 2 || j.State != ledger.JobVerifying || j.AuditCost != want || ledger.Treasury(c.KV) != treasury-want {
			t.Fatalf("audited job after the bump: %s, %d of %d replicas, audit cost %d (treasury %d → %d); want verifying, 1 of 2, %d", j.State, len(j.Assignments), j.Replicas, j.AuditCost, treasury, ledger.Treasury(c.KV), want)
		}
		if pr := provider(t, c, prov2); pr.Jobs != 1 || pr.Tentative != 0 {
			t.Errorf("prov2 counts %d granted, %d ungranted; want 1, 0", pr.Jobs, pr.Tentative)
		}
	})
	t.Run("a handover to the audit replica bumps the other job", func(t *testing.T) {
		c, primary, other := setup(t)
		pub, err := ledger.HandoverPublicKey(auditSecret)
		if err != nil {
			t.Fatal(err)
		}
		must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgRequestKeyHandover{JobID: 1, PublicKey: pub})})
		must(t, []ledger.TxResult{handOver(t, c, primary, prov2, jobKeyText)})
		if a := assignmentOf(job(t, c, 1), prov2.Addr); a == nil || a.KeyGrant == nil {
			t.Fatalf("audit replica after the handover: %+v", a)
		}
		if j := job(t, c, other); j.State != ledger.JobQueued || len(j.Assignments) != 0 || j.Cost == 0 {
			t.Fatalf("the other job after the handover: %s, %d assignments, cost %d; want bumped, paying for its hold", j.State, len(j.Assignments), j.Cost)
		}
		if pr := provider(t, c, prov2); pr.Jobs != 1 || pr.Tentative != 0 {
			t.Errorf("prov2 counts %d granted, %d ungranted; want 1, 0", pr.Jobs, pr.Tentative)
		}
	})
}

// TestFewerSlotsBump: what takes a slot for real without a grant (a
// service replica) and a provider lowering max_jobs leave its free slots
// fewer positions: the oldest ungranted placements beyond them are
// bumped.
func TestFewerSlotsBump(t *testing.T) {
	k := sched.TentativePerSlot
	t.Run("a service replica", func(t *testing.T) {
		c := slotChain(t, 2)
		ids := submitMany(t, c, consumer, k+1) // one more than one free slot carries
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgDeployService{Spec: lt.ServiceSpec("svc", 200_000), Budget: 100_000, ConsumerKey: lt.AgeKey("consumer"), Public: true})})
		if s := service(t, c, 1); len(s.Replicas) != 1 {
			t.Fatalf("service replicas %d, want 1", len(s.Replicas))
		}
		if j := job(t, c, ids[k]); j.State != ledger.JobQueued {
			t.Errorf("the youngest of the ungranted placements, all placed at once: %s, want bumped", j.State)
		}
		if pr := provider(t, c, prov1); pr.Jobs != 1 || pr.Tentative != uint64(k) {
			t.Errorf("provider counts %d granted, %d ungranted; want 1, %d", pr.Jobs, pr.Tentative, k)
		}
	})
	t.Run("max_jobs lowered", func(t *testing.T) {
		c := slotChain(t, 2)
		submitMany(t, c, consumer, 2*k)
		info := provider(t, c, prov1).ProviderInfo
		info.MaxJobs = 1
		must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: info})})
		if pr := provider(t, c, prov1); pr.Jobs != 0 || pr.Tentative != uint64(k) {
			t.Errorf("provider counts %d granted, %d ungranted; want 0, %d", pr.Jobs, pr.Tentative, k)
		}
	})
}

// TestGrantedJobsNeverExceedSlots applies random job operations (submit,
// grant some or all of a job's replicas, start, commit, reveal, hand the
// key over, cancel, let grant windows lapse, providers going offline and
// changing max_jobs) to two fresh chains. After every block the invariants
// hold (granted and ungranted slots counted, ungranted placements only on
// free slots, TentativePerSlot at most on each), no provider runs more
// granted jobs than its max_jobs unless it lowered max_jobs below what it
// already ran, and the two chains have the same app hash.
func TestGrantedJobsNeverExceedSlots(t *testing.T) {
	squatter := lt.NewKey("squatter")
	provs := []lt.Key{prov1, prov2, prov3}
	owners := []lt.Key{consumer, squatter}
	kc := ledger.JobKeyCommitment(jobKeyText)
	var grants, bumps, lapses, overbooked int
	for seed := uint64(1); seed <= 4; seed++ {
		newChain := func() *lt.Chain {
			g := lt.Genesis(100_000_000_000, "consumer", "squatter", "prov1", "prov2", "prov3")
			g.Params.LivenessRatePPM = 0
			g.Treasury = 1_000_000_000
			c := lt.NewChain(t, g)
			for i, k := range provs {
				info := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
				info.MaxJobs = uint64(i + 1)
				must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: info})})
				must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: stake})})
			}
			return c
		}
		a, b := newChain(), newChain()
		rng := rand.New(rand.NewPCG(seed, 27))
		for step := 0; step < 150; step++ {
			if rng.IntN(4) == 0 {
				d := time.Duration(5+rng.IntN(35)) * time.Second
				a.Advance(d)
				b.Advance(d)
			}
			// This block's txs, built from a's state; seqs counts each
			// sender's txs in it.
			seqs := map[address.Address]uint64{}
			var txs [][]byte
			// The most slots each provider has during the block, and the
			// granted jobs it ran before it.
			slots, ran := map[address.Address]uint64{}, map[address.Address]uint64{}
			for _, k := range provs {
				p := provider(t, a, k)
				slots[k.Addr], ran[k.Addr] = p.MaxJobs, p.Jobs
			}
			tx := func(k lt.Key, m ledger.Msg) {
				txs = append(txs, k.Tx(lt.ChainID, seqOf(t, a, k)+seqs[k.Addr], 0, m))
				seqs[k.Addr]++
			}
			var live []*ledger.Job
			for id := uint64(1); id <= ledger.LastJobID(a.KV); id++ {
				if j := job(t, a, id); !j.Done() {
					live = append(live, j)
				}
			}
			pick := func() *ledger.Job {
				if len(live) == 0 {
					return nil
				}
				return live[rng.IntN(len(live))]
			}
			for n := 1 + rng.IntN(4); n > 0; n-- {
				j := pick()
				switch op := rng.IntN(12); {
				case op < 3 || j == nil:
					owner := owners[rng.IntN(2)]
					spec := lt.WasmJob("prop", 200_000, uint64(60+rng.IntN(540)))
					spec.Verification = []string{"none", "none", "full", "spot"}[rng.IntN(4)]
					m := &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: lt.AgeKey("owner")}
					if owner.Addr == consumer.Addr {
						m.KeyCommitment = &kc
					}
					tx(owner, m)
				case op < 6:
					// The consumer grants as soon as it can, some replicas or
					// all; the squatter, rarely.
					owner := owners[0]
					if j.Owner == squatter.Addr {
						if rng.IntN(8) > 0 {
							continue
						}
						owner = squatter
					}
					var gs []ledger.Grant
					for _, as := range j.Assignments {
						if as.KeyGrant == nil && rng.IntN(3) > 0 {
							gs = append(gs, ledger.Grant{Provider: as.Provider, WrappedKey: []byte("wrapped")})
						}
					}
					if len(gs) > 0 {
						tx(owner, &ledger.MsgGrantKey{JobID: j.ID, Grants: gs})
					}
				case op < 8:
					for _, as := range j.Assignments {
						k := provKey(t, as.Provider)
						switch {
						case as.KeyGrant != nil && as.StartedAt == 0:
							tx(k, &ledger.MsgStartJob{JobID: j.ID})
						case as.StartedAt != 0 && as.Commitment == nil && as.Result == nil && !j.Spec.Checked():
							tx(k, &ledger.MsgCommitResult{JobID: j.ID, MeteredSeconds: 30, Result: &ledger.JobResult{ManifestHash: ledger.Hash{1}, OutputBlob: fmt.Sprintf("sha256:%064x", 1), MeteredSeconds: 30}})
						case as.StartedAt != 0 && as.Commitment == nil && as.Result == nil:
							cm := ledger.ResultCommitment(manifest(true, k), k.Addr, salt(k))
							tx(k, &ledger.MsgCommitResult{JobID: j.ID, Commitment: &cm, MeteredSeconds: 30})
						case j.Revealing && as.Commitment != nil && as.Result == nil:
							tx(k, &ledger.MsgRevealResult{JobID: j.ID, Salt: salt(k), Result: ledger.JobResult{ManifestHash: manifest(true, k), OutputBlob: fmt.Sprintf("sha256:%064x", k.Addr[0])}})
						default:
							continue
						}
						break
					}
				case op < 9:
					// A new replica asks for the key; a committed one hands
					// it over.
					for _, as := range j.Assignments {
						switch {
						case j.KeyCommitment != nil && j.Assignments[0].Commitment != nil && as.KeyGrant == nil && as.HandoverKey == nil:
							pub, _ := ledger.HandoverPublicKey(auditSecret)
							tx(provKey(t, as.Provider), &ledger.MsgRequestKeyHandover{JobID: j.ID, PublicKey: pub})
						case as.HandoverKey != nil && as.KeyGrant == nil && j.Assignments[0].Commitment != nil:
							sealed, err := ledger.SealHandover(jobKeyText, *as.HandoverKey, primaryEphem, j.ID)
							if err != nil {
								t.Fatal(err)
							}
							tx(provKey(t, j.Assignments[0].Provider), &ledger.MsgHandOverKey{JobID: j.ID, Provider: as.Provider, Sealed: sealed})
						default:
							continue
						}
						break
					}
				case op < 10:
					tx(owners[0], &ledger.MsgCancelJob{JobID: j.ID}) // refused for the squatter's jobs
				case op < 11:
					k := provs[rng.IntN(3)]
					info := provider(t, a, k).ProviderInfo
					info.MaxJobs = uint64(1 + rng.IntN(4))
					slots[k.Addr] = max(slots[k.Addr], info.MaxJobs)
					tx(k, &ledger.MsgUpdateProvider{ProviderInfo: info})
				default:
					k := provs[rng.IntN(3)]
					tx(k, &ledger.MsgSetProviderStatus{Online: rng.IntN(3) > 0})
				}
			}
			res := a.ApplyBlock(t, txs...) // invariants checked after every block
			b.ApplyBlock(t, txs...)
			if !bytes.Equal(a.Hash, b.Hash) {
				t.Fatalf("seed %d block %d: app hashes differ: %x vs %x", seed, a.Height, a.Hash, b.Hash)
			}
			// A grant never takes a slot the provider does not have: it
			// runs more granted jobs than max_jobs only when it lowered
			// max_jobs below what it already ran.
			for _, k := range provs {
				p := provider(t, a, k)
				if p.Jobs > max(slots[k.Addr], ran[k.Addr]) {
					t.Fatalf("seed %d block %d: %s runs %d granted jobs, at most %d slots in the block (%d granted before)", seed, a.Height, k.Addr, p.Jobs, slots[k.Addr], ran[k.Addr])
				}
				if p.Jobs < p.MaxJobs && p.Tentative > p.MaxJobs-p.Jobs {
					overbooked++
				}
			}
			// A grant, a handover or an update that bumps placements
			// requeues, reassigns or ends their jobs in its own tx.
			for _, r := range res {
				took := false
				for _, e := range r.Events {
					switch e.Type {
					case "job_key_granted", "job_key_handed_over":
						grants++
						took = true
					case "provider_updated":
						took = true
					case "job_requeued", "job_reassigned", "job_failed", "job_replicas_dropped":
						if took {
							bumps++
						}
					}
				}
			}
		}
		for id := uint64(1); id <= ledger.LastJobID(a.KV); id++ {
			if j := job(t, a, id); j.Wait != nil && j.Wait.Code == ledger.WaitKeyNotGranted {
				lapses++
			}
		}
	}
	t.Logf("%d grants, %d bumps, %d lapsed jobs, %d provider-blocks with more ungranted placements than free slots", grants, bumps, lapses, overbooked)
	if grants == 0 || bumps == 0 || lapses == 0 || overbooked == 0 {
		t.Errorf("%d grants, %d bumps, %d lapsed jobs, %d overbooked: the operations exercise too little", grants, bumps, lapses, overbooked)
	}
}
