package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func newStore(t *testing.T, max int64) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "data", "blobs"), max)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// assertNoTemps fails if an upload left anything in tmp/.
func assertNoTemps(t *testing.T, s *Store) {
	t.Helper()
	entries, err := os.ReadDir(s.tmpDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("temporary file left behind: %s", e.Name())
	}
}

func assertUsage(t *testing.T, s *Store, wantBlobs int, wantBytes int64) {
	t.Helper()
	blobs, n, err := s.Usage()
	if err != nil || blobs != wantBlobs || n != wantBytes {
		t.Errorf("Usage() = %d, %d, %v; want %d, %d, nil", blobs, n, err, wantBlobs, wantBytes)
	}
}

func TestStoreRoundTrip(t *testing.T) {
	s := newStore(t, 1<<20)
	data := []byte("hello, blob")
	h, n, err := s.Put(t.Context(), bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	if h != Sum(data) || n != int64(len(data)) {
		t.Errorf("Put = %v, %d; want %v, %d", h, n, Sum(data), len(data))
	}
	x := h.Hex()
	if _, err := os.Stat(filepath.Join(s.Dir(), "objects", x[:2], x)); err != nil {
		t.Errorf("object not at objects/%s/%s: %v", x[:2], x, err)
	}
	if size, err := s.Stat(h); err != nil || size != n {
		t.Errorf("Stat = %d, %v; want %d, nil", size, err, n)
	}
	rc, size, err := s.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) || size != n {
		t.Errorf("Open: read %q (size %d), %v; want %q", got, size, err, data)
	}
	assertUsage(t, s, 1, n)
	assertNoTemps(t, s)

	// Empty blobs are blobs too.
	if h0, n0, err := s.Put(t.Context(), strings.NewReader(""), nil); err != nil || h0 != Sum(nil) || n0 != 0 {
		t.Errorf("Put(empty) = %v, %d, %v", h0, n0, err)
	}
	assertUsage(t, s, 2, n)

	if err := s.Delete(h); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(h); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat after Delete: %v, want ErrNotFound", err)
	}
	if _, _, err := s.Open(h); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(h); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	assertUsage(t, s, 1, 0)
}

func TestStorePutIdempotent(t *testing.T) {
	s := newStore(t, 1<<20)
	data := []byte("same bytes")
	h, _, created, err := s.put(t.Context(), bytes.NewReader(data), nil, s.maxSize)
	if err != nil || !created {
		t.Fatalf("first put: created=%v, %v", created, err)
	}
	info1, _ := os.Stat(s.path(h))
	h2, _, created, err := s.put(t.Context(), bytes.NewReader(data), &h, s.maxSize)
	if err != nil || created || h2 != h {
		t.Fatalf("second put: %v created=%v, %v; want %v, false, nil", h2, created, err, h)
	}
	info2, _ := os.Stat(s.path(h))
	if !os.SameFile(info1, info2) {
		t.Error("second put replaced the stored object")
	}
	assertUsage(t, s, 1, int64(len(data)))
	assertNoTemps(t, s)
}

func TestStorePutReplacesWrongSizeCopy(t *testing.T) {
	s := newStore(t, 1<<20)
	data := []byte("the real content")
	h, _, _ := s.Put(t.Context(), bytes.NewReader(data), nil)
	if err := os.WriteFile(s.path(h), data[:3], 0o600); err != nil { // truncated on disk
		t.Fatal(err)
	}
	if _, _, created, err := s.put(t.Context(), bytes.NewReader(data), nil, s.maxSize); err != nil || !created {
		t.Fatalf("put over a truncated copy: created=%v, %v; want it replaced", created, err)
	}
	if got, _ := os.ReadFile(s.path(h)); !bytes.Equal(got, data) {
		t.Errorf("object = %q, want %q", got, data)
	}
}

func TestStorePutTooLarge(t *testing.T) {
	const max = 1000
	s := newStore(t, max)
	if _, _, err := s.Put(t.Context(), bytes.NewReader(make([]byte, max)), nil); err != nil {
		t.Fatalf("a blob of exactly the limit: %v", err)
	}
	_, _, err := s.Put(t.Context(), bytes.NewReader(make([]byte, max+1)), nil)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("Put(limit+1) = %v; want ErrTooLarge naming the limit", err)
	}
	assertUsage(t, s, 1, max)
	assertNoTemps(t, s)
}

func TestStorePutHashMismatch(t *testing.T) {
	s := newStore(t, 1<<20)
	want := Sum([]byte("expected"))
	_, _, err := s.Put(t.Context(), strings.NewReader("something else"), &want)
	if !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("Put = %v; want ErrHashMismatch", err)
	}
	assertUsage(t, s, 0, 0)
	assertNoTemps(t, s)
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("connection reset")
	}
	r.n--
	return copy(p, "partial"), nil
}

func TestStorePutReaderFails(t *testing.T) {
	s := newStore(t, 1<<20)
	_, _, err := s.Put(t.Context(), &failingReader{n: 3}, nil)
	var rerr *readError
	if !errors.As(err, &rerr) {
		t.Fatalf("Put = %v; want a read error", err)
	}
	assertUsage(t, s, 0, 0)
	assertNoTemps(t, s)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.Put(ctx, strings.NewReader("x"), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with cancelled context = %v", err)
	}
	assertNoTemps(t, s)
}

func TestStoreConcurrentPutsOfOneBlob(t *testing.T) {
	s := newStore(t, 1<<24)
	data := bytes.Repeat([]byte("concurrent "), 100_000)
	want := Sum(data)
	const n = 8
	var wg sync.WaitGroup
	created := make(chan bool, n)
	for range n {
		wg.Go(func() {
			h, size, c, err := s.put(t.Context(), bytes.NewReader(data), nil, s.maxSize)
			if err != nil || h != want || size != int64(len(data)) {
				t.Errorf("put = %v, %d, %v", h, size, err)
			}
			created <- c
		})
	}
	wg.Wait()
	close(created)
	var nCreated int
	for c := range created {
		if c {
			nCreated++
		}
	}
	if nCreated != 1 {
		t.Errorf("%d puts reported creating the blob, want exactly 1", nCreated)
	}
	assertUsage(t, s, 1, int64(len(data)))
	assertNoTemps(t, s)
}

func TestOpenStoreRemovesStaleTemps(t *testing.T) {
	s := newStore(t, 10)
	stale := filepath.Join(s.tmpDir(), "put-stale")
	fresh := filepath.Join(s.tmpDir(), "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleTempAge)
	os.Chtimes(stale, old, old)
	if _, err := OpenStore(s.Dir(), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temp file survived: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temp file (maybe an upload in progress) was removed: %v", err)
	}
}

func TestOpenStoreRejectsBadLimit(t *testing.T) {
	if _, err := OpenStore(t.TempDir(), 0); err == nil || !strings.Contains(err.Error(), "positive") {
		t.Errorf("OpenStore(max 0) = %v; want an error saying it must be positive", err)
	}
}
