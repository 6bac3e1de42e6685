package apiserver

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// runner returns the key of the provider running job id on f.
func runner(t *testing.T, f *fakeChain, id uint64) lt.Key {
	t.Helper()
	kv, release := f.View()
	defer release()
	j, found, err := ledger.GetJob(kv, id)
	if err != nil || !found || len(j.Assignments) == 0 {
		t.Fatalf("job %d: %+v %v %v, want an assigned job", id, j, found, err)
	}
	for _, k := range providerKeys {
		if k.Addr == j.Assignments[0].Provider {
			return k
		}
	}
	t.Fatalf("job %d runs on %s, not a test provider", id, j.Assignments[0].Provider)
	return lt.Key{}
}

// postChunks posts n chunks of size bytes to job id as provider k, from
// post number seq on.
func postChunks(t *testing.T, s *Server, k lt.Key, id, seq uint64, n, size int) {
	t.Helper()
	for i := range n {
		data := bytes.Repeat([]byte{byte(i)}, size)
		sig := ed25519.Sign(k.Priv, apiwire.LogSignBytes(id, seq+uint64(i), data))
		rec := do(t, s, "POST", fmt.Sprintf("/v1/jobs/%d/logs", id), data, map[string]string{
			"X-Gpunet-Provider":  k.Addr.String(),
			"X-Gpunet-Seq":       strconv.FormatUint(seq+uint64(i), 10),
			"X-Gpunet-Signature": hex.EncodeToString(sig),
		}, nil)
		if rec.Code != 201 {
			t.Fatalf("post %d to job %d: %d %s", i, id, rec.Code, rec.Body)
		}
	}
}

// TestLogRelayBounded is the attack of issue 19: a provider posting
// maximal chunks to its job made the node keep 128 MiB for it, and one
// anonymous read returned every chunk in a single page.
func TestLogRelayBounded(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	k := runner(t, f, 1)
	const n = 40 // 10 MiB of chunks
	postChunks(t, s, k, 1, 0, n, maxLogChunkBytes)
	if s.logs.bytes > maxJobLogBytes {
		t.Errorf("relay holds %d bytes for one job, want at most %d", s.logs.bytes, maxJobLogBytes)
	}

	var page apiwire.LogPage
	rec := do(t, s, "GET", "/v1/jobs/1/logs?limit=512", nil, nil, &page)
	// JSON carries the data in base64: 4/3 of it, plus a little per chunk.
	if got, want := rec.Body.Len(), maxLogPageBytes*4/3+64*1024; got > want {
		t.Errorf("a page is %d bytes, want at most %d", got, want)
	}
	if len(page.Chunks) == 0 || page.Dropped == 0 || page.Next != page.Chunks[len(page.Chunks)-1].Seq+1 {
		t.Fatalf("page: %d chunks, dropped %d, next %d: want some chunks, earlier ones dropped, next after the last", len(page.Chunks), page.Dropped, page.Next)
	}
	// Reading on from Next reaches the end of the log.
	for next, pages := page.Next, 1; next < n; pages++ {
		var p apiwire.LogPage
		do(t, s, "GET", fmt.Sprintf("/v1/jobs/1/logs?from=%d", next), nil, nil, &p)
		if p.Dropped != 0 || len(p.Chunks) == 0 || p.Chunks[0].Seq != next || pages > n {
			t.Fatalf("page from %d: %d chunks, dropped %d", next, len(p.Chunks), p.Dropped)
		}
		next = p.Next
	}
}

// TestLogRelayGlobalBound: past the relay's total, the job holding the
// most loses its oldest chunks, not the others.
func TestLogRelayGlobalBound(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	s.logs.jobBytes, s.logs.totalBytes = 8<<10, 10<<10
	postChunks(t, s, runner(t, f, 3), 3, 0, 2, 1<<10) // a quiet job: 2 KiB
	postChunks(t, s, runner(t, f, 1), 1, 0, 30, 1<<10)
	if s.logs.bytes > 10<<10 {
		t.Errorf("relay holds %d bytes, want at most %d", s.logs.bytes, 10<<10)
	}
	if got := s.logs.jobs[1].bytes; got > 8<<10 {
		t.Errorf("the noisy job holds %d bytes, want at most %d", got, 8<<10)
	}
	if got := s.logs.jobs[3].bytes; got != 2<<10 {
		t.Errorf("the quiet job holds %d bytes, want its 2 KiB kept", got)
	}
}

// TestLogRelayForgetsEndedJobs: a job's chunks go logGrace after it ends.
func TestLogRelayForgetsEndedJobs(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	now := time.Unix(1_000_000, 0)
	s.logs.now = func() time.Time { return now }
	postChunks(t, s, runner(t, f, 1), 1, 0, 4, 1<<10)
	f.send(consumerKey, &ledger.MsgCancelJob{JobID: 1})

	read := func() apiwire.LogPage {
		var p apiwire.LogPage
		do(t, s, "GET", "/v1/jobs/1/logs", nil, nil, &p)
		return p
	}
	now = now.Add(logSweepEvery)
	if p := read(); len(p.Chunks) != 4 {
		t.Fatalf("just after the end: %d chunks, want the 4 posted (the owner reads the tail)", len(p.Chunks))
	}
	now = now.Add(logGrace)
	if p := read(); len(p.Chunks) != 0 {
		t.Errorf("%v after the end: %d chunks, want none", logGrace, len(p.Chunks))
	}
	if s.logs.bytes != 0 || len(s.logs.jobs) != 0 || len(s.logs.order) != 0 {
		t.Errorf("relay still holds %d bytes, %d jobs, order %v", s.logs.bytes, len(s.logs.jobs), s.logs.order)
	}
}
