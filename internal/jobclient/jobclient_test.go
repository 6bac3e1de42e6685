package jobclient_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/apiserver/apiservertest"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/clock/clocktest"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/seal"
)

const poll = time.Second

// world is a chain served over httptest with a consumer (alice, whose
// key is a real keyring key) and one online CPU provider p1 asking 1
// SYNC/h, whose encryption key the test holds so it can act as p1.
type world struct {
	chain   *apiservertest.Chain
	cl      *chainclient.Client
	jc      *jobclient.Client
	clk     *clocktest.Fake
	alice   *keys.Key
	prov    lt.Key
	provID  *age.X25519Identity
	blobs   *blob.Client
	specDir string
}

func newWorld(t *testing.T, edit ...func(*ledger.Genesis)) *world {
	t.Helper()
	home := t.TempDir()
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{prov: lt.NewKey("p1"), specDir: t.TempDir()}
	if w.alice, err = kr.AddUnencrypted("alice"); err != nil {
		t.Fatal(err)
	}
	if w.provID, err = age.GenerateX25519Identity(); err != nil {
		t.Fatal(err)
	}
	g := lt.Genesis(100_000_000_000, "p1")
	g.Params.LivenessRatePPM = 0
	g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: w.alice.Address, Balance: 100_000_000_000})
	for _, f := range edit {
		f(&g)
	}
	w.chain = apiservertest.NewChain(t, g)
	pi := lt.ProviderInfo("", 0, 1_000_000)
	pi.EncryptionKey = w.provID.Recipient().String()
	w.chain.Send(w.prov, &ledger.MsgRegisterProvider{ProviderInfo: pi})
	w.chain.Send(w.prov, &ledger.MsgStake{Amount: 10_000_000})
	srv := apiservertest.NewServer(t, w.chain)
	w.cl = chainclient.New(srv.URL)
	w.clk = clocktest.New(time.Unix(1_700_000_000, 0))
	w.jc = jobclient.New(w.cl, w.alice, home, lt.ChainID)
	w.jc.Clock = w.clk
	w.blobs = blob.NewClient(srv.URL)
	for name, data := range map[string]string{"m.wasm": "\x00asm\x01\x00\x00\x00", "a.txt": "the input\n"} {
		if err := os.WriteFile(filepath.Join(w.specDir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// spec returns a wasm job spec with a local module and one input, its
// max_price and verification as given, and resources 1 core and 256 MiB
// unless others are given.
func (w *world) spec(t *testing.T, maxPrice, verification, resources string) *jobspec.Spec {
	if resources == "" {
		resources = "{cpu: 1, memory: 256MiB}"
	}
	t.Helper()
	y := `name: t
executor: wasm
module: ./m.wasm
inputs:
  - path: /in/a.txt
    from: ./a.txt
outputs: [/out]
resources: ` + resources + `
max_price: ` + maxPrice + `
timeout: 1m
verification: ` + verification + "\n"
	s, err := jobspec.Parse([]byte(y), w.specDir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sealTo encrypts plain to the owner's key, as a provider does.
func (w *world) sealTo(t *testing.T, plain []byte) []byte {
	t.Helper()
	r, err := seal.ParseRecipient(w.alice.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc, err := seal.Encrypt(&b, r)
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(plain)
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// upload stores b in the gateway and returns its name.
func (w *world) upload(t *testing.T, b []byte) string {
	t.Helper()
	h, _, err := w.blobs.Put(t.Context(), bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// postLog relays one chunk of job id's log as p1.
func (w *world) postLog(t *testing.T, id, seq uint64, line string) {
	t.Helper()
	if err := w.cl.PostLog(t.Context(), signer(w.prov), id, seq, w.sealTo(t, []byte(line))); err != nil {
		t.Fatal(err)
	}
}

// waitPolls waits until the n loops under test wait on the clock again:
// each has done its poll.
func (w *world) waitPolls(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.clk.WaitTimers(ctx, n); err != nil {
		t.Fatalf("%d loops never waited on the client's clock: %v", n, err)
	}
}

type signer lt.Key

func (s signer) PrivateKey() ed25519.PrivateKey { return s.Priv }

// syncBuffer is a bytes.Buffer that Watch's log goroutine and the test
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSubmitWatchFetch follows one job through its life, the test acting
// as its provider between polls, on a fake clock: the submit uploads only
// ciphertext and keeps the job key; Watch grants the key to the provider
// the ledger assigned, reports each state once, relays the live log, and
// forgets the key at the end; the outputs and the full log come back
// decrypted.
func TestSubmitWatchFetch(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	id, err := w.jc.Submit(ctx, w.spec(t, "2", "none", ""))
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	keyFile := filepath.Join(w.jc.Dir, "1.key")
	jobKey, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("the job key was not kept: %v", err)
	}
	j, err := w.cl.Job(ctx, id)
	if err != nil || j.State != ledger.JobAssigned || j.InputBlob == "" || !strings.HasPrefix(j.Spec.Module, "sha256:") {
		t.Fatalf("job %d = %+v, %v; want assigned, with module and input blobs", id, j, err)
	}
	if j.Assignments[0].KeyGrant != nil {
		t.Fatal("the key was granted before anyone asked Watch to follow the job")
	}
	var module bytes.Buffer
	h, _ := blob.ParseHash(j.Spec.Module)
	if _, err := w.blobs.Get(ctx, h, &module); err != nil || bytes.Contains(module.Bytes(), []byte("asm")) {
		t.Fatalf("the gateway's module (%v) is not ciphertext", err)
	}

	var states []string
	logs := &syncBuffer{}
	type ended struct {
		j   *ledger.Job
		err error
	}
	done := make(chan ended, 1)
	go func() {
		j, err := w.jc.Watch(ctx, id, jobclient.WatchOptions{Poll: poll, Logs: logs, OnChange: func(j *ledger.Job) {
			states = append(states, j.State)
		}})
		done <- ended{j, err}
	}()

	// First poll: the job is assigned and the key granted to p1, wrapped
	// to its encryption key.
	w.waitPolls(t, 2)
	if j, err = w.cl.Job(ctx, id); err != nil || j.Assignments[0].KeyGrant == nil {
		t.Fatalf("no key grant after Watch's first poll: %+v, %v", j, err)
	}
	got, err := seal.UnwrapKey(j.Assignments[0].KeyGrant, w.provID)
	if err != nil || got.String() != strings.TrimSpace(string(jobKey)) {
		t.Fatalf("the grant unwraps to %v, %v; want the kept job key", got, err)
	}
	var plain bytes.Buffer
	if r, err := seal.Decrypt(bytes.NewReader(module.Bytes()), got); err != nil {
		t.Fatal(err)
	} else if plain.ReadFrom(r); plain.String() != "\x00asm\x01\x00\x00\x00" {
		t.Fatalf("the module decrypts to %q", plain.String())
	}

	// p1 starts and logs a line; one poll later Watch has it.
	w.chain.Send(w.prov, &ledger.MsgStartJob{JobID: id})
	w.postLog(t, id, 0, "hello from the job\n")
	w.clk.Advance(poll)
	w.waitPolls(t, 2)
	if got := logs.String(); got != "hello from the job\n" {
		t.Errorf("live log after a poll: %q", got)
	}

	// p1 logs once more and commits its result; the next poll ends it.
	w.postLog(t, id, 1, "bye\n")
	outDir := t.TempDir()
	os.WriteFile(filepath.Join(outDir, "result.txt"), []byte("42\n"), 0o600)
	var packed bytes.Buffer
	if err := seal.PackDir(&packed, outDir); err != nil {
		t.Fatal(err)
	}
	res := &ledger.JobResult{OutputBlob: w.upload(t, w.sealTo(t, packed.Bytes())), LogBlob: w.upload(t, w.sealTo(t, []byte("hello from the job\nbye\n"))), MeteredSeconds: 1}
	w.chain.Send(w.prov, &ledger.MsgCommitResult{JobID: id, MeteredSeconds: 1, Result: res})
	w.clk.Advance(poll)
	end := <-done
	if end.err != nil || end.j.State != ledger.JobSucceeded {
		t.Fatalf("Watch = %+v, %v; want the job succeeded", end.j, end.err)
	}
	if want := []string{ledger.JobAssigned, ledger.JobRunning, ledger.JobSucceeded}; !slices.Equal(states, want) {
		t.Errorf("OnChange saw %v, want %v", states, want)
	}
	if got := logs.String(); got != "hello from the job\nbye\n" {
		t.Errorf("live log at the end: %q", got)
	}
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the job key is still on disk after the job ended: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "out")
	if err := w.jc.FetchOutputs(ctx, end.j, dir); err != nil {
		t.Fatalf("FetchOutputs: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "result.txt")); err != nil || string(b) != "42\n" {
		t.Errorf("outputs: result.txt = %q, %v", b, err)
	}
	var full bytes.Buffer
	if err := w.jc.FollowLogs(ctx, id, poll, &full); err != nil || full.String() != "hello from the job\nbye\n" {
		t.Errorf("FollowLogs of a finished job = %q, %v; want the log blob", full.String(), err)
	}
}

// TestFollowLogsLive: FollowLogs of a running job relays its log, one
// poll at a time on the client's clock, grants the key, and returns once
// the job has ended with what came last.
func TestFollowLogsLive(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	id, err := w.jc.Submit(ctx, w.spec(t, "2", "none", ""))
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- w.jc.FollowLogs(ctx, id, poll, out) }()
	w.waitPolls(t, 1)
	if j, _ := w.cl.Job(ctx, id); j.Assignments[0].KeyGrant == nil {
		t.Fatal("FollowLogs did not grant the key to the assigned provider")
	}
	w.chain.Send(w.prov, &ledger.MsgStartJob{JobID: id})
	w.postLog(t, id, 0, "one\n")
	if got := out.String(); got != "" {
		t.Fatalf("log read before the poll: %q", got)
	}
	w.clk.Advance(poll)
	w.waitPolls(t, 1)
	if got := out.String(); got != "one\n" {
		t.Errorf("after a poll: %q, want %q", got, "one\n")
	}
	w.postLog(t, id, 1, "two\n")
	if _, err := w.jc.Chain.SendMsg(ctx, w.alice, 0, &ledger.MsgCancelJob{JobID: id}); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(poll)
	if err := <-done; err != nil {
		t.Fatalf("FollowLogs: %v", err)
	}
	if got := out.String(); got != "one\ntwo\n" {
		t.Errorf("at the end: %q, want %q", got, "one\ntwo\n")
	}
}

// TestCheck: what a submission is refused for before anything is locked.
// A requirement no provider meets, at any price, is refused naming it and
// what the network offers instead (issue 33: a GPU job on a network
// without GPUs locked its escrow and waited for ever); a max_price below
// every ask that fits, with the quote's reason; a job that waits only for
// a busy provider is not refused.
func TestCheck(t *testing.T) {
	w := newWorld(t)
	// p1: CPU only, 16 cores, 64 GiB, 500 GiB disk, region eu, wasm,
	// asks 1 SYNC/h a core (ledgertest.ProviderInfo).
	for _, tc := range []struct {
		name                       string
		maxPrice, verify, resource string
		code                       string
		price                      bool
		unmet                      []jobclient.Unmet
	}{
		{name: "fits", maxPrice: "2", verify: "none"},
		{name: "below p1's ask", maxPrice: "0.5", verify: "none", code: ledger.QuoteOverPrice, price: true},
		{name: "a GPU on a network without", maxPrice: "2", verify: "none", resource: "{cpu: 1, memory: 256MiB, gpu: {count: 1}}", code: ledger.QuoteNoOffer,
			unmet: []jobclient.Unmet{{Field: "resources.gpu.count", Want: "1 GPU", Offered: "no GPUs: 1 CPU-only provider(s)"}}},
		{name: "a GPU model nobody has", maxPrice: "2", verify: "none", resource: "{cpu: 1, memory: 256MiB, gpu: {count: 2, models: [RTX_4090]}}", code: ledger.QuoteNoOffer,
			unmet: []jobclient.Unmet{{Field: "resources.gpu.models", Want: "RTX_4090", Offered: "no GPUs: 1 CPU-only provider(s)"}}},
		{name: "more memory than p1 has", maxPrice: "2", verify: "none", resource: "{cpu: 1, memory: 1TiB}", code: ledger.QuoteNoFit,
			unmet: []jobclient.Unmet{{Field: "resources.memory", Want: "1TiB", Providers: 1, Offered: "at most 64 GiB"}}},
		{name: "more cores than p1 has, and too low a price", maxPrice: "0.5", verify: "none", resource: "{cpu: 32, memory: 256MiB}", code: ledger.QuoteOverPrice,
			unmet: []jobclient.Unmet{{Field: "resources.cpu", Want: "32 cores", Providers: 1, Offered: "at most 16 cores"}}},
		{name: "a region nobody is in", maxPrice: "2", verify: "none", resource: "{cpu: 1, memory: 256MiB}\nregion: us-east\nregion_required: true", code: ledger.QuoteNoFit,
			unmet: []jobclient.Unmet{{Field: "region", Want: "us-east (region_required)", Providers: 1, Offered: "regions eu (1)"}}},
		{name: "more replicas than providers", maxPrice: "2", verify: "full", code: ledger.QuoteTooFew,
			unmet: []jobclient.Unmet{{Field: "verification", Want: "full: 2 distinct providers", Offered: "1 that can run it"}}},
	} {
		s := w.spec(t, tc.maxPrice, tc.verify, tc.resource)
		ls := jobclient.QuoteSpec(s)
		q, err := w.cl.Quote(t.Context(), &ls)
		if err != nil || q.Code != tc.code {
			t.Errorf("%s: quote code %q (%v), want %q", tc.name, q.Code, err, tc.code)
			continue
		}
		err = w.jc.Check(t.Context(), s)
		var pe *jobclient.PriceError
		var ue *jobclient.UnmetError
		switch {
		case tc.unmet != nil:
			if !errors.As(err, &ue) || !slices.Equal(ue.Unmet, tc.unmet) {
				t.Errorf("%s: Check = %#v (%v), want an UnmetError %+v", tc.name, ue, err, tc.unmet)
				continue
			}
			for _, u := range tc.unmet {
				if msg := err.Error(); !strings.Contains(msg, u.Field) || !strings.Contains(msg, u.Offered) {
					t.Errorf("%s: %q does not name %s and what is offered instead (%s)", tc.name, msg, u.Field, u.Offered)
				}
			}
		case tc.price:
			if !errors.As(err, &pe) || pe.MaxPrice != 500_000 || pe.Quote.CheapestAsk != 1_000_000 || pe.Quote.Reason == "" {
				t.Errorf("%s: Check = %v, want a PriceError at max 0.5 SYNC/h, cheapest ask 1 SYNC/h", tc.name, err)
			}
		case err != nil:
			t.Errorf("%s: Check = %v, want nil (reason %q)", tc.name, err, q.Reason)
		}
	}

	// p1 takes 4 jobs at once: a fifth waits for it, on purpose. The 4
	// are granted, so that they hold its slots for real (an ungranted
	// placement holds one only tentatively).
	var ids []uint64
	for range 4 {
		id, err := w.jc.Submit(t.Context(), w.spec(t, "2", "none", ""))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			j, err := w.cl.Job(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if len(j.Assignments) > 0 && j.Assignments[0].KeyGrant != nil {
				break
			}
			if len(j.Assignments) > 0 {
				if _, err := w.jc.GrantIfNeeded(t.Context(), j); err != nil {
					t.Fatal(err)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d not placed and granted in 30 s: %+v", id, j)
			}
		}
	}
	s := w.spec(t, "2", "none", "")
	ls := jobclient.QuoteSpec(s)
	if q, err := w.cl.Quote(t.Context(), &ls); err != nil || q.Code != ledger.QuoteNoFit || q.Miss.Busy != 1 {
		t.Fatalf("quote with p1 full: %+v, %v; want no_fit, 1 busy", q, err)
	}
	if err := w.jc.Check(t.Context(), s); err != nil {
		t.Errorf("Check of a job that waits for a busy provider = %v, want nil", err)
	}
}

// TestErrors: what goes wrong reaches the caller as an error it can
// branch on, and what is not an error (a grant to a job that moved on)
// is not one.
func TestErrors(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()

	// A job whose escrow is more than the owner has: the ledger's refusal.
	poorKR, err := keys.Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	poor, err := poorKR.AddUnencrypted("poor")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.cl.SendMsg(ctx, w.alice, 0, &ledger.MsgSend{To: poor.Address, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	var txErr *chainclient.TxError
	if _, err := jobclient.New(w.cl, poor, t.TempDir(), lt.ChainID).Submit(ctx, w.spec(t, "2", "none", "")); !errors.As(err, &txErr) || txErr.Result.Code != ledger.ErrInsufficientFunds.Code {
		t.Errorf("Submit by a key with 1000 usync: %v, want the ledger's insufficient funds", err)
	}

	// No such job.
	if _, err := w.jc.Follow(ctx, 99, poll, nil); !chainclient.IsNotFound(err) {
		t.Errorf("Follow(99): %v, want not found", err)
	}

	// A grant to a job cancelled since it was read is no error and no
	// grant.
	id, err := w.jc.Submit(ctx, w.spec(t, "2", "none", ""))
	if err != nil {
		t.Fatal(err)
	}
	stale, err := w.cl.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.cl.SendMsg(ctx, w.alice, 0, &ledger.MsgCancelJob{JobID: id}); err != nil {
		t.Fatal(err)
	}
	if granted, err := w.jc.GrantIfNeeded(ctx, stale); granted || err != nil {
		t.Errorf("GrantIfNeeded on a job cancelled meanwhile = %v, %v; want false, nil", granted, err)
	}
	j, err := w.cl.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.jc.FetchOutputs(ctx, j, t.TempDir()); err == nil || !strings.Contains(err.Error(), "has no result") {
		t.Errorf("FetchOutputs of a cancelled job: %v, want no result", err)
	}

	// Watch ends with the context's error when the caller stops
	// following (gpunet job run prints "detached" on it).
	id, err = w.jc.Submit(ctx, w.spec(t, "2", "none", ""))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := w.jc.Watch(wctx, id, jobclient.WatchOptions{Poll: poll, Logs: &syncBuffer{}})
		done <- err
	}()
	w.waitPolls(t, 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Watch after its context ended: %v, want context.Canceled", err)
	}
}

// TestCancelKeepsPartialLog: Cancel settles the job (the provider paid for
// the time it ran, the rest refunded) and keeps what the node relayed of
// its log, so that the log of a cancelled job (which has no log blob)
// still reads once the node has forgotten it: here a second node of the
// same chain, whose relay never held it.
func TestCancelKeepsPartialLog(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	id, err := w.jc.Submit(ctx, w.spec(t, "2", "none", ""))
	if err != nil {
		t.Fatal(err)
	}
	if j, err := w.cl.Job(ctx, id); err != nil {
		t.Fatal(err)
	} else if _, err := w.jc.GrantIfNeeded(ctx, j); err != nil {
		t.Fatal(err)
	}
	w.chain.Send(w.prov, &ledger.MsgStartJob{JobID: id})
	w.postLog(t, id, 0, "step 1\n")
	w.postLog(t, id, 1, "step 2\n")
	j, err := w.jc.Cancel(ctx, id)
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if j.State != ledger.JobCancelled || j.Escrow != 0 || j.Refund == 0 {
		t.Errorf("cancelled job: state %s, escrow %d, refund %d; want cancelled, nothing left in escrow, a refund", j.State, j.Escrow, j.Refund)
	}
	if _, err := w.jc.Cancel(ctx, id); !errors.Is(err, jobclient.ErrAlreadyDone) {
		t.Errorf("Cancel of a cancelled job: %v, want ErrAlreadyDone", err)
	}
	var got bytes.Buffer
	if err := w.jc.Log(ctx, id, &got); err != nil || got.String() != "step 1\nstep 2\n" {
		t.Errorf("Log of the cancelled job from the node that relayed it = %q, %v", got.String(), err)
	}

	other := jobclient.New(chainclient.New(apiservertest.NewServer(t, w.chain).URL), w.alice, filepath.Dir(filepath.Dir(filepath.Dir(w.jc.Dir))), lt.ChainID)
	other.Dir = w.jc.Dir
	got.Reset()
	if err := other.Log(ctx, id, &got); err != nil || got.String() != "step 1\nstep 2\n" {
		t.Errorf("Log of the cancelled job from a node without its live log = %q, %v; want the log Cancel kept", got.String(), err)
	}
	other.Dir = t.TempDir()
	if err := other.Log(ctx, id, &got); !errors.Is(err, jobclient.ErrNoLog) {
		t.Errorf("Log with neither the relay nor a kept log: %v, want ErrNoLog", err)
	}
}

// TestNotOwner: another key asking for a job's logs or outputs, or to
// cancel it, gets a NotOwnerError naming the owner, never a decryption
// error.
func TestNotOwner(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	id, err := w.jc.Submit(ctx, w.spec(t, "2", "none", ""))
	if err != nil {
		t.Fatal(err)
	}
	kr, err := keys.Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	bob, err := kr.AddUnencrypted("bob")
	if err != nil {
		t.Fatal(err)
	}
	bc := jobclient.New(w.cl, bob, t.TempDir(), lt.ChainID)
	j, err := w.cl.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"FollowLogs":   func() error { return bc.FollowLogs(ctx, id, poll, io.Discard) },
		"Log":          func() error { return bc.Log(ctx, id, io.Discard) },
		"FetchOutputs": func() error { return bc.FetchOutputs(ctx, j, t.TempDir()) },
		"FetchLogs":    func() error { return bc.FetchLogs(ctx, j, io.Discard) },
		"Cancel":       func() error { _, err := bc.Cancel(ctx, id); return err },
	} {
		var no *jobclient.NotOwnerError
		if err := call(); !errors.As(err, &no) || no.Owner != w.alice.Address || no.Key != bob.Address || no.Job != id {
			t.Errorf("%s by bob: %v, want a NotOwnerError naming alice", name, err)
		}
	}
	if j, _ := w.cl.Job(ctx, id); j.Done() {
		t.Errorf("bob's Cancel ended alice's job: %s", j.State)
	}
}
