package ledger_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

var hashA = "sha256:" + strings.Repeat("ab", 32)

func TestDataAtValidation(t *testing.T) {
	for _, c := range []struct {
		at string
		ok bool
	}{
		{"", true},
		{"http://127.0.0.1:8080", true},
		{"https://node.example.com", true},
		{"https://node.example.com/gpunet", true},
		{"ftp://node.example.com", false},
		{"node.example.com:8080", false},
		{"http://", false},
		{"http://user:pw@node.example.com", false},
		{"http://node.example.com/?x=1", false},
		{"http://node.example.com/#x", false},
		{"http://node.example.com/" + strings.Repeat("a", 240), false}, // > 256 bytes
		{"http://node example.com", false},
	} {
		m := &ledger.MsgSubmitJob{Spec: lt.WasmJob("d", 1000, 60), ConsumerKey: lt.AgeKey("c"), DataAt: c.at}
		err := m.ValidateBasic()
		if (err == nil) != c.ok {
			t.Errorf("submit data_at %q: err %v, want ok=%v", c.at, err, c.ok)
		}
		if err != nil && !errors.Is(err, ledger.ErrInvalidMsg) {
			t.Errorf("submit data_at %q: %v is not ErrInvalidMsg", c.at, err)
		}
		r := &ledger.MsgCommitResult{JobID: 1, Result: &ledger.JobResult{OutputBlob: hashA, DataAt: c.at}}
		if err := r.ValidateBasic(); (err == nil) != c.ok {
			t.Errorf("commit data_at %q: err %v, want ok=%v", c.at, err, c.ok)
		}
		rv := &ledger.MsgRevealResult{JobID: 1, Result: ledger.JobResult{OutputBlob: hashA, DataAt: c.at}}
		if err := rv.ValidateBasic(); (err == nil) != c.ok {
			t.Errorf("reveal data_at %q: err %v, want ok=%v", c.at, err, c.ok)
		}
	}
}

func TestURLInputValidation(t *testing.T) {
	in := func(path, url, sum string, size uint64) ledger.URLInput {
		return ledger.URLInput{Path: path, URL: url, SHA256: sum, Size: size}
	}
	many := make([]ledger.URLInput, ledger.MaxURLInputs+1)
	for i := range many {
		many[i] = in("/in/"+strings.Repeat("x", i+1), "https://e.com/a", hashA, 0)
	}
	for _, c := range []struct {
		name   string
		inputs []ledger.URLInput
		want   string // "" accepted, else part of the error
	}{
		{"ok", []ledger.URLInput{in("/in/a", "https://e.com/a?v=1", hashA, 10), in("/in/b", "http://10.0.0.1/b", hashA, 0)}, ""},
		{"scheme", []ledger.URLInput{in("/in/a", "file:///etc/passwd", hashA, 0)}, "scheme"},
		{"no host", []ledger.URLInput{in("/in/a", "https:///a", hashA, 0)}, "no host"},
		{"hash", []ledger.URLInput{in("/in/a", "https://e.com/a", "abcd", 0)}, "sha256"},
		{"upper-case hash", []ledger.URLInput{in("/in/a", "https://e.com/a", strings.ToUpper(hashA), 0)}, "sha256"},
		{"relative path", []ledger.URLInput{in("in/a", "https://e.com/a", hashA, 0)}, "absolute"},
		{"dot dot", []ledger.URLInput{in("/in/../a", "https://e.com/a", hashA, 0)}, ".."},
		{"a directory", []ledger.URLInput{in("/in/", "https://e.com/a", hashA, 0)}, "file's path"},
		{"twice", []ledger.URLInput{in("/in/a", "https://e.com/a", hashA, 0), in("/in/a", "https://e.com/b", hashA, 0)}, "another input"},
		{"bundle path", []ledger.URLInput{in("/data", "https://e.com/a", hashA, 0)}, "another input"},
		{"too big", []ledger.URLInput{in("/in/a", "https://e.com/a", hashA, 1<<29), in("/in/b", "https://e.com/b", hashA, 1<<29+1)}, "disk"},
		{"too many", many, "at most"},
		{"long URL", []ledger.URLInput{in("/in/a", "https://e.com/"+strings.Repeat("a", ledger.MaxInputURLLen), hashA, 0)}, "bytes"},
	} {
		s := lt.WasmJob("u", 1000, 60)
		s.Inputs = []string{"/data"}
		s.URLInputs = c.inputs
		err := s.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ledger.ErrInvalidMsg)):
			t.Errorf("%s: err %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestReleaseJob: only the assigned provider may hand a job back, and only
// before it committed; the job is placed again with the reason recorded,
// and the provider is not paid for the slot.
func TestReleaseJob(t *testing.T) {
	c := jobChain(t)
	spec := lt.WasmJob("rel", 100_000, 600)
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: lt.AgeKey("consumer"), DataAt: "http://127.0.0.1:1"})})
	j := job(t, c, 1)
	if j.DataAt != "http://127.0.0.1:1" {
		t.Fatalf("data_at %q not recorded", j.DataAt)
	}
	first := keyOf(t, j.Assignments[0].Provider.String())
	other := prov1
	if other.Addr == first.Addr {
		other = prov2
	}
	if r := send(t, c, other, &ledger.MsgReleaseJob{JobID: 1, Reason: "x"}); !errors.Is(r.Err, ledger.ErrNotJobParty) {
		t.Fatalf("release by a provider not assigned: %v", r.Err)
	}
	if r := send(t, c, consumer, &ledger.MsgReleaseJob{JobID: 1, Reason: "x"}); !errors.Is(r.Err, ledger.ErrNotJobParty) {
		t.Fatalf("release by the owner: %v", r.Err)
	}
	if err := (&ledger.MsgReleaseJob{JobID: 1}).ValidateBasic(); !errors.Is(err, ledger.ErrInvalidMsg) {
		t.Fatalf("release without a reason: %v", err)
	}
	if err := (&ledger.MsgReleaseJob{JobID: 1, Reason: strings.Repeat("x", ledger.MaxReleaseLen+1)}).ValidateBasic(); !errors.Is(err, ledger.ErrInvalidMsg) {
		t.Fatalf("release with a long reason: %v", err)
	}
	before := c.Balance(t, first.Addr)
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: first.Addr, WrappedKey: []byte("k")}}})})
	must(t, []ledger.TxResult{send(t, c, first, &ledger.MsgReleaseJob{JobID: 1, Reason: "input blob missing on every node"})})
	j = job(t, c, 1)
	if j.ReleasedBy == nil || *j.ReleasedBy != first.Addr || j.Released != "input blob missing on every node" {
		t.Fatalf("released by %v: %q", j.ReleasedBy, j.Released)
	}
	// Requeued with its cause, or already placed again (or waiting for a
	// provider) at the end of the block.
	if w := j.Wait; w == nil || w.Code != ledger.WaitPlaced && w.Code != ledger.WaitUnplaced && (w.Code != ledger.WaitRequeued || w.Cause != ledger.CauseReleased || w.Text != j.Released) {
		t.Fatalf("wait after the release: %+v", w)
	}
	if j.Attempts != 2 || len(j.Assignments) != 1 || j.Assignments[0].Provider == first.Addr && j.State != ledger.JobAssigned {
		t.Fatalf("after the release: %s attempts %d %+v (%s)", j.State, j.Attempts, j.Assignments, j.Reason)
	}
	if provider(t, c, first).Jobs != 0 && j.Assignments[0].Provider != first.Addr {
		t.Fatal("the provider that released still holds a slot")
	}
	if got := c.Balance(t, first.Addr); got != before {
		t.Fatalf("the releasing provider's balance went from %d to %d", before, got)
	}
	// A committed replica cannot hand the job back.
	p := runJob(t, c, 1, 5, false)
	if r := send(t, c, p, &ledger.MsgReleaseJob{JobID: 1, Reason: "late"}); !errors.Is(r.Err, ledger.ErrNotJobParty) && !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("release after the result: %v", r.Err)
	}
}

// TestReleaseAfterCommitRefused: in a job with two replicas, one that
// committed cannot release while the other has not.
func TestReleaseAfterCommitRefused(t *testing.T) {
	c := jobChain(t)
	spec := lt.WasmJob("full", 100_000, 600)
	spec.Verification = ledger.VerifyFull
	must(t, []ledger.TxResult{submit(t, c, spec)})
	j := job(t, c, 1)
	if len(j.Assignments) != 2 {
		t.Fatalf("%d assignments", len(j.Assignments))
	}
	var grants []ledger.Grant
	for _, a := range j.Assignments {
		grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("k")})
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: grants})})
	p := keyOf(t, j.Assignments[0].Provider.String())
	must(t, []ledger.TxResult{send(t, c, p, &ledger.MsgStartJob{JobID: 1})})
	cm := ledger.Hash{1}
	must(t, []ledger.TxResult{send(t, c, p, &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: 1})})
	if r := send(t, c, p, &ledger.MsgReleaseJob{JobID: 1, Reason: "x"}); !errors.Is(r.Err, ledger.ErrJobState) {
		t.Fatalf("release after commit: %v", r.Err)
	}
}
