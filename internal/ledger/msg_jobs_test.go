package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// The rules of msg_jobs.go: each message's stateless checks
// (ValidateBasic), then what its handler refuses for the job's state and
// the sender, and what it leaves behind (escrow, deadlines, payments).
// Whole lifecycles are in jobs_test.go and verify_test.go.

// wantInvalid fails unless err is ErrInvalidMsg saying want (want ""
// means err must be nil).
func wantInvalid(t *testing.T, what string, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s: %v, want accepted", what, err)
		}
		return
	}
	if !errors.Is(err, ledger.ErrInvalidMsg) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want ErrInvalidMsg saying %q", what, err, want)
	}
}

func TestSubmitJobValidateBasic(t *testing.T) {
	blob := "sha256:" + strings.Repeat("cd", 32)
	gpunetKey, _ := address.EncodeBech32("gpunet", make([]byte, 32))
	shortAge, _ := address.EncodeBech32("age", make([]byte, 31))
	for _, tc := range []struct {
		name string
		edit func(m *ledger.MsgSubmitJob)
		want string
	}{
		{"valid", func(*ledger.MsgSubmitJob) {}, ""},
		{"valid with inputs and data_at", func(m *ledger.MsgSubmitJob) {
			m.Spec.Inputs, m.InputBlob, m.DataAt = []string{"/in"}, blob, "http://203.0.113.7:8080"
		}, ""},
		{"spec name", func(m *ledger.MsgSubmitJob) { m.Spec.Name = "-bad" }, `name "-bad"`},
		{"spec executor", func(m *ledger.MsgSubmitJob) { m.Spec.Executor = "docker" }, `executor "docker"`},
		{"spec outputs empty", func(m *ledger.MsgSubmitJob) { m.Spec.Outputs = nil }, "outputs is empty"},
		{"spec output relative", func(m *ledger.MsgSubmitJob) { m.Spec.Outputs = []string{"/out", "out"} }, `outputs[1] "out"`},
		{"spec input escapes", func(m *ledger.MsgSubmitJob) {
			m.Spec.Inputs, m.InputBlob = []string{"/in/../etc"}, blob
		}, "inputs[0]"},
		{"spec cpu", func(m *ledger.MsgSubmitJob) { m.Spec.CPUMilli = 0 }, "resources.cpu"},
		{"spec memory", func(m *ledger.MsgSubmitJob) { m.Spec.Memory = 0 }, "resources.memory"},
		{"spec gpu models without count", func(m *ledger.MsgSubmitJob) { m.Spec.GPUModels = []string{"RTX_4090"} }, "resources.gpu"},
		{"spec price", func(m *ledger.MsgSubmitJob) { m.Spec.MaxPricePerHour = 0 }, "max_price 0"},
		{"spec timeout zero", func(m *ledger.MsgSubmitJob) { m.Spec.TimeoutSeconds = 0 }, "timeout 0s"},
		{"spec timeout over a week", func(m *ledger.MsgSubmitJob) { m.Spec.TimeoutSeconds = 7*24*3600 + 1 }, "timeout 604801s"},
		{"spec verification", func(m *ledger.MsgSubmitJob) { m.Spec.Verification = "sometimes" }, `verification "sometimes"`},
		{"spec tier", func(m *ledger.MsgSubmitJob) { m.Spec.Tier = "gold" }, `tier "gold"`},
		{"input_blob not a blob", func(m *ledger.MsgSubmitJob) { m.InputBlob = "in.tar" }, `input_blob "in.tar"`},
		{"inputs without input_blob", func(m *ledger.MsgSubmitJob) { m.Spec.Inputs = []string{"/in"} }, "input_blob is empty"},
		{"consumer_key empty", func(m *ledger.MsgSubmitJob) { m.ConsumerKey = "" }, "consumer_key"},
		{"consumer_key of another kind", func(m *ledger.MsgSubmitJob) { m.ConsumerKey = gpunetKey }, "consumer_key"},
		{"consumer_key short", func(m *ledger.MsgSubmitJob) { m.ConsumerKey = shortAge }, "consumer_key"},
		{"data_at not http", func(m *ledger.MsgSubmitJob) { m.DataAt = "ftp://203.0.113.7" }, "data_at"},
		{"data_at too long", func(m *ledger.MsgSubmitJob) { m.DataAt = "http://x/" + strings.Repeat("a", ledger.MaxDataAtLen) }, "data_at"},
	} {
		m := &ledger.MsgSubmitJob{Spec: lt.WasmJob("ok", 100_000, 60), ConsumerKey: lt.AgeKey("consumer")}
		tc.edit(m)
		wantInvalid(t, tc.name, m.ValidateBasic(), tc.want)
	}
}

func TestJobMsgsValidateBasic(t *testing.T) {
	grants := func(n int, size int) []ledger.Grant {
		var out []ledger.Grant
		for i := range n {
			out = append(out, ledger.Grant{Provider: lt.NewKey(string(rune('a' + i))).Addr, WrappedKey: make([]byte, size)})
		}
		return out
	}
	cm := ledger.Hash{1}
	result := func(metered uint64) *ledger.JobResult {
		return &ledger.JobResult{ManifestHash: ledger.Hash{7}, OutputBlob: "sha256:" + strings.Repeat("ab", 32), MeteredSeconds: metered}
	}
	for _, tc := range []struct {
		name string
		msg  ledger.Msg
		want string
	}{
		{"grant: one", &ledger.MsgGrantKey{JobID: 1, Grants: grants(1, 1)}, ""},
		{"grant: eight of 4096 bytes", &ledger.MsgGrantKey{JobID: 1, Grants: grants(8, 4096)}, ""},
		{"grant: none", &ledger.MsgGrantKey{JobID: 1}, "grants: want 1 to 8, got 0"},
		{"grant: nine", &ledger.MsgGrantKey{JobID: 1, Grants: grants(9, 1)}, "grants: want 1 to 8, got 9"},
		{"grant: empty key", &ledger.MsgGrantKey{JobID: 1, Grants: append(grants(1, 1), ledger.Grant{Provider: prov1.Addr})}, "grants[1].wrapped_key"},
		{"grant: key too long", &ledger.MsgGrantKey{JobID: 1, Grants: grants(1, 4097)}, "grants[0].wrapped_key"},
		{"start: note at the limit", &ledger.MsgStartJob{JobID: 1, ResumeNote: strings.Repeat("n", ledger.MaxCheckpointNoteLen)}, ""},
		{"start: note too long", &ledger.MsgStartJob{JobID: 1, ResumeNote: strings.Repeat("n", ledger.MaxCheckpointNoteLen+1)}, "resume_note"},
		{"start: note not text", &ledger.MsgStartJob{JobID: 1, ResumeNote: "\xff"}, "resume_note"},
		{"commit: commitment", &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: 5}, ""},
		{"commit: result", &ledger.MsgCommitResult{JobID: 1, Result: result(5), MeteredSeconds: 5}, ""},
		{"commit: neither", &ledger.MsgCommitResult{JobID: 1, MeteredSeconds: 5}, "exactly one"},
		{"commit: both", &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, Result: result(5), MeteredSeconds: 5}, "exactly one"},
		{"commit: metered differs", &ledger.MsgCommitResult{JobID: 1, Result: result(4), MeteredSeconds: 5}, "result.metered_seconds 4 != metered_seconds 5"},
		{"commit: output not a blob", &ledger.MsgCommitResult{JobID: 1, Result: &ledger.JobResult{OutputBlob: "out.tar"}}, "result.output_blob"},
		{"commit: height set", &ledger.MsgCommitResult{JobID: 1, Result: func() *ledger.JobResult { r := result(0); r.Height = 9; return r }()}, "result.height"},
		{"cancel", &ledger.MsgCancelJob{JobID: 1}, ""},
	} {
		wantInvalid(t, tc.name, tc.msg.ValidateBasic(), tc.want)
	}
}

// TestSubmitJobLocksExactEscrow: the escrow is JobEscrow (every planned
// replica at the ceiling, fee on top); a balance one usync short is
// refused and keeps everything, an exact one is emptied.
func TestSubmitJobLocksExactEscrow(t *testing.T) {
	spec := lt.WasmJob("exact", 100_000, 600)
	spec.Verification = "full" // two planned replicas
	p := lt.Genesis(0).Params
	escrow := ledger.JobEscrow(&spec, p)
	if most := uint64(2 * (100_000 * 600 / 3600)); escrow != most+most/100 {
		t.Fatalf("JobEscrow = %d, want %d (2 replicas × 16666, + 1%%)", escrow, most+most/100)
	}
	short, exact := lt.NewKey("short"), lt.NewKey("exact")
	g := lt.Genesis(0)
	g.Accounts = []ledger.GenesisAccount{{Address: short.Addr, Balance: escrow - 1}, {Address: exact.Addr, Balance: escrow}}
	c := lt.NewChain(t, g)

	r := send(t, c, short, &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: lt.AgeKey("short")})
	if !errors.Is(r.Err, ledger.ErrInsufficientFunds) || !strings.Contains(r.Err.Error(), "escrow") {
		t.Fatalf("one usync short: %v, want ErrInsufficientFunds naming the escrow", r.Err)
	}
	if got := c.Balance(t, short.Addr); got != escrow-1 || ledger.Escrowed(c.KV) != 0 {
		t.Fatalf("after the refusal: balance %d (want %d), escrowed %d", got, escrow-1, ledger.Escrowed(c.KV))
	}
	if _, ok, _ := ledger.GetJob(c.KV, 1); ok {
		t.Fatal("a refused submit left a job")
	}

	must(t, []ledger.TxResult{send(t, c, exact, &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: lt.AgeKey("exact")})})
	j := job(t, c, 1)
	if j.Owner != exact.Addr || j.Escrow != escrow || j.Replicas != 2 || j.State != ledger.JobQueued || j.Height != uint64(c.Height) || j.SubmittedAt != c.Now().Unix() {
		t.Fatalf("job: owner %s escrow %d replicas %d state %s height %d submitted %d", j.Owner, j.Escrow, j.Replicas, j.State, j.Height, j.SubmittedAt)
	}
	if got := c.Balance(t, exact.Addr); got != 0 || ledger.Escrowed(c.KV) != escrow {
		t.Fatalf("after submit: balance %d, escrowed %d, want 0 and %d", got, ledger.Escrowed(c.KV), escrow)
	}
}

// TestGrantKeyRules: only the owner grants, only to assignees, only while
// a key is awaited; the last grant starts the start deadline.
func TestGrantKeyRules(t *testing.T) {
	c := jobChain(t)
	must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("placed", 100_000, 60))})
	must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("unplaced", 10_000, 60))}) // below every ask
	if j := job(t, c, 1); j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov1.Addr {
		t.Fatalf("job 1: %s %+v, want assigned to prov1", j.State, j.Assignments)
	}
	grant := func(id uint64, to lt.Key) *ledger.MsgGrantKey {
		return &ledger.MsgGrantKey{JobID: id, Grants: []ledger.Grant{{Provider: to.Addr, WrappedKey: []byte("k")}}}
	}
	if r := send(t, c, prov1, grant(1, prov1)); !errors.Is(r.Err, ledger.ErrNotJobParty) || !strings.Contains(r.Err.Error(), "belongs to") {
		t.Errorf("grant by the assignee, not the owner: %v", r.Err)
	}
	if r := send(t, c, consumer, grant(9, prov1)); !errors.Is(r.Err, ledger.ErrUnknownJob) {
		t.Errorf("grant for no job: %v", r.Err)
	}
	if r := send(t, c, consumer, grant(2, prov1)); !errors.Is(r.Err, ledger.ErrJobState) || !strings.Contains(r.Err.Error(), "waits for no key") {
		t.Errorf("grant for a job not placed yet: %v", r.Err)
	}
	if j := job(t, c, 1); j.Assignments[0].KeyGrant != nil {
		t.Fatal("a refused grant was recorded")
	}

	must(t, []ledger.TxResult{send(t, c, consumer, grant(1, prov1))})
	j := job(t, c, 1)
	if string(j.Assignments[0].KeyGrant) != "k" || j.Wait == nil || j.Wait.Code != ledger.WaitKeyGranted {
		t.Fatalf("after the grant: key %q wait %+v", j.Assignments[0].KeyGrant, j.Wait)
	}
	if want := c.Now().Unix() + int64(ledger.DefaultParams().JobStartTimeout); j.Deadline != want {
		t.Errorf("deadline %d after the grant, want now + job_start_timeout = %d", j.Deadline, want)
	}
	if r := send(t, c, consumer, grant(1, prov1)); !errors.Is(r.Err, ledger.ErrJobState) || !strings.Contains(r.Err.Error(), "waits for no key") {
		t.Errorf("second grant: %v", r.Err)
	}
}

// TestStartJobRules: a provider starts once, after its grant, while the
// job runs; the last start sets the result deadline.
func TestStartJobRules(t *testing.T) {
	c := jobChain(t)
	must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("s", 100_000, 60))})
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: prov1.Addr, WrappedKey: []byte("k")}}})})
	if r := send(t, c, prov1, &ledger.MsgStartJob{JobID: 9}); !errors.Is(r.Err, ledger.ErrUnknownJob) {
		t.Errorf("start of no job: %v", r.Err)
	}
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStartJob{JobID: 1})})
	j := job(t, c, 1)
	p := ledger.DefaultParams()
	if want := c.Now().Unix() + int64(j.Spec.TimeoutSeconds+p.JobResultGrace); j.State != ledger.JobRunning || j.Assignments[0].StartedAt != c.Now().Unix() || j.Deadline != want {
		t.Fatalf("after start: %s started %d deadline %d, want running, %d, %d", j.State, j.Assignments[0].StartedAt, j.Deadline, c.Now().Unix(), want)
	}
	if r := send(t, c, prov1, &ledger.MsgStartJob{JobID: 1}); !errors.Is(r.Err, ledger.ErrJobState) || !strings.Contains(r.Err.Error(), "already started") {
		t.Errorf("second start: %v", r.Err)
	}
	c.Advance(10 * time.Second)
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgCommitResult{JobID: 1, MeteredSeconds: 5, Result: &ledger.JobResult{
		ManifestHash: ledger.Hash{7}, OutputBlob: "sha256:" + strings.Repeat("ab", 32), MeteredSeconds: 5}})})
	if r := send(t, c, prov1, &ledger.MsgStartJob{JobID: 1}); !errors.Is(r.Err, ledger.ErrNotJobParty) {
		t.Errorf("start of a finished job: %v", r.Err)
	}
}

// TestCommitResultRules: an unchecked job takes its result, a checked one a
// commitment, each once, from a started assignee; metered time is capped by
// the time since the start and by the timeout.
func TestCommitResultRules(t *testing.T) {
	out := "sha256:" + strings.Repeat("ab", 32)
	res := func(m uint64) *ledger.MsgCommitResult {
		return &ledger.MsgCommitResult{JobID: 1, MeteredSeconds: m, Result: &ledger.JobResult{ManifestHash: ledger.Hash{7}, OutputBlob: out, MeteredSeconds: m}}
	}
	t.Run("unchecked", func(t *testing.T) {
		c := jobChain(t)
		must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("u", 360_000, 600))})
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: prov1.Addr, WrappedKey: []byte("k")}}})})
		if r := send(t, c, prov1, res(5)); !errors.Is(r.Err, ledger.ErrJobState) || !strings.Contains(r.Err.Error(), "has not started") {
			t.Errorf("commit before start: %v", r.Err)
		}
		must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStartJob{JobID: 1})})
		started := c.Now().Unix()
		if r := send(t, c, prov2, res(5)); !errors.Is(r.Err, ledger.ErrNotJobParty) {
			t.Errorf("commit by a provider not assigned: %v", r.Err)
		}
		cm := ledger.Hash{1}
		if r := send(t, c, prov1, &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: 5}); !errors.Is(r.Err, ledger.ErrInvalidMsg) || !strings.Contains(r.Err.Error(), "commit the result itself") {
			t.Errorf("commitment for an unchecked job: %v", r.Err)
		}
		c.Advance(100 * time.Second)
		provBefore := c.Balance(t, prov1.Addr)
		must(t, []ledger.TxResult{send(t, c, prov1, res(10_000))}) // claims more than the timeout
		j := job(t, c, 1)
		elapsed := uint64(c.Now().Unix()-started) + 1
		if a := j.Assignments[0]; a.Metered != elapsed || a.Result == nil || a.Result.MeteredSeconds != elapsed || a.Result.Height != uint64(c.Height) {
			t.Fatalf("metered %d (result %+v), want %d: the time since the start, not the 10000 s claimed", a.Metered, a.Result, elapsed)
		}
		if cost := 36_000 * elapsed / 3600; j.State != ledger.JobSucceeded || j.Cost != cost || c.Balance(t, prov1.Addr)-provBefore != cost {
			t.Fatalf("%s cost %d, prov1 paid %d, want succeeded and %d", j.State, j.Cost, c.Balance(t, prov1.Addr)-provBefore, cost)
		}
		if r := send(t, c, prov1, res(5)); !errors.Is(r.Err, ledger.ErrNotJobParty) {
			t.Errorf("commit to a finished job: %v", r.Err)
		}
	})
	t.Run("capped by the timeout", func(t *testing.T) {
		c := jobChain(t)
		must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("t", 360_000, 60))})
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: prov1.Addr, WrappedKey: []byte("k")}}})})
		must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStartJob{JobID: 1})})
		c.Advance(100 * time.Second) // past the timeout, within the grace
		must(t, []ledger.TxResult{send(t, c, prov1, res(100))})
		if j := job(t, c, 1); j.Assignments[0].Metered != 60 || j.Cost != 36_000*60/3600 {
			t.Fatalf("metered %d cost %d, want the 60 s timeout", j.Assignments[0].Metered, j.Cost)
		}
	})
	t.Run("checked", func(t *testing.T) {
		c := verifyChain(t, 2, nil)
		spec := lt.WasmJob("full", 1_000_000, 600)
		spec.Verification = "full"
		must(t, []ledger.TxResult{submit(t, c, spec)})
		j := job(t, c, 1)
		if len(j.Assignments) != 2 {
			t.Fatalf("full job placed on %d providers, want 2", len(j.Assignments))
		}
		var grants []ledger.Grant
		for _, a := range j.Assignments {
			grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("k")})
		}
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: grants})})
		first, second := provKey(t, j.Assignments[0].Provider), provKey(t, j.Assignments[1].Provider)
		must(t, []ledger.TxResult{send(t, c, first, &ledger.MsgStartJob{JobID: 1})})
		if j := job(t, c, 1); j.State != ledger.JobAssigned {
			t.Fatalf("one of two started: %s, want still assigned", j.State)
		}
		must(t, []ledger.TxResult{send(t, c, second, &ledger.MsgStartJob{JobID: 1})})
		if r := send(t, c, first, res(5)); !errors.Is(r.Err, ledger.ErrInvalidMsg) || !strings.Contains(r.Err.Error(), "checked by replication") {
			t.Errorf("a result for a checked job: %v", r.Err)
		}
		cm := ledger.ResultCommitment(ledger.Hash{1}, first.Addr, ledger.Hash{2})
		must(t, []ledger.TxResult{send(t, c, first, &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: 5})})
		j = job(t, c, 1)
		checkWait(t, "one of two committed", j.Wait, ledger.Wait{Code: ledger.WaitReported, Count: 1, Of: 2})
		if j.State != ledger.JobVerifying || provider(t, c, first).Jobs != 0 {
			t.Errorf("one of two committed: %s, committer holds %d slots; want verifying, its slot freed", j.State, provider(t, c, first).Jobs)
		}
		if r := send(t, c, first, &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: 5}); !errors.Is(r.Err, ledger.ErrJobState) || !strings.Contains(r.Err.Error(), "already committed") {
			t.Errorf("second commit: %v", r.Err)
		}
	})
}

// TestCancelJobRules: the owner cancels an unfinished job; what it pays
// is what its providers ran or held, the rest comes back to the usync.
func TestCancelJobRules(t *testing.T) {
	t.Run("unplaced refunds all", func(t *testing.T) {
		c := jobChain(t)
		before := c.Balance(t, consumer.Addr)
		must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("q", 10_000, 600))}) // below every ask
		locked := job(t, c, 1).Escrow
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgCancelJob{JobID: 1})})
		j := job(t, c, 1)
		if j.State != ledger.JobCancelled || j.Cost != 0 || j.Fee != 0 || j.Refund != locked || j.Escrow != 0 {
			t.Fatalf("cancelled unplaced job: %s cost %d fee %d refund %d escrow %d, want all %d back", j.State, j.Cost, j.Fee, j.Refund, j.Escrow, locked)
		}
		if got := c.Balance(t, consumer.Addr); got != before || ledger.Escrowed(c.KV) != 0 || ledger.QueueLen(c.KV) != 0 {
			t.Fatalf("balance %d (want %d), escrowed %d, queued %d", got, before, ledger.Escrowed(c.KV), ledger.QueueLen(c.KV))
		}
	})
	t.Run("finished", func(t *testing.T) {
		c := jobChain(t)
		must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("f", 100_000, 60))})
		runJob(t, c, 1, 5, false)
		if r := send(t, c, consumer, &ledger.MsgCancelJob{JobID: 1}); !errors.Is(r.Err, ledger.ErrJobState) || !strings.Contains(r.Err.Error(), "already succeeded") {
			t.Errorf("cancel of a succeeded job: %v", r.Err)
		}
	})
	t.Run("committed and running replicas", func(t *testing.T) {
		c := verifyChain(t, 2, nil)
		spec := lt.WasmJob("full", 360_000, 600)
		spec.Verification = "full"
		before := c.Balance(t, consumer.Addr)
		must(t, []ledger.TxResult{submit(t, c, spec)})
		j := job(t, c, 1)
		locked := j.Escrow
		var grants []ledger.Grant
		for _, a := range j.Assignments {
			grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("k")})
		}
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: grants})})
		first, second := provKey(t, j.Assignments[0].Provider), provKey(t, j.Assignments[1].Provider)
		must(t, []ledger.TxResult{send(t, c, first, &ledger.MsgStartJob{JobID: 1})})
		must(t, []ledger.TxResult{send(t, c, second, &ledger.MsgStartJob{JobID: 1})})
		startedSecond := c.Now().Unix()
		c.Advance(50 * time.Second)
		cm := ledger.ResultCommitment(ledger.Hash{1}, first.Addr, ledger.Hash{2})
		must(t, []ledger.TxResult{send(t, c, first, &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: 20})})
		c.Advance(30 * time.Second)
		bal := map[address.Address]uint64{first.Addr: c.Balance(t, first.Addr), second.Addr: c.Balance(t, second.Addr)}
		treasury := ledger.Treasury(c.KV)
		must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgCancelJob{JobID: 1})})
		j = job(t, c, 1)
		// The committed replica is paid its metered 20 s; the running one
		// the time since its start.
		pay := map[address.Address]uint64{
			first.Addr:  j.Assignments[0].PricePerHour * 20 / 3600,
			second.Addr: j.Assignments[1].PricePerHour * uint64(c.Now().Unix()-startedSecond) / 3600,
		}
		var cost, fee uint64
		for k, want := range pay {
			cost += want
			fee += want / 100
			if got := c.Balance(t, k) - bal[k]; got != want {
				t.Errorf("%s paid %d, want %d", k, got, want)
			}
		}
		if j.State != ledger.JobCancelled || j.Cost != cost || j.Fee != fee || j.Refund != locked-cost-fee || j.Escrow != 0 {
			t.Fatalf("cancelled: %s cost %d fee %d refund %d escrow %d; want cost %d fee %d refund %d", j.State, j.Cost, j.Fee, j.Refund, j.Escrow, cost, fee, locked-cost-fee)
		}
		if got := before - c.Balance(t, consumer.Addr); got != cost+fee {
			t.Errorf("consumer paid %d in all, want %d", got, cost+fee)
		}
		if got := ledger.Treasury(c.KV) - treasury; got != fee {
			t.Errorf("treasury got %d, want the fee %d", got, fee)
		}
		for _, k := range []lt.Key{first, second} {
			if n := provider(t, c, k).Jobs; n != 0 {
				t.Errorf("%s holds %d slots after the cancel", k.Addr, n)
			}
		}
	})
}
