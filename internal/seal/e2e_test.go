package seal

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/blob"
)

// marker is plaintext that must never reach a gateway's disk.
const marker = "GPUNET-PLAINTEXT-MARKER-5b1e0c9d"

// gateway serves a fresh blob store on loopback.
func gateway(t *testing.T) (*blob.Store, *blob.Client) {
	t.Helper()
	store, err := blob.OpenStore(filepath.Join(t.TempDir(), "data", "blobs"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	h := blob.NewHandler(store, nil)
	mux := http.NewServeMux()
	mux.Handle("/v1/blobs", h)
	mux.Handle("/v1/blobs/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return store, blob.NewClient(srv.URL)
}

// filesContaining lists the files under dir whose bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestGatewayOnlyHoldsCiphertext follows job inputs from the consumer,
// through a real gateway, to a provider: the gateway's disk never holds the
// plaintext, and the provider the key was granted to recovers it exactly.
func TestGatewayOnlyHoldsCiphertext(t *testing.T) {
	// The consumer's inputs: a file and a directory, with the marker in
	// several places (small file, inside a larger one, across chunks).
	src := t.TempDir()
	big := strings.Repeat("filler "+marker+" ", 20_000) // ~0.8 MiB, many age chunks
	os.WriteFile(filepath.Join(src, "input.txt"), []byte(marker), 0o644)
	os.MkdirAll(filepath.Join(src, "data"), 0o755)
	os.WriteFile(filepath.Join(src, "data", "big.txt"), []byte(big), 0o644)

	store, client := gateway(t)
	provider := mustKey(t)

	// Consumer: pack → encrypt → upload, streamed through a pipe.
	jobKey := mustKey(t)
	pr, pw := io.Pipe()
	go func() {
		w, err := Encrypt(pw, jobKey.Recipient())
		if err == nil {
			err = PackFiles(w, map[string]string{
				"/in/input.txt": filepath.Join(src, "input.txt"),
				"/in/data":      filepath.Join(src, "data"),
			})
		}
		if err == nil {
			err = w.Close()
		}
		pw.CloseWithError(err)
	}()
	ref, size, err := client.Put(t.Context(), pr)
	if err != nil {
		t.Fatal(err)
	}
	grant, err := WrapKey(jobKey, provider.Recipient().String())
	if err != nil {
		t.Fatal(err)
	}
	// The grant travels on chain; the gateway could hold it too.
	if _, _, err := client.Put(t.Context(), bytes.NewReader(grant)); err != nil {
		t.Fatal(err)
	}
	t.Logf("uploaded %d bytes of ciphertext as %s", size, ref)

	if hits := filesContaining(t, store.Dir(), marker); len(hits) > 0 {
		t.Fatalf("plaintext marker found on the gateway's disk in %v", hits)
	}
	if n, _, _ := store.Usage(); n != 2 {
		t.Fatalf("store holds %d blobs, want 2 (the scan must have looked at them)", n)
	}

	// Provider: unwrap the grant, download, decrypt, unpack.
	key, err := UnwrapKey(grant, provider)
	if err != nil {
		t.Fatal(err)
	}
	var ct bytes.Buffer
	if _, err := client.Get(t.Context(), ref, &ct); err != nil {
		t.Fatal(err)
	}
	plain, err := Decrypt(&ct, key)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := UnpackDir(plain, work, Limits{MaxBytes: 10 << 20, MaxEntries: 10}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "in", "input.txt")); string(b) != marker {
		t.Errorf("in/input.txt = %q, want the marker", b)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "in", "data", "big.txt")); string(b) != big {
		t.Errorf("in/data/big.txt differs (%d bytes, want %d)", len(b), len(big))
	}

	// The scan does find plaintext when it is there.
	var packed bytes.Buffer
	PackDir(&packed, src)
	if _, _, err := client.Put(t.Context(), &packed); err != nil {
		t.Fatal(err)
	}
	if hits := filesContaining(t, store.Dir(), marker); len(hits) != 1 {
		t.Errorf("after uploading an unencrypted archive the scan found %v; want exactly that blob", hits)
	}
}
