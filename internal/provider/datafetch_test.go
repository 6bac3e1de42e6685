package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/clock/clocktest"
	"github.com/gpunet/gpunet/internal/egress"
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

// loopbackAllowed is the allow-list under which tests fetch from their
// own loopback servers.
var loopbackAllowed = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// TestFetchURLInput: a URL input is fetched (from a network the provider
// allows: the test server is on loopback), checked against its hash and
// placed at its path; a mismatch, an oversized body or a server error
// leaves nothing there, says why in the log, and on chain says only which
// input and a fixed phrase: no hash, status, address or byte count.
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
	hc := newURLClient(loopbackAllowed)
	root := t.TempDir()
	ctx := t.Context()
	in := ledger.URLInput{Path: "/in/data.csv", URL: srv.URL + "/data.csv", SHA256: ref}
	if err := fetchURLInput(ctx, hc, in, root, 1<<20); err != nil {
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
		public    string // the error's text: what goes on chain
	}{
		{"wrong hash", ledger.URLInput{Path: "/in/a", URL: srv.URL + "/data.csv", SHA256: "sha256:" + strings.Repeat("0", 64)}, 1 << 20, blob.ErrHashMismatch, true, "input /in/a does not hash to its sha256"},
		{"declared size too small", ledger.URLInput{Path: "/in/a", URL: srv.URL + "/data.csv", SHA256: ref, Size: 4}, 1 << 20, blob.ErrTooLarge, true, "input /in/a is larger than the job allows"},
		{"over the disk, chunked", ledger.URLInput{Path: "/in/a", URL: srv.URL + "/chunked", SHA256: ref}, 8, blob.ErrTooLarge, true, "input /in/a is larger than the job allows"},
		{"not there", ledger.URLInput{Path: "/in/a", URL: srv.URL + "/missing", SHA256: ref}, 1 << 20, nil, false, "input /in/a could not be fetched"},
		{"server down", ledger.URLInput{Path: "/in/a", URL: "http://127.0.0.1:1/x", SHA256: ref}, 1 << 20, nil, false, "input /in/a could not be fetched"},
	} {
		err := fetchURLInput(ctx, hc, c.in, root, c.limit)
		var de *dataError
		if err == nil || !errors.As(err, &de) || de.permanent != c.permanent || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v (permanent %v), want %v, permanent %v", c.name, err, de != nil && de.permanent, c.want, c.permanent)
		}
		if err != nil && err.Error() != c.public {
			t.Errorf("%s: the public text is %q, want %q", c.name, err.Error(), c.public)
		}
		if de != nil && !strings.Contains(de.LogValue().String(), c.in.URL) {
			t.Errorf("%s: the log says %q, not which URL", c.name, de.LogValue())
		}
		if _, err := os.Stat(filepath.Join(root, "in", "a")); err == nil {
			t.Errorf("%s: left a file", c.name)
		}
	}
}

// TestFetchURLInputRefusesOwnNetwork (issue 27): a URL input that leads to
// the provider's own network (its loopback, by address, by a name that
// resolves to it, or by a redirect from an address the provider allows)
// is not fetched: the server there sees no request. The failure on chain
// is the one a server that is down gets (same words, same schedule), so
// the ledger does not say the address was refused; the log says why.
// With the network allowed, the same URL is fetched.
func TestFetchURLInputRefusesOwnNetwork(t *testing.T) {
	body := []byte("secret admin page\n")
	sum := sha256.Sum256(body)
	ref := "sha256:" + hex.EncodeToString(sum[:])
	var hits atomic.Int32
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write(body)
	}))
	t.Cleanup(inner.Close)
	port := inner.Listener.Addr().(*net.TCPAddr).Port
	// A "public" server: on 127.0.0.2, which the agent below allows, and
	// which redirects to the inner one (or to itself, for ever).
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address to stand in for a public server: %v", err)
	}
	var loops atomic.Int32
	outer := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/loop" {
			loops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		http.Redirect(w, r, inner.URL+"/data", http.StatusFound)
	})}}
	outer.Start()
	t.Cleanup(outer.Close)
	outerOnly := newURLClient([]netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")})

	root := t.TempDir()
	for _, c := range []struct {
		name string
		hc   *http.Client
		url  string
	}{
		{"loopback address", newURLClient(nil), inner.URL + "/data"},
		{"name of loopback", newURLClient(nil), fmt.Sprintf("http://localhost:%d/data", port)},
		{"IPv6 loopback", newURLClient(nil), fmt.Sprintf("http://[::1]:%d/data", port)},
		{"redirect to loopback", outerOnly, outer.URL + "/public.csv"},
	} {
		in := ledger.URLInput{Path: "/in/a", URL: c.url, SHA256: ref}
		err := fetchURLInput(t.Context(), c.hc, in, root, 1<<20)
		var de *dataError
		if !errors.As(err, &de) || de.permanent {
			t.Errorf("%s: %v, want a failure to fetch that retrying might mend", c.name, err)
			continue
		}
		if !errors.Is(err, egress.ErrRefused) {
			t.Errorf("%s: %v, want the address refused", c.name, de.LogValue())
		}
		if got, want := err.Error(), "input /in/a could not be fetched"; got != want {
			t.Errorf("%s: on chain %q, want %q", c.name, got, want)
		}
		if _, err := os.Stat(filepath.Join(root, "in", "a")); err == nil {
			t.Errorf("%s: placed the file", c.name)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server on loopback got %d requests", n)
	}

	// Redirects are bounded.
	err = fetchURLInput(t.Context(), outerOnly, ledger.URLInput{Path: "/in/a", URL: outer.URL + "/loop", SHA256: ref}, root, 1<<20)
	if err == nil || loops.Load() != urlRedirects {
		t.Errorf("a redirect loop: %v after %d requests, want a failure after %d", err, loops.Load(), urlRedirects)
	}

	// The provider allows its loopback: the same URLs are fetched.
	for _, u := range []string{inner.URL + "/data", fmt.Sprintf("http://localhost:%d/data", port)} {
		if err := fetchURLInput(t.Context(), newURLClient(loopbackAllowed), ledger.URLInput{Path: "/in/b", URL: u, SHA256: ref}, root, 1<<20); err != nil {
			t.Fatalf("%s with 127.0.0.0/8 allowed: %v", u, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(root, "in", "b")); err != nil || string(got) != string(body) {
		t.Fatalf("placed %q, %v", got, err)
	}
	if hits.Load() != 2 {
		t.Errorf("the server got %d requests, want 2", hits.Load())
	}
}

// TestDataErrorLogsDetail: the agent's log shows a URL input's whole
// failure (address, status, hashes), which the chain never sees; a
// changed detail is logged again.
func TestDataErrorLogsDetail(t *testing.T) {
	err := error(&dataError{err: errors.New("input /in/a could not be fetched"), detail: errors.New("from http://10.0.0.5/x: address 10.0.0.5 refused: it is private, not a public address")})
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Warn("cannot get the job's data", "err", err)
	if !strings.Contains(buf.String(), "10.0.0.5 refused") {
		t.Errorf("logged %q, without the detail", buf.String())
	}
	if strings.Contains(err.Error(), "10.0.0.5") {
		t.Errorf("the public text %q has the detail", err.Error())
	}
	var f fetchFailures
	now := time.Unix(1_700_000_000, 0)
	f.failed(1, 1, now, err)
	other := &dataError{err: errors.New("input /in/a could not be fetched"), detail: errors.New("from http://example.com/x: the server answered 404 Not Found")}
	if logIt, _, _ := f.failed(1, 1, now, other); !logIt {
		t.Error("a new detail behind the same public text was not logged")
	}
}
