package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestBlobSourcesOnlyKnownNodes: the gateway fetches only blobs the named
// job references, first from where the job says it was put when that is a
// known node, never from a data_at that is not (SSRF), then from the
// nodes it knows.
func TestBlobSourcesOnlyKnownNodes(t *testing.T) {
	g := lt.Genesis(100_000_000_000, "consumer")
	c := lt.NewChain(t, g)
	consumer := lt.NewKey("consumer")
	spec := lt.WasmJob("j", 1000, 60)
	input := blob.Sum([]byte("input")).String()
	spec.Inputs = []string{"/in"}
	for i, at := range []string{"http://10.0.0.2:8080", "http://169.254.169.254"} {
		r := c.ApplyBlock(t, consumer.Tx(lt.ChainID, uint64(i), 0, &ledger.MsgSubmitJob{Spec: spec, InputBlob: input, ConsumerKey: lt.AgeKey("c"), DataAt: at}))
		if r[0].Err != nil {
			t.Fatal(r[0].Err)
		}
	}
	book := newPeerBook("http://10.0.0.1:8080", "c", []string{"http://10.0.0.3:8080", "http://10.0.0.2:8080/"}, slog.New(slog.DiscardHandler))
	d := &dataSources{view: func() (ledger.KV, func()) { return c.KV, func() {} }, peers: book}
	h, _ := blob.ParseHash(input)
	module, _ := blob.ParseHash(spec.Module)

	urls, maxBytes, err := d.BlobSources(t.Context(), h, 1)
	if err != nil || !slices.Equal(urls, []string{"http://10.0.0.2:8080", "http://10.0.0.3:8080"}) || maxBytes <= int64(spec.Disk) {
		t.Fatalf("job 1's input: %v %d %v, want its data_at first, then the other known node, bounded by its disk", urls, maxBytes, err)
	}
	if urls, _, err := d.BlobSources(t.Context(), module, 2); err != nil || slices.Contains(urls, "http://169.254.169.254") || len(urls) != 2 {
		t.Fatalf("job 2 (data_at not a known node): %v %v, want only the known nodes", urls, err)
	}
	for _, c := range []struct {
		name string
		h    blob.Hash
		job  uint64
	}{
		{"no job named", h, 0},
		{"no such job", h, 99},
		{"a hash the job does not name", blob.Sum([]byte("other")), 1},
	} {
		if _, _, err := d.BlobSources(t.Context(), c.h, c.job); !errors.Is(err, blob.ErrNotReferenced) {
			t.Errorf("%s: %v, want ErrNotReferenced", c.name, err)
		}
	}
}

// TestRetention: a finished job's blobs go once its retention has passed;
// before that its outputs go only a grace after their owner fetched them;
// a running job's blobs stay. Real store, real sweep.
func TestRetention(t *testing.T) {
	s, err := blob.OpenStore(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	put := func(name string) string {
		h, _, err := s.Put(t.Context(), strings.NewReader(name), nil)
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	now := time.Now()
	job := func(id uint64, state string, finished time.Time) *ledger.Job {
		j := &ledger.Job{ID: id, State: state, Spec: ledger.JobSpec{Module: put("module" + state + finished.String())}, InputBlob: put("input" + state + finished.String()),
			Assignments: []ledger.Assignment{{Result: &ledger.JobResult{OutputBlob: put("out" + state + finished.String()), LogBlob: put("log" + state + finished.String())}}}}
		j.Spec.Compare = &ledger.CompareSpec{Program: put("judge" + state + finished.String())}
		if !finished.IsZero() {
			j.FinishedAt = finished.Unix()
		}
		return j
	}
	const retention = 24 * time.Hour
	running := job(1, ledger.JobRunning, time.Time{})
	old := job(2, ledger.JobSucceeded, now.Add(-retention-time.Hour))
	recentUnfetched := job(3, ledger.JobSucceeded, now.Add(-time.Hour))
	recentFetched := job(4, ledger.JobSucceeded, now.Add(-2*time.Hour))
	out4, _ := blob.ParseHash(recentFetched.Assignments[0].Result.OutputBlob)
	s.MarkFetched(out4)
	// The mark is from an hour ago: past the grace.
	past := now.Add(-time.Hour)
	os.Chtimes(filepath.Join(s.Dir(), "fetched", out4.Hex()), past, past)
	jobs := []*ledger.Job{running, old, recentUnfetched, recentFetched}

	sweepOnce(s, func(fn func(*ledger.Job) bool) error {
		for _, j := range jobs {
			fn(j)
		}
		return nil
	}, retention, now, slog.New(slog.DiscardHandler))

	has := func(ref string) bool {
		h, _ := blob.ParseHash(ref)
		_, err := s.Stat(h)
		return err == nil
	}
	for _, c := range []struct {
		what string
		ref  string
		want bool
	}{
		{"running job's module", running.Spec.Module, true},
		{"running job's judge program", running.Spec.Compare.Program, true},
		{"old job's judge program", old.Spec.Compare.Program, false},
		{"running job's output", running.Assignments[0].Result.OutputBlob, true},
		{"old job's input", old.InputBlob, false},
		{"old job's output", old.Assignments[0].Result.OutputBlob, false},
		{"old job's log", old.Assignments[0].Result.LogBlob, false},
		{"recent job's unfetched output", recentUnfetched.Assignments[0].Result.OutputBlob, true},
		{"recent job's input", recentUnfetched.InputBlob, true},
		{"fetched output past its grace", recentFetched.Assignments[0].Result.OutputBlob, false},
		{"fetched job's input, within retention", recentFetched.InputBlob, true},
	} {
		if got := has(c.ref); got != c.want {
			t.Errorf("%s: kept %v, want %v", c.what, got, c.want)
		}
	}
	// The unfetched output goes once the retention has passed.
	sweepOnce(s, func(fn func(*ledger.Job) bool) error { fn(recentUnfetched); return nil }, retention, now.Add(retention), slog.New(slog.DiscardHandler))
	if has(recentUnfetched.Assignments[0].Result.OutputBlob) {
		t.Error("an unfetched output outlived its retention")
	}
}

// TestPeersLearned: a node learns the nodes its peers know, only those
// that answer as nodes of its chain, and lists them at GET /v1/net/peers.
func TestPeersLearned(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	serve := func(b *peerBook) *httptest.Server {
		mux := http.NewServeMux()
		for _, r := range b.routes() {
			mux.Handle(r.Method+" "+r.Path, r.Handler)
		}
		return httptest.NewServer(mux)
	}
	// C is a node of the chain; X a server of another chain.
	var urlC, urlX string
	c := newPeerBook("", "chain", nil, log)
	srvC := serve(c)
	t.Cleanup(srvC.Close)
	urlC = srvC.URL
	c.self = urlC
	x := newPeerBook("", "other", nil, log)
	srvX := serve(x)
	t.Cleanup(srvX.Close)
	urlX = srvX.URL
	x.self = urlX
	b := newPeerBook("", "chain", []string{urlC, urlX}, log)
	srvB := serve(b)
	t.Cleanup(srvB.Close)
	b.self = srvB.URL
	a := newPeerBook("http://a.invalid", "chain", []string{srvB.URL}, log)

	a.learnOnce(t.Context())
	if !a.Known(urlC) || a.Known(urlX) {
		t.Fatalf("A knows %v: want C (%s) learned from B, not X (%s) of another chain", a.List(), urlC, urlX)
	}
	var got struct {
		APIURL string   `json:"api_url"`
		Peers  []string `json:"peers"`
	}
	resp, err := http.Get(srvB.URL + "/v1/net/peers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.APIURL != srvB.URL || !slices.Contains(got.Peers, urlC) {
		t.Fatalf("B's /v1/net/peers: %+v %v", got, err)
	}
	// Bounded.
	for i := range maxLearnedPeers + 10 {
		a.mu.Lock()
		if len(a.learned) < maxLearnedPeers {
			a.learned = append(a.learned, "http://n"+string(rune('a'+i%26))+".invalid/"+string(rune('a'+i/26)))
		}
		a.mu.Unlock()
	}
	a.learnOnce(t.Context())
	if n := len(a.List()); n > maxLearnedPeers+1 {
		t.Fatalf("A knows %d nodes, more than its bound", n)
	}
}

// TestOutputsFetchedNeedsTheOwner: only a request signed by the job's
// owner marks its outputs fetched.
func TestOutputsFetchedNeedsTheOwner(t *testing.T) {
	c := lt.NewChain(t, lt.Genesis(100_000_000_000, "consumer", "mallory"))
	consumer, mallory := lt.NewKey("consumer"), lt.NewKey("mallory")
	if r := c.ApplyBlock(t, consumer.Tx(lt.ChainID, 0, 0, &ledger.MsgSubmitJob{Spec: lt.WasmJob("j", 1000, 60), ConsumerKey: lt.AgeKey("c")})); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	s, _ := blob.OpenStore(t.TempDir(), 1<<20)
	mux := http.NewServeMux()
	for _, r := range dataRoutes(&blobKeeper{store: s, view: func() (ledger.KV, func()) { return c.KV, func() {} }, retention: time.Hour}) {
		mux.Handle(r.Method+" "+r.Path, r.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	post := func(k *lt.Key) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/jobs/1/fetched", nil)
		if k != nil {
			req.Header.Set("Authorization", blob.SignRequest(signer{*k}, http.MethodPost, "/v1/jobs/1/fetched"))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(nil); got != http.StatusUnauthorized {
		t.Errorf("unsigned: %d", got)
	}
	if got := post(&mallory); got != http.StatusForbidden {
		t.Errorf("signed by another account: %d", got)
	}
	if got := post(&consumer); got != http.StatusConflict {
		t.Errorf("signed by the owner of a job with no outputs yet: %d", got)
	}
}

// TestFetchedRefsOfGang: the owner's "fetched" lets go of a gang's every
// member's outputs and log, not rank 0's alone; of a single job, the
// delivered result's.
func TestFetchedRefsOfGang(t *testing.T) {
	r0 := &ledger.JobResult{OutputBlob: "o0", LogBlob: "l0"}
	r1 := &ledger.JobResult{OutputBlob: "o1", LogBlob: "l1"}
	j := &ledger.Job{Spec: ledger.JobSpec{Nodes: 2}, Assignments: []ledger.Assignment{{Rank: 0, Result: r0}, {Rank: 1, Result: r1}}}
	if got := fetchedRefs(j, r0); !slices.Equal(got, []string{"o0", "l0", "o1", "l1"}) {
		t.Errorf("gang: %q", got)
	}
	j.Spec.Nodes = 1
	if got := fetchedRefs(j, r0); !slices.Equal(got, []string{"o0", "l0"}) {
		t.Errorf("single job: %q", got)
	}
}

// TestJobHoldsJudgeProgram: a node serves a compare job's judge program
// (compare.program) to the job's providers as it serves its module, and
// nothing else of the job's by that name.
func TestJobHoldsJudgeProgram(t *testing.T) {
	program := blob.Sum([]byte("judge")).String()
	j := &ledger.Job{Spec: ledger.JobSpec{Module: blob.Sum([]byte("module")).String(), Compare: &ledger.CompareSpec{Program: program}}, DataAt: "http://10.0.0.2:8080"}
	if at, _, ok := jobHolds(j, program); !ok || at != j.DataAt {
		t.Errorf("jobHolds(judge program) = %q, %v; want the job's data_at, true", at, ok)
	}
	j.Spec.Compare = &ledger.CompareSpec{RTolE18: 1}
	if _, _, ok := jobHolds(j, program); ok {
		t.Error("a job without a judge program holds one")
	}
}
