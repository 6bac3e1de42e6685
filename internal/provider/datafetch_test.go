package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/clock/clocktest"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestDataFailureBackoffAndRelease: a job whose data cannot be fetched is
// tried again after a growing, capped wait (not twice a second), its
// reason logged once (again only when it changes), and handed back once
// after releaseAfter; a failure retrying cannot mend is handed back after
// failedPermanently tries. A new placement starts afresh.
func TestDataFailureBackoffAndRelease(t *testing.T) {
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	var f fetchFailures
	missing := &dataError{err: fmt.Errorf("download: %w", blob.ErrNotFound)}
	if !f.ready(1, 10, clk.Now()) {
		t.Fatal("a job that never failed is not ready")
	}
	var waits []time.Duration
	logs, releases := 0, 0
	for i := 0; i < 40 && releases == 0; i++ {
		logIt, next, release := f.failed(1, 10, clk.Now(), missing)
		if logIt {
			logs++
		}
		if release {
			releases++
			break
		}
		waits = append(waits, next.Sub(clk.Now()))
		if f.ready(1, 10, clk.Now()) {
			t.Fatalf("try %d: ready again at once", i)
		}
		clk.Advance(next.Sub(clk.Now()))
		if !f.ready(1, 10, clk.Now()) {
			t.Fatalf("try %d: not ready after its wait", i)
		}
	}
	if logs != 1 {
		t.Errorf("the same reason logged %d times, want once", logs)
	}
	if releases != 1 {
		t.Fatalf("not handed back after %v of failures", clk.Now().Sub(time.Unix(1_700_000_000, 0)))
	}
	if waits[0] != fetchBackoffMin || waits[1] != 2*fetchBackoffMin || waits[len(waits)-1] != fetchBackoffMax {
		t.Errorf("waits %v: want %v doubling up to %v", waits, fetchBackoffMin, fetchBackoffMax)
	}
	if f.ready(1, 10, clk.Now().Add(time.Hour)) {
		t.Error("a handed-back job is tried again")
	}
	if _, _, release := f.failed(1, 10, clk.Now(), missing); release {
		t.Error("handed back twice")
	}
	// Placed again (a new assignment time): a fresh start.
	if !f.ready(1, 11, clk.Now()) {
		t.Error("a new placement waits for the old one's backoff")
	}
	// A changed reason is logged again.
	f.failed(2, 1, clk.Now(), missing)
	if logIt, _, _ := f.failed(2, 1, clk.Now(), &dataError{err: errors.New("other")}); !logIt {
		t.Error("a new reason not logged")
	}
	// Permanent failures: handed back after failedPermanently tries.
	mismatch := &dataError{err: blob.ErrHashMismatch, permanent: true}
	for i := 1; i <= failedPermanently; i++ {
		_, _, release := f.failed(3, 1, clk.Now(), mismatch)
		if release != (i == failedPermanently) {
			t.Fatalf("permanent failure %d: release %v", i, release)
		}
	}
}

// TestFetchURLInput: a URL input is fetched, checked against its hash and
// placed at its path; a mismatch, an oversized body or a server error
// leaves nothing there and says why.
func TestFetchURLInput(t *testing.T) {
	body := []byte("public,data\n1,2\n")
	sum := sha256.Sum256(body)
	ref := "sha256:" + hex.EncodeToString(sum[:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/data.csv":
			w.Write(body)
		case "/chunked":
			w.Write(body[:4])
			w.(http.Flusher).Flush()
			w.Write(body[4:])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	root := t.TempDir()
	ctx := t.Context()
	in := ledger.URLInput{Path: "/in/data.csv", URL: srv.URL + "/data.csv", SHA256: ref}
	if err := fetchURLInput(ctx, srv.Client(), in, root, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "in", "data.csv")); err != nil || string(got) != string(body) {
		t.Fatalf("placed %q, %v", got, err)
	}
	for _, c := range []struct {
		name      string
		in        ledger.URLInput
		limit     int64
		want      error
		permanent bool
	}{
		{"wrong hash", ledger.URLInput{Path: "/in/a", URL: srv.URL + "/data.csv", SHA256: "sha256:" + strings.Repeat("0", 64)}, 1 << 20, blob.ErrHashMismatch, true},
		{"declared size too small", ledger.URLInput{Path: "/in/a", URL: srv.URL + "/data.csv", SHA256: ref, Size: 4}, 1 << 20, blob.ErrTooLarge, true},
		{"over the disk, chunked", ledger.URLInput{Path: "/in/a", URL: srv.URL + "/chunked", SHA256: ref}, 8, blob.ErrTooLarge, true},
		{"not there", ledger.URLInput{Path: "/in/a", URL: srv.URL + "/missing", SHA256: ref}, 1 << 20, nil, false},
		{"server down", ledger.URLInput{Path: "/in/a", URL: "http://127.0.0.1:1/x", SHA256: ref}, 1 << 20, nil, false},
	} {
		err := fetchURLInput(ctx, srv.Client(), c.in, root, c.limit)
		var de *dataError
		if err == nil || !errors.As(err, &de) || de.permanent != c.permanent || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v (permanent %v), want %v, permanent %v", c.name, err, de != nil && de.permanent, c.want, c.permanent)
		}
		if _, err := os.Stat(filepath.Join(root, "in", "a")); err == nil {
			t.Errorf("%s: left a file", c.name)
		}
	}
}
