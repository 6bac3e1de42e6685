package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sourcesFunc adapts a function to Sources.
type sourcesFunc func(ctx context.Context, h Hash, job uint64) ([]string, int64, error)

func (f sourcesFunc) BlobSources(ctx context.Context, h Hash, job uint64) ([]string, int64, error) {
	return f(ctx, h, job)
}

// fetchGateway serves a fresh store with fetch-through from src.
func fetchGateway(t *testing.T, src Sources) (*Store, *httptest.Server) {
	t.Helper()
	s := newStore(t, 1<<20)
	h := NewGateway(s, GatewayOptions{Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)), Fetch: &FetchOptions{Sources: src, IdleTimeout: 5 * time.Second}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return s, srv
}

// TestFetchThroughFromPeer: node B's gateway lacks a blob that node A's
// has; a GET on B fetches it from A (real HTTP servers, two stores), checks
// it, keeps it and serves it, and a later GET is served from B's own store.
func TestFetchThroughFromPeer(t *testing.T) {
	a, _, srvA := newGateway(t, 1<<20)
	content := bytes.Repeat([]byte("ciphertext "), 10000)
	h, _, err := a.Put(t.Context(), bytes.NewReader(content), nil)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	var gotJob atomic.Uint64
	b, srvB := fetchGateway(t, sourcesFunc(func(_ context.Context, got Hash, job uint64) ([]string, int64, error) {
		asked.Add(1)
		gotJob.Store(job)
		if got != h {
			return nil, 0, ErrNotReferenced
		}
		return []string{srvA.URL}, int64(len(content)), nil
	}))
	var buf bytes.Buffer
	if _, err := NewClient(srvB.URL).GetForJob(t.Context(), h, 42, &buf); err != nil {
		t.Fatalf("GET through B: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), content) {
		t.Fatal("B served other bytes")
	}
	if gotJob.Load() != 42 {
		t.Fatalf("the sources saw job %d, want 42", gotJob.Load())
	}
	if n, err := b.Stat(h); err != nil || n != int64(len(content)) {
		t.Fatalf("B keeps %d bytes, %v", n, err)
	}
	buf.Reset()
	if _, err := NewClient(srvB.URL).Get(t.Context(), h, &buf); err != nil || asked.Load() != 1 {
		t.Fatalf("second GET: %v, sources asked %d times (want once: served from B's store)", err, asked.Load())
	}
	// Asked with LocalHeader, B does not fetch.
	resp, _ := doHeader(t, srvB.URL+"/v1/blobs/"+hashOf([]byte("other")).String(), LocalHeader)
	if resp.StatusCode != http.StatusNotFound || asked.Load() != 1 {
		t.Fatalf("local GET: %d, sources asked %d times", resp.StatusCode, asked.Load())
	}
}

func hashOf(b []byte) Hash { return Hash(sha256.Sum256(b)) }

func doHeader(t *testing.T, url, header string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set(header, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp, b.Bytes()
}

// TestFetchThroughRefusesWrongBytes: a peer that serves other bytes under
// the name is not believed: nothing is stored, the client gets 404, and
// the next source is tried.
func TestFetchThroughRefusesWrongBytes(t *testing.T) {
	want := []byte("the real ciphertext")
	h := hashOf(want)
	var liarHits, honestHits atomic.Int32
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		liarHits.Add(1)
		w.Write([]byte("forged bytes"))
	}))
	t.Cleanup(liar.Close)
	b, srvB := fetchGateway(t, sourcesFunc(func(context.Context, Hash, uint64) ([]string, int64, error) {
		return []string{liar.URL}, 0, nil
	}))
	var buf bytes.Buffer
	_, err := NewClient(srvB.URL).Get(t.Context(), h, &buf)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "hash") {
		t.Fatalf("GET of a forged blob: %v", err)
	}
	if _, err := b.Stat(h); !errors.Is(err, ErrNotFound) || liarHits.Load() != 1 {
		t.Fatalf("B stored the forged blob (%v) or asked %d times", err, liarHits.Load())
	}
	if n, _, _ := b.Usage(); n != 0 {
		t.Fatalf("B holds %d blobs", n)
	}

	// With an honest node after the liar, the blob arrives.
	honest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		honestHits.Add(1)
		w.Write(want)
	}))
	t.Cleanup(honest.Close)
	_, srvC := fetchGateway(t, sourcesFunc(func(context.Context, Hash, uint64) ([]string, int64, error) {
		return []string{liar.URL, honest.URL}, 0, nil
	}))
	if _, err := NewClient(srvC.URL).Get(t.Context(), h, &buf); err != nil || honestHits.Load() != 1 {
		t.Fatalf("liar then honest: %v (honest asked %d times)", err, honestHits.Load())
	}
}

// TestFetchThroughRefusesUnreferenced: a hash the sources refuse (no job
// names it, or the source is no known peer) is not fetched: nobody is
// dialled, and the client is told why.
func TestFetchThroughRefusesUnreferenced(t *testing.T) {
	var hits atomic.Int32
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(peer.Close)
	_, srv := fetchGateway(t, sourcesFunc(func(context.Context, Hash, uint64) ([]string, int64, error) {
		return nil, 0, fmt.Errorf("job 7: %w", ErrNotReferenced)
	}))
	resp, b := do(t, http.MethodGet, srv.URL+"/v1/blobs/"+hashOf([]byte("x")).String()+"?job=7", nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "no job") || hits.Load() != 0 {
		t.Fatalf("unreferenced: %d %s, peer hit %d times", resp.StatusCode, b, hits.Load())
	}
	resp, b = do(t, http.MethodGet, srv.URL+"/v1/blobs/"+hashOf([]byte("x")).String()+"?job=x", nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad job: %d %s", resp.StatusCode, b)
	}
}

// TestFetchThroughBounded: a blob larger than its bound is refused, by
// its declared length and, undeclared, as it streams.
func TestFetchThroughBounded(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 4096)
	h := hashOf(big)
	for _, chunked := range []bool{false, true} {
		peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !chunked {
				w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			}
			w.Write(big[:10])
			w.(http.Flusher).Flush()
			w.Write(big[10:])
		}))
		t.Cleanup(peer.Close)
		b, srv := fetchGateway(t, sourcesFunc(func(context.Context, Hash, uint64) ([]string, int64, error) {
			return []string{peer.URL}, 1000, nil
		}))
		_, err := NewClient(srv.URL).Get(t.Context(), h, &bytes.Buffer{})
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "too large") {
			t.Fatalf("chunked=%v: %v", chunked, err)
		}
		if _, err := b.Stat(h); !errors.Is(err, ErrNotFound) {
			t.Fatalf("chunked=%v: stored", chunked)
		}
	}
}

// TestFetchThroughOnePerHash: concurrent GETs of one missing blob make one
// request to the peer; all of them get the blob.
func TestFetchThroughOnePerHash(t *testing.T) {
	content := []byte("slowly served ciphertext")
	h := hashOf(content)
	release := make(chan struct{})
	var hits atomic.Int32
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		<-release
		w.Write(content)
	}))
	t.Cleanup(peer.Close)
	_, srv := fetchGateway(t, sourcesFunc(func(context.Context, Hash, uint64) ([]string, int64, error) {
		return []string{peer.URL}, 0, nil
	}))
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			_, err := NewClient(srv.URL).Get(t.Context(), h, &buf)
			if err == nil && !bytes.Equal(buf.Bytes(), content) {
				err = errors.New("wrong bytes")
			}
			errs <- err
		}()
	}
	// Let every request reach the gateway before the peer answers.
	deadline := time.Now().Add(5 * time.Second)
	for hits.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := hits.Load(); got != 1 {
		t.Fatalf("the peer was asked %d times, want 1", got)
	}
}

// TestRetentionMarks: a fetch mark is kept from the first fetch and goes
// with the blob.
func TestRetentionMarks(t *testing.T) {
	s := newStore(t, 1<<20)
	h, _, err := s.Put(t.Context(), strings.NewReader("out"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.FetchedAt(h); ok {
		t.Fatal("fetched before any fetch")
	}
	if err := s.MarkFetched(h); err != nil {
		t.Fatal(err)
	}
	first, ok := s.FetchedAt(h)
	if !ok {
		t.Fatal("no mark")
	}
	time.Sleep(20 * time.Millisecond)
	s.MarkFetched(h)
	if again, _ := s.FetchedAt(h); !again.Equal(first) {
		t.Fatal("a second fetch moved the mark")
	}
	if err := s.Delete(h); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.FetchedAt(h); ok {
		t.Fatal("the mark outlived the blob")
	}
}
