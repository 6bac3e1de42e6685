package blob

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// newGateway serves a fresh store the way a node mounts it.
func newGateway(t *testing.T, max int64) (*Store, *Client, *httptest.Server) {
	t.Helper()
	s := newStore(t, max)
	h := NewHandler(s, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	mux := http.NewServeMux()
	mux.Handle("/v1/blobs", h)
	mux.Handle("/v1/blobs/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return s, NewClient(srv.URL + "/"), srv
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func do(t *testing.T, method, url string, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// errorBody decodes a JSON error and checks its shape.
func errorBody(t *testing.T, resp *http.Response, b []byte) string {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	var e struct{ Code, Message string }
	if err := json.Unmarshal(b, &e); err != nil || e.Message == "" || errorCodes[resp.StatusCode] != e.Code {
		t.Errorf("error body %q of status %d is not {\"code\": %q, \"message\": ...}", b, resp.StatusCode, errorCodes[resp.StatusCode])
	}
	return e.Message
}

func TestGatewayRoundTrip(t *testing.T) {
	s, c, srv := newGateway(t, 1<<20)
	data := []byte("round trip through the gateway")

	resp, b := do(t, "PUT", srv.URL+"/v1/blobs", bytes.NewReader(data))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("first PUT: %s %s; want 201", resp.Status, b)
	}
	var pr PutResponse
	if err := json.Unmarshal(b, &pr); err != nil || pr.Hash != Sum(data) || pr.Size != int64(len(data)) {
		t.Fatalf("PUT body %s: %+v, %v", b, pr, err)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/blobs/"+pr.Hash.String() {
		t.Errorf("Location = %q", loc)
	}
	if resp, b := do(t, "PUT", srv.URL+"/v1/blobs", bytes.NewReader(data)); resp.StatusCode != http.StatusOK {
		t.Errorf("second PUT: %s %s; want 200", resp.Status, b)
	}
	if resp, b := do(t, "PUT", srv.URL+"/v1/blobs/"+pr.Hash.String(), bytes.NewReader(data)); resp.StatusCode != http.StatusOK {
		t.Errorf("PUT with the right hash: %s %s; want 200", resp.Status, b)
	}

	resp, b = do(t, "GET", srv.URL+"/v1/blobs/"+pr.Hash.String(), nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, data) {
		t.Fatalf("GET: %s %q", resp.Status, b)
	}
	for k, want := range map[string]string{
		"Content-Length":   fmt.Sprint(len(data)),
		"ETag":             `"` + pr.Hash.String() + `"`,
		"X-Content-SHA256": pr.Hash.Hex(),
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("GET %s = %q, want %q", k, got, want)
		}
	}

	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/blobs/"+pr.Hash.String(), nil)
	req.Header.Set("If-None-Match", `"`+pr.Hash.String()+`"`)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotModified {
		t.Errorf("conditional GET: %v, %v; want 304", resp.Status, err)
	}

	resp, b = do(t, "HEAD", srv.URL+"/v1/blobs/"+pr.Hash.String(), nil)
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(data)) || len(b) != 0 {
		t.Errorf("HEAD: %s, length %d, body %q", resp.Status, resp.ContentLength, b)
	}

	// The client, both ways, with and without a known length.
	h, n, err := c.Put(t.Context(), strings.NewReader("via the client"))
	if err != nil || h != Sum([]byte("via the client")) || n != 14 {
		t.Fatalf("Client.Put = %v, %d, %v", h, n, err)
	}
	path := filepath.Join(t.TempDir(), "f")
	os.WriteFile(path, data, 0o600)
	if h, n, err := c.PutFile(t.Context(), path); err != nil || h != pr.Hash || n != int64(len(data)) {
		t.Fatalf("Client.PutFile = %v, %d, %v", h, n, err)
	}
	var buf bytes.Buffer
	if n, err := c.Get(t.Context(), pr.Hash, &buf); err != nil || n != int64(len(data)) || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("Client.Get = %d, %v, %q", n, err, buf.Bytes())
	}
	if size, err := c.Stat(t.Context(), h); err != nil || size != 14 {
		t.Errorf("Client.Stat = %d, %v", size, err)
	}
	assertUsage(t, s, 2, int64(len(data))+14)
}

func TestGatewayErrors(t *testing.T) {
	const max = 4096
	s, c, srv := newGateway(t, max)
	missing := Sum([]byte("never stored"))
	tests := []struct {
		name, method, path string
		body               io.Reader
		status             int
		msg                string // substring of the JSON error
	}{
		{"get bad hash", "GET", "/v1/blobs/sha256:nothex", nil, 400, "invalid blob hash"},
		{"get bare hex", "GET", "/v1/blobs/" + missing.Hex(), nil, 400, `want "sha256:"`},
		{"get upper-case", "GET", "/v1/blobs/sha256:" + strings.ToUpper(missing.Hex()), nil, 400, "lowercase"},
		{"put bad hash", "PUT", "/v1/blobs/md5:abc", strings.NewReader("x"), 400, "invalid blob hash"},
		{"get missing", "GET", "/v1/blobs/" + missing.String(), nil, 404, "not found"},
		{"put wrong hash", "PUT", "/v1/blobs/" + missing.String(), strings.NewReader("other bytes"), 422, "hash mismatch"},
		{"put too large, declared", "PUT", "/v1/blobs", bytes.NewReader(make([]byte, max+1)), 413, "4096"},
		{"put too large, chunked", "PUT", "/v1/blobs", io.MultiReader(bytes.NewReader(make([]byte, max+1))), 413, "4096"},
		{"put too large, with hash", "PUT", "/v1/blobs/" + missing.String(), io.MultiReader(bytes.NewReader(make([]byte, 3*max))), 413, "4096"},
		{"post", "POST", "/v1/blobs", strings.NewReader("x"), 405, "not allowed"},
		{"delete", "DELETE", "/v1/blobs/" + missing.String(), nil, 405, "not allowed"},
		{"deeper path", "GET", "/v1/blobs/a/b", nil, 404, "no such endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, tt.method, srv.URL+tt.path, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %s = %s %s; want %d", tt.method, tt.path, resp.Status, b, tt.status)
			}
			if msg := errorBody(t, resp, b); !strings.Contains(msg, tt.msg) {
				t.Errorf("error %q does not mention %q", msg, tt.msg)
			}
		})
	}
	assertUsage(t, s, 0, 0)
	assertNoTemps(t, s)

	// The client maps statuses back to the store's errors.
	if _, err := c.Get(t.Context(), missing, io.Discard); !errors.Is(err, ErrNotFound) {
		t.Errorf("Client.Get(missing) = %v; want ErrNotFound", err)
	}
	if _, err := c.Stat(t.Context(), missing); !errors.Is(err, ErrNotFound) {
		t.Errorf("Client.Stat(missing) = %v; want ErrNotFound", err)
	}
	if _, _, err := c.Put(t.Context(), bytes.NewReader(make([]byte, max+1))); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "4096") {
		t.Errorf("Client.Put(too large) = %v; want ErrTooLarge naming the limit", err)
	}
	big := filepath.Join(t.TempDir(), "big")
	os.WriteFile(big, make([]byte, max+1), 0o600)
	if _, _, err := c.PutFile(t.Context(), big); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Client.PutFile(too large) = %v; want ErrTooLarge", err)
	}
	assertUsage(t, s, 0, 0)
	assertNoTemps(t, s)
}

// corruptObject stores data and flips one byte of the object on disk.
func corruptObject(t *testing.T, s *Store, data []byte, at int) Hash {
	t.Helper()
	h, _, err := s.Put(t.Context(), bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(s.path(h), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{data[at] ^ 0x01}
	if _, err := f.WriteAt(b, int64(at)); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestGatewayNeverServesCorruptBlob(t *testing.T) {
	for _, tt := range []struct {
		name     string
		size, at int
	}{
		{"small, first byte", 1000, 0},
		{"large, first byte", 3 << 20, 0},
		{"large, middle", 3 << 20, 3 << 19},
		{"large, last byte", 3 << 20, 3<<20 - 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, c, srv := newGateway(t, 16<<20)
			data := bytes.Repeat([]byte("0123456789abcdef"), tt.size/16)
			h := corruptObject(t, s, data, tt.at)

			// A plain HTTP client that checks nothing still never
			// receives a complete response.
			resp, err := http.Get(srv.URL + "/v1/blobs/" + h.String())
			if err == nil {
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr == nil {
					t.Fatalf("GET of a corrupt blob completed: %s, %d bytes", resp.Status, len(b))
				}
				if len(b) >= len(data) {
					t.Errorf("GET sent all %d bytes before aborting", len(b))
				}
			}

			// The corrupt copy was moved aside, so it is gone and a good
			// copy can be put again.
			if _, err := c.Get(t.Context(), h, io.Discard); !errors.Is(err, ErrNotFound) {
				t.Errorf("Client.Get after the abort = %v; want ErrNotFound (quarantined)", err)
			}
			if matches, _ := filepath.Glob(filepath.Join(s.Dir(), "corrupt", h.Hex()+".*")); len(matches) != 1 {
				t.Errorf("quarantined copies: %v, want 1", matches)
			}
			if _, _, err := c.Put(t.Context(), bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := c.Get(t.Context(), h, &buf); err != nil || !bytes.Equal(buf.Bytes(), data) {
				t.Errorf("Get after re-upload: %v", err)
			}
		})
	}

	// And through the client, which reports the cut as an error.
	s, c, _ := newGateway(t, 16<<20)
	data := bytes.Repeat([]byte{7}, 1<<20)
	h := corruptObject(t, s, data, 12345)
	if _, err := c.Get(t.Context(), h, io.Discard); err == nil {
		t.Fatal("Client.Get of a corrupt blob succeeded")
	} else {
		t.Logf("Client.Get of a corrupt blob: %v", err)
	}
}

// A gateway that lies (or a corrupting proxy) is caught by the client.
func TestClientDetectsWrongBytes(t *testing.T) {
	good := []byte("the bytes that were asked for")
	h := Sum(good)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "GET":
			w.Write([]byte("the bytes that were not asked for"))
		case "PUT":
			io.Copy(io.Discard, r.Body)
			json.NewEncoder(w).Encode(PutResponse{Hash: h, Size: int64(len(good))})
		}
	}))
	defer srv.Close()
	c := NewClient(srv.URL)
	if _, err := c.Get(t.Context(), h, io.Discard); !errors.Is(err, ErrHashMismatch) {
		t.Errorf("Get from a lying gateway = %v; want ErrHashMismatch", err)
	}
	if _, _, err := c.Put(t.Context(), strings.NewReader("different upload")); !errors.Is(err, ErrHashMismatch) {
		t.Errorf("Put to a lying gateway = %v; want ErrHashMismatch", err)
	}
}

func TestGatewayConcurrentPuts(t *testing.T) {
	s, c, srv := newGateway(t, 1<<24)
	data := bytes.Repeat([]byte("same blob from many clients "), 50_000)
	const n = 8
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for range n {
		wg.Go(func() {
			resp, b := do(t, "PUT", srv.URL+"/v1/blobs", io.MultiReader(bytes.NewReader(data)))
			statuses <- resp.StatusCode
			if resp.StatusCode != 200 && resp.StatusCode != 201 {
				t.Errorf("PUT: %s %s", resp.Status, b)
			}
		})
	}
	wg.Wait()
	close(statuses)
	created := 0
	for st := range statuses {
		if st == http.StatusCreated {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d PUTs answered 201, want exactly 1", created)
	}
	assertUsage(t, s, 1, int64(len(data)))
	assertNoTemps(t, s)
	var buf bytes.Buffer
	if _, err := c.Get(t.Context(), Sum(data), &buf); err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Errorf("Get: %v", err)
	}
}

// A client sending far more than the limit gets the 413, not a broken pipe.
func TestClientPutFarOverLimit(t *testing.T) {
	s, c, _ := newGateway(t, 4096)
	big := bytes.Repeat([]byte{1}, 64<<20)
	if _, _, err := c.Put(t.Context(), bytes.NewReader(big)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Put(64 MiB) = %v; want ErrTooLarge", err)
	}
	path := filepath.Join(t.TempDir(), "big")
	os.WriteFile(path, big, 0o600)
	if _, _, err := c.PutFile(t.Context(), path); !errors.Is(err, ErrTooLarge) {
		t.Errorf("PutFile(64 MiB) = %v; want ErrTooLarge", err)
	}
	assertUsage(t, s, 0, 0)
	assertNoTemps(t, s)
}

func TestDiskFullIsReported(t *testing.T) {
	err := storageError("writing temporary file", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC})
	if !errors.Is(err, ErrNoSpace) {
		t.Errorf("storageError(ENOSPC) = %v; want ErrNoSpace", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusInsufficientStorage, "blob store: writing temporary file: no space left for blob")
	}))
	defer srv.Close()
	if _, _, err := NewClient(srv.URL).Put(t.Context(), bytes.NewReader([]byte("x"))); !errors.Is(err, ErrNoSpace) {
		t.Errorf("Put against a full gateway = %v; want ErrNoSpace", err)
	}
}
