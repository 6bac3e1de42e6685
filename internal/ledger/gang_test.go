package ledger_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// A gang provider: 2 H100s, oci, in region, NVLinked or not, asking
// price usync per GPU-hour.
type gangProv struct {
	region string
	nvlink bool
	price  uint64
}

// gangChain has a funded consumer and one staked oci provider of each
// gangProv, keys gang0, gang1, … in that order.
func gangChain(t *testing.T, ps ...gangProv) (*lt.Chain, []lt.Key) {
	t.Helper()
	names := []string{"consumer"}
	var keys []lt.Key
	for i := range ps {
		names = append(names, fmt.Sprintf("gang%d", i))
		keys = append(keys, lt.NewKey(names[len(names)-1]))
	}
	g := lt.Genesis(100_000_000_000, names...)
	g.Params.LivenessRatePPM = 0
	g.Treasury = 1_000_000_000 // pays escalation gangs (gang_verify.go)
	c := lt.NewChain(t, g)
	for i, p := range ps {
		info := lt.ProviderInfo("H100_80GB", 2, p.price)
		info.Executors, info.WasmEngine, info.Region = []string{ledger.ExecutorOCI}, "", p.region
		if p.nvlink {
			info.Inventory.Interconnect = ledger.InterconnectNVLink
		} else {
			info.Inventory.Interconnect = ledger.InterconnectPCIe
		}
		must(t, []ledger.TxResult{send(t, c, keys[i], &ledger.MsgRegisterProvider{ProviderInfo: info})})
		must(t, []ledger.TxResult{send(t, c, keys[i], &ledger.MsgStake{Amount: 2 * 100_000_000})})
	}
	return c, keys
}

// gangSpec is an oci job of nodes members of 2 H100s each, for an hour at
// most 100,000 usync per member-hour.
func gangSpec(nodes uint64) ledger.JobSpec {
	return ledger.JobSpec{
		Name: "gang", Executor: ledger.ExecutorOCI, Image: "r/train@sha256:" + fmt.Sprintf("%064x", 7),
		Outputs: []string{"/out"}, CPUMilli: 1000, Memory: 1 << 30, Disk: 1 << 30, Shm: 512 << 20,
		GPUCount: 2, GPUModels: []string{"H100_80GB"}, MaxPricePerHour: 100_000, TimeoutSeconds: 3600,
		Verification: ledger.VerifyNone, Nodes: nodes,
	}
}

// keyFor is the key of ks whose address is a.
func keyFor(t *testing.T, ks []lt.Key, a address.Address) lt.Key {
	t.Helper()
	for _, k := range ks {
		if k.Addr == a {
			return k
		}
	}
	t.Fatalf("no key for %s", a)
	return lt.Key{}
}

// grantGang grants the key to every member and has each post its member
// key.
func grantGang(t *testing.T, c *lt.Chain, ks []lt.Key, id uint64) {
	t.Helper()
	var grants []ledger.Grant
	for _, a := range job(t, c, id).Assignments {
		grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("wrapped")})
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: id, Grants: grants})})
	for _, a := range job(t, c, id).Assignments {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgGangMember{JobID: id, PublicKey: ledger.Hash{byte(a.Rank + 1), 0xaa}, Endpoint: fmt.Sprintf("203.0.113.%d:51820", a.Rank+1)})})
	}
}

// startGang starts every member of job id.
func startGang(t *testing.T, c *lt.Chain, ks []lt.Key, id uint64) {
	t.Helper()
	for _, a := range job(t, c, id).Assignments {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgStartJob{JobID: id, ResumeSeq: job(t, c, id).ResumeSeq})})
	}
}

// members are the providers of j's assignments by rank.
func members(t *testing.T, j *ledger.Job) []address.Address {
	t.Helper()
	out := make([]address.Address, len(j.Assignments))
	seen := map[address.Address]bool{}
	for _, a := range j.Assignments {
		if a.Rank >= uint64(len(out)) || out[a.Rank] != (address.Address{}) || seen[a.Provider] {
			t.Fatalf("job %d: ranks or providers repeat: %+v", j.ID, j.Assignments)
		}
		out[a.Rank], seen[a.Provider] = a.Provider, true
	}
	return out
}

// TestGangPlacedTogetherInOneSite: a gang of 3 takes 3 distinct providers
// of one region in the block it is submitted, ranked 0..2; with 3 that fit
// but only 2 in one region none is taken, and the job says why: how many
// fit, in how many regions, how many in one.
func TestGangPlacedTogetherInOneSite(t *testing.T) {
	c, ks := gangChain(t, gangProv{"us", false, 10_000}, gangProv{"eu", false, 20_000}, gangProv{"us", false, 30_000}, gangProv{"eu", false, 40_000}, gangProv{"eu", false, 50_000})
	must(t, []ledger.TxResult{submit(t, c, gangSpec(3))})
	j := job(t, c, 1)
	if j.State != ledger.JobAssigned || len(j.Assignments) != 3 {
		t.Fatalf("gang is %s with %d members, want assigned with 3 (%+v %+v)", j.State, len(j.Assignments), j.Wait, unplaced(j))
	}
	// The us pair is the cheapest, but only eu has 3: the best eu is rank 0.
	want := []address.Address{ks[1].Addr, ks[3].Addr, ks[4].Addr}
	if got := members(t, j); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("members by rank %v, want %v (the eu providers, best first)", got, want)
	}
	// Escrow: 3 members at the max price for the timeout, plus the fee.
	p, _ := ledger.GetParams(c.KV)
	if want := ledger.JobEscrow(&j.Spec, p); j.Escrow != want || want < 3*100_000 {
		t.Errorf("escrow %d, want %d (3 members)", j.Escrow, want)
	}

	// A second gang: 2 eu providers are busy with... none: each has 4
	// slots. Take one eu provider offline: 2 in eu, 2 in us.
	must(t, []ledger.TxResult{send(t, c, ks[4], &ledger.MsgSetProviderStatus{Online: false})})
	// The first gang lost a member: it is queued again, whole, and cannot
	// be placed (2 + 2 is not 3 in one region).
	j = job(t, c, 1)
	if j.State != ledger.JobQueued || len(j.Assignments) != 0 {
		t.Fatalf("after a member went offline the gang is %s with %d members, want queued with none", j.State, len(j.Assignments))
	}
	miss := unplaced(j)
	if miss == nil || j.WaitCode != ledger.QuoteApart || miss.Fit != 4 || miss.Sites != 2 || miss.Together != 2 || miss.Need != 3 {
		t.Fatalf("waits %q %+v, want apart: 4 fit in 2 regions, at most 2 in one", j.WaitCode, miss)
	}
	for _, k := range ks {
		if pr := provider(t, c, k); pr.Jobs != 0 || pr.Tentative != 0 {
			t.Errorf("%s still holds the gang: jobs %d tentative %d", k.Addr, pr.Jobs, pr.Tentative)
		}
	}
	q, err := ledger.QuoteJob(c.KV, ptr(gangSpec(3)))
	if err != nil {
		t.Fatal(err)
	}
	if q.Code != ledger.QuoteApart || q.Gangs != 0 || q.Nodes != 3 {
		t.Errorf("quote: code %q gangs %d nodes %d, want apart, 0 gangs of 3", q.Code, q.Gangs, q.Nodes)
	}
	// A gang of 2 fits twice (a pair in each region); the us pair reaches
	// 2 first in rank order (10,000 then 30,000 per GPU-hour), and the
	// quote's price is its dearest member's.
	q, err = ledger.QuoteJob(c.KV, ptr(gangSpec(2)))
	if err != nil {
		t.Fatal(err)
	}
	if q.Code != "" || q.Gangs != 2 || q.PricePerHour != 2*30_000 {
		t.Errorf("quote of a pair: code %q gangs %d price %d, want 2 gangs at %d", q.Code, q.Gangs, q.PricePerHour, 2*30_000)
	}
}

// TestGangNVLink: a gang asking for NVLink takes only providers whose
// GPUs are NVLinked, and counts the others.
func TestGangNVLink(t *testing.T) {
	c, ks := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"eu", true, 20_000}, gangProv{"eu", true, 30_000})
	s := gangSpec(2)
	s.Interconnect = ledger.InterconnectNVLink
	must(t, []ledger.TxResult{submit(t, c, s)})
	if got, want := members(t, job(t, c, 1)), []address.Address{ks[1].Addr, ks[2].Addr}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("NVLink gang on %v, want %v", got, want)
	}
	s.Nodes = 3
	q, err := ledger.QuoteJob(c.KV, &s)
	if err != nil {
		t.Fatal(err)
	}
	if q.Miss == nil || q.Miss.NVLink != 1 || q.Code != ledger.QuoteTooFew {
		t.Errorf("quote of 3 NVLinked: code %q miss %+v, want too_few with 1 lacking NVLink", q.Code, q.Miss)
	}
	// pcie asks for nothing more.
	s.Interconnect, s.Nodes = ledger.InterconnectPCIe, 3
	if q, err := ledger.QuoteJob(c.KV, &s); err != nil || q.Code != "" || q.Gangs != 1 {
		t.Errorf("quote of 3 on pcie: %v %+v, want one gang", err, q)
	}
}

// TestGangMembersMeetThenStartTogether: a member starts only once every
// member posted its private network key; the gang runs when all started.
func TestGangMembersMeetThenStartTogether(t *testing.T) {
	c, ks := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"eu", false, 20_000}, gangProv{"eu", false, 30_000})
	must(t, []ledger.TxResult{submit(t, c, gangSpec(3))})
	byRank := members(t, job(t, c, 1))
	r0, r1 := keyFor(t, ks, byRank[0]), keyFor(t, ks, byRank[1])
	if r := send(t, c, r0, &ledger.MsgGangMember{JobID: 1, PublicKey: ledger.Hash{1}}); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("gang_member before the grant: %v", r.Err)
	}
	var grants []ledger.Grant
	for _, a := range byRank {
		grants = append(grants, ledger.Grant{Provider: a, WrappedKey: []byte("k")})
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: grants})})
	must(t, []ledger.TxResult{send(t, c, r0, &ledger.MsgGangMember{JobID: 1, PublicKey: ledger.Hash{1}, Endpoint: "198.51.100.4:51820"})})
	if r := send(t, c, r1, &ledger.MsgGangMember{JobID: 1, PublicKey: ledger.Hash{1}}); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("a key rank 0 posted, again from rank 1: %v", r.Err)
	}
	if r := send(t, c, r0, &ledger.MsgStartJob{JobID: 1}); !errors.Is(r.Err, ledger.ErrJobState) || !strings.Contains(r.Err.Error(), "1 members posted") {
		t.Fatalf("start with 1 of 3 keys posted: %v", r.Err)
	}
	for _, bad := range []*ledger.MsgGangMember{{JobID: 1}, {JobID: 1, PublicKey: ledger.Hash{2}, Endpoint: "no-port"}, {JobID: 1, PublicKey: ledger.Hash{2}, Endpoint: "h:0"}} {
		if err := bad.ValidateBasic(); !errors.Is(err, ledger.ErrInvalidMsg) {
			t.Errorf("%+v: %v, want refused", bad, err)
		}
	}
	for i, a := range byRank[1:] {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a), &ledger.MsgGangMember{JobID: 1, PublicKey: ledger.Hash{byte(i + 2)}})})
	}
	j := job(t, c, 1)
	if a := j.Assignments[0]; a.Rank != 0 || a.GangKey == nil || *a.GangKey != (ledger.Hash{1}) || a.GangEndpoint != "198.51.100.4:51820" {
		t.Errorf("rank 0's record: %+v", a)
	}
	for i, a := range byRank {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a), &ledger.MsgStartJob{JobID: 1})})
		if j := job(t, c, 1); (j.State == ledger.JobRunning) != (i == 2) {
			t.Fatalf("after %d of 3 started the gang is %s", i+1, j.State)
		}
	}
	if r := send(t, c, r1, &ledger.MsgGangMember{JobID: 1, PublicKey: ledger.Hash{9}}); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("gang_member after the start: %v", r.Err)
	}
	// A job that is not a gang takes no member key.
	must(t, []ledger.TxResult{submit(t, c, gangSpec(0))})
	one := job(t, c, 2).Assignments[0]
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 2, Grants: []ledger.Grant{{Provider: one.Provider, WrappedKey: []byte("k")}}})})
	if r := send(t, c, keyFor(t, ks, one.Provider), &ledger.MsgGangMember{JobID: 2, PublicKey: ledger.Hash{5}}); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("gang_member for a single job: %v", r.Err)
	}
}

// TestGangStartsTogetherOrNotAtAll: a member that does not start within
// the start window sends the whole gang back to the queue (every member
// released), and after job_max_attempts placements it fails.
func TestGangStartsTogetherOrNotAtAll(t *testing.T) {
	c, ks := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"eu", false, 20_000})
	p, _ := ledger.GetParams(c.KV)
	must(t, []ledger.TxResult{submit(t, c, gangSpec(2))})
	for attempt := uint64(1); attempt <= p.JobMaxAttempts; attempt++ {
		j := job(t, c, 1)
		if j.State != ledger.JobAssigned || j.Attempts != attempt {
			t.Fatalf("attempt %d: gang is %s after %d attempts", attempt, j.State, j.Attempts)
		}
		grantGang(t, c, ks, 1)
		byRank := members(t, job(t, c, 1))
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, byRank[0]), &ledger.MsgStartJob{JobID: 1})})
		c.Advance(time.Duration(p.JobStartTimeout+1) * time.Second)
		c.ApplyBlock(t)
		j = job(t, c, 1)
		if attempt < p.JobMaxAttempts {
			// Requeued whole, and placed again at once on the two.
			if j.Wait == nil || (j.State != ledger.JobAssigned && j.State != ledger.JobQueued) || j.Attempts != attempt+uint64(len(j.Assignments)/2) {
				t.Fatalf("attempt %d: after the start window the gang is %s %+v", attempt, j.State, j.Wait)
			}
			if j.State == ledger.JobQueued {
				c.ApplyBlock(t)
			}
			continue
		}
		if j.State != ledger.JobFailed || j.Wait == nil || j.Wait.Code != ledger.WaitGaveUp {
			t.Fatalf("after %d attempts: %s %+v, want failed, gave up", attempt, j.State, j.Wait)
		}
	}
	for _, k := range ks {
		if pr := provider(t, c, k); pr.Jobs != 0 || pr.Tentative != 0 {
			t.Errorf("%s still holds the failed gang: %d %d", k.Addr, pr.Jobs, pr.Tentative)
		}
	}
	if j := job(t, c, 1); j.Escrow != 0 || j.Cost != 0 {
		t.Errorf("a gang that never ran: escrow %d cost %d, want all refunded", j.Escrow, j.Cost)
	}
}

// TestGangPaidPerMemberSecond: each member is paid its own metered seconds
// at its own price; rank 0's outputs are delivered; a member whose run
// failed fails the gang, each still paid its seconds.
func TestGangPaidPerMemberSecond(t *testing.T) {
	for _, failRank := range []int{-1, 1} {
		t.Run(fmt.Sprint("fail rank ", failRank), func(t *testing.T) {
			c, ks := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"eu", false, 20_000}, gangProv{"eu", false, 30_000})
			must(t, []ledger.TxResult{submit(t, c, gangSpec(3))})
			grantGang(t, c, ks, 1)
			startGang(t, c, ks, 1)
			before := map[address.Address]uint64{}
			for _, k := range ks {
				before[k.Addr] = c.Balance(t, k.Addr)
			}
			owner := c.Balance(t, consumer.Addr)
			c.Advance(1000 * time.Second)
			metered := []uint64{900, 600, 300}
			for _, a := range job(t, c, 1).Assignments {
				r := &ledger.JobResult{ManifestHash: ledger.Hash{byte(a.Rank)}, OutputBlob: fmt.Sprintf("sha256:%064x", a.Rank+1), MeteredSeconds: metered[a.Rank]}
				if int(a.Rank) == failRank {
					r.Failed, r.ExitCode, r.Reason = true, 1, "NCCL timeout"
				}
				must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgCommitResult{JobID: 1, MeteredSeconds: r.MeteredSeconds, Result: r})})
			}
			j := job(t, c, 1)
			wantState := ledger.JobSucceeded
			if failRank >= 0 {
				wantState = ledger.JobFailed
			}
			if j.State != wantState || j.Verdict != ledger.VerdictUnchecked || j.Delivered == nil || *j.Delivered != members(t, j)[0] {
				t.Fatalf("gang ended %s verdict %s delivered %v (%+v), want %s, unchecked, rank 0's", j.State, j.Verdict, j.Delivered, j.Wait, wantState)
			}
			if failRank >= 0 && (j.Wait == nil || j.Wait.Code != ledger.WaitJobFailed || j.Wait.Text != "NCCL timeout") {
				t.Errorf("failed gang's wait %+v", j.Wait)
			}
			var total uint64
			for _, a := range j.Assignments {
				want := a.PricePerHour * metered[a.Rank] / 3600
				if a.Paid != want || c.Balance(t, a.Provider)-before[a.Provider] != want {
					t.Errorf("rank %d at %d/h: paid %d (balance +%d), want %d", a.Rank, a.PricePerHour, a.Paid, c.Balance(t, a.Provider)-before[a.Provider], want)
				}
				total += want
			}
			if j.Cost != total || j.Escrow != 0 || c.Balance(t, consumer.Addr)-owner != j.Refund {
				t.Errorf("cost %d (want %d) escrow %d refund %d", j.Cost, total, j.Escrow, j.Refund)
			}
		})
	}
}

// TestGangCheckpointIsOneStep: a gang's step is complete only when every
// member committed it; a gang that loses a member resumes from its last
// complete step, each member paid the seconds that step covers of its own
// run, and each new member finds its rank's checkpoint.
func TestGangCheckpointIsOneStep(t *testing.T) {
	c, ks := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"eu", false, 20_000}, gangProv{"eu", false, 30_000})
	s := gangSpec(2)
	s.Checkpoint = &ledger.CheckpointSpec{Path: "/ckpt", IntervalSeconds: 60}
	must(t, []ledger.TxResult{submit(t, c, s)})
	grantGang(t, c, ks, 1)
	startGang(t, c, ks, 1)
	byRank := members(t, job(t, c, 1))
	c.Advance(200 * time.Second)
	// Step 1 from both members (each its own state), step 2 from rank 0
	// only.
	for rank, a := range byRank {
		res := send(t, c, keyFor(t, ks, a), ckptMsg(1, 1, uint64(100+rank*10), byte(rank+1)))
		must(t, []ledger.TxResult{res})
		complete := false
		for _, e := range res.Events {
			complete = complete || e.Type == "job_gang_checkpoint"
		}
		if complete != (rank == 1) {
			t.Errorf("after rank %d's checkpoint 1: step complete %v", rank, complete)
		}
	}
	must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, byRank[0]), ckptMsg(1, 2, 180, 1))})
	paid := map[address.Address]uint64{}
	for _, a := range byRank {
		paid[a] = c.Balance(t, a)
	}
	// Rank 1 is lost: the gang resumes from step 1, not 2.
	must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, byRank[1]), &ledger.MsgSetProviderStatus{Online: false})})
	j := job(t, c, 1)
	if j.ResumeSeq != 1 || j.Progress != 110 {
		t.Fatalf("resumes from %d with progress %d, want step 1 with 110 s", j.ResumeSeq, j.Progress)
	}
	for rank, a := range byRank {
		price := 2 * uint64(10_000*(rank+1))
		if want := price * uint64(100+rank*10) / 3600; c.Balance(t, a)-paid[a] != want {
			t.Errorf("rank %d paid %d for step 1, want %d", rank, c.Balance(t, a)-paid[a], want)
		}
	}
	// Placed again on the two online; each new member resumes from its
	// rank's checkpoint of step 1.
	if j.State != ledger.JobAssigned || len(j.Assignments) != 2 {
		t.Fatalf("after the loss the gang is %s with %d members", j.State, len(j.Assignments))
	}
	for rank := range uint64(2) {
		ck := j.ResumeCheckpointOf(rank)
		if ck == nil || ck.Seq != 1 || ck.Rank != rank || ck.PlainHash[0] != byte(rank+1) {
			t.Errorf("rank %d resumes from %+v, want its own checkpoint of step 1", rank, ck)
		}
	}
	// A member cannot fall back alone once another started.
	grantGang(t, c, ks, 1)
	now := members(t, job(t, c, 1))
	must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, now[0]), &ledger.MsgStartJob{JobID: 1, ResumeSeq: 1})})
	if r := send(t, c, keyFor(t, ks, now[1]), &ledger.MsgStartJob{JobID: 1, ResumeSeq: 0, ResumeNote: "blob corrupt"}); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Errorf("a lone fallback in a started gang: %v", r.Err)
	}
}

// TestGangKeepsItsCompleteStep: a member whose machine is gone commits
// nothing more, and the others go on committing until the gang is found
// short of it; the last step they all committed must outlive each
// member's latest CheckpointsPerProvider, or the gang starts over.
func TestGangKeepsItsCompleteStep(t *testing.T) {
	c, ks := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"eu", false, 20_000}, gangProv{"eu", false, 30_000})
	s := gangSpec(2)
	s.Checkpoint = &ledger.CheckpointSpec{Path: "/ckpt", IntervalSeconds: 60}
	must(t, []ledger.TxResult{submit(t, c, s)})
	grantGang(t, c, ks, 1)
	startGang(t, c, ks, 1)
	byRank := members(t, job(t, c, 1))
	c.Advance(600 * time.Second)
	for rank, a := range byRank {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a), ckptMsg(1, 1, 60, byte(rank+1)))})
	}
	// Rank 1 is silent; rank 0 commits steps 2 … CheckpointsPerProvider+2.
	for seq := uint64(2); seq <= ledger.CheckpointsPerProvider+2; seq++ {
		must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, byRank[0]), ckptMsg(1, seq, 60*seq, 1))})
	}
	must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, byRank[1]), &ledger.MsgSetProviderStatus{Online: false})})
	j := job(t, c, 1)
	if j.ResumeSeq != 1 || j.Progress != 60 {
		t.Fatalf("resumes from %d with progress %d, want the complete step 1 with 60 s; checkpoints %+v", j.ResumeSeq, j.Progress, j.Checkpoints)
	}
	for rank := range uint64(2) {
		if ck := j.ResumeCheckpointOf(rank); ck == nil || ck.Seq != 1 || ck.PlainHash[0] != byte(rank+1) {
			t.Errorf("rank %d resumes from %+v, want its own checkpoint of step 1", rank, ck)
		}
	}
}

// TestGangRefusals: the combinations the ledger does not run are refused
// with the field that is wrong.
func TestGangRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*ledger.JobSpec)
		want string
	}{
		{"replicated", func(s *ledger.JobSpec) { s.Verification = ledger.VerifySpot }, "verification: none"},
		{"wasm", func(s *ledger.JobSpec) {
			s.Executor, s.Image, s.Module, s.Shm = ledger.ExecutorWASM, "", "sha256:"+fmt.Sprintf("%064x", 1), 0
		}, "only oci jobs"},
		{"tee", func(s *ledger.JobSpec) { s.Trust = ledger.TrustTEE }, "enclave"},
		{"network", func(s *ledger.JobSpec) { s.Network = true }, "network: true"},
		{"too many", func(s *ledger.JobSpec) { s.Nodes = ledger.MaxGangNodes + 1 }, "resources.nodes 65"},
		{"shm over memory", func(s *ledger.JobSpec) { s.Shm = s.Memory + 1 }, "resources.shm"},
		{"bad interconnect", func(s *ledger.JobSpec) { s.Interconnect = "infiniband" }, "resources.gpu.interconnect"},
		{"nvlink one gpu", func(s *ledger.JobSpec) { s.GPUCount, s.Interconnect = 1, ledger.InterconnectNVLink }, "at least 2"},
	} {
		s := gangSpec(3)
		tc.edit(&s)
		if err := s.Validate(); !errors.Is(err, ledger.ErrInvalidMsg) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want refused saying %q", tc.name, err, tc.want)
		}
	}
	if s := gangSpec(3); s.Validate() != nil {
		t.Errorf("the gang spec itself: %v", s.Validate())
	}
	// A provider's interconnect is checked.
	info := lt.ProviderInfo("H100_80GB", 1, 1000)
	info.Inventory.Interconnect = ledger.InterconnectNVLink
	if err := (&ledger.MsgRegisterProvider{ProviderInfo: info}).ValidateBasic(); !errors.Is(err, ledger.ErrInvalidMsg) {
		t.Errorf("NVLink with one GPU: %v", err)
	}
}

// TestGangStopsWholeAfterAMemberReported: a gang one member of which has
// reported its end and another is lost is not finished with a replacement
// of the lost one: it is queued again whole, and the member that reported
// is released with the others (without a checkpoint, paid nothing: its
// run is lost with the gang's).
func TestGangStopsWholeAfterAMemberReported(t *testing.T) {
	c, ks := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"eu", false, 20_000}, gangProv{"eu", false, 30_000})
	must(t, []ledger.TxResult{submit(t, c, gangSpec(2))})
	grantGang(t, c, ks, 1)
	startGang(t, c, ks, 1)
	byRank := members(t, job(t, c, 1))
	c.Advance(100 * time.Second)
	r0 := keyFor(t, ks, byRank[0])
	must(t, []ledger.TxResult{send(t, c, r0, &ledger.MsgCommitResult{JobID: 1, MeteredSeconds: 90, Result: &ledger.JobResult{
		ManifestHash: ledger.Hash{1}, OutputBlob: fmt.Sprintf("sha256:%064x", 1), MeteredSeconds: 90}})})
	before := c.Balance(t, r0.Addr)
	must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, byRank[1]), &ledger.MsgSetProviderStatus{Online: false})})
	j := job(t, c, 1)
	if j.State != ledger.JobAssigned || j.Attempts != 2 || len(j.Assignments) != 2 {
		t.Fatalf("after losing rank 1 with rank 0 reported: %s, %d attempts, %d members; want placed again whole", j.State, j.Attempts, len(j.Assignments))
	}
	for _, a := range j.Assignments {
		if a.Result != nil || a.Provider == byRank[1] {
			t.Errorf("new placement carries %+v", a)
		}
	}
	if got := c.Balance(t, r0.Addr); got != before || j.Cost != 0 {
		t.Errorf("rank 0 paid %d (job cost %d) for a run the gang lost", got-before, j.Cost)
	}
}

// TestGangEndpoint: a member's endpoint is host:port or [IPv6]:port.
func TestGangEndpoint(t *testing.T) {
	for e, ok := range map[string]bool{
		"": true, "203.0.113.7:51820": true, "node-3.example:1": true, "[2001:db8::1]:51820": true,
		"203.0.113.7": false, ":51820": false, "h:0": false, "h:65536": false, "h:x": false, "2001:db8::1:51820": false,
		"[]:1": false, "h st:1": false, "h\u00e9:1": false, strings.Repeat("h", 256) + ":1": false,
	} {
		err := (&ledger.MsgGangMember{JobID: 1, PublicKey: ledger.Hash{1}, Endpoint: e}).ValidateBasic()
		if (err == nil) != ok {
			t.Errorf("endpoint %q: %v, want ok %v", e, err, ok)
		}
	}
}

// TestGangCancelPaysEachMemberItsSeconds: a running gang cancelled pays
// each member the seconds it ran, at its own price, and refunds the rest.
func TestGangCancelPaysEachMemberItsSeconds(t *testing.T) {
	c, ks := gangChain(t, gangProv{"eu", false, 10_000}, gangProv{"eu", false, 20_000}, gangProv{"eu", false, 30_000})
	must(t, []ledger.TxResult{submit(t, c, gangSpec(3))})
	grantGang(t, c, ks, 1)
	startGang(t, c, ks, 1)
	c.Advance(600 * time.Second)
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgCancelJob{JobID: 1})})
	j := job(t, c, 1)
	if j.State != ledger.JobCancelled || j.Escrow != 0 {
		t.Fatalf("cancelled gang: %s, escrow %d", j.State, j.Escrow)
	}
	now := c.Now().Unix()
	var total uint64
	for _, a := range j.Assignments {
		want := a.PricePerHour * uint64(now-a.StartedAt) / 3600
		if a.Paid != want {
			t.Errorf("rank %d (%d/h, started %d s before): paid %d, want %d", a.Rank, a.PricePerHour, now-a.StartedAt, a.Paid, want)
		}
		total += a.Paid
	}
	if j.Cost != total {
		t.Errorf("cost %d, members paid %d", j.Cost, total)
	}
}

// TestGangDeterministic: the same gang's life applied to two chains gives
// the same app hash at every block.
func TestGangDeterministic(t *testing.T) {
	run := func() []string {
		c, ks := gangChain(t, gangProv{"eu", true, 10_000}, gangProv{"eu", true, 20_000}, gangProv{"us", true, 30_000})
		var hashes []string
		step := func() { hashes = append(hashes, fmt.Sprintf("%x", c.Hash)) }
		s := gangSpec(2)
		s.Interconnect = ledger.InterconnectNVLink
		must(t, []ledger.TxResult{submit(t, c, s)})
		step()
		grantGang(t, c, ks, 1)
		step()
		startGang(t, c, ks, 1)
		step()
		c.Advance(100 * time.Second)
		for _, a := range job(t, c, 1).Assignments {
			must(t, []ledger.TxResult{send(t, c, keyFor(t, ks, a.Provider), &ledger.MsgCommitResult{JobID: 1, MeteredSeconds: 90, Result: &ledger.JobResult{
				ManifestHash: ledger.Hash{byte(a.Rank)}, OutputBlob: fmt.Sprintf("sha256:%064x", a.Rank+1), MeteredSeconds: 90}})})
			step()
		}
		return hashes
	}
	a, b := run(), run()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("app hashes differ:\n%v\n%v", a, b)
	}
}
