package oci_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gpunet/gpunet/internal/egress"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

func testImage(t *testing.T, files map[string]ocitest.File) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, ocitest.Layer(t, files))
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/bin/app"}
	cf.Config.Env = []string{"A=1"}
	cf.Config.User = "app"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func newStore(t *testing.T, reg oci.RegistryOptions) *oci.Store {
	t.Helper()
	s, err := oci.NewStore(filepath.Join(t.TempDir(), "images"), reg, oci.UnpackLimits{}, oci.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestStorePullAndCache: an image pulled by digest is unpacked with its
// config, and the second Get is served from the cache without the
// registry.
func TestStorePullAndCache(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	reg := ocitest.Registry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			requests++
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	})
	ref := ocitest.Push(t, reg, "a/b", testImage(t, map[string]ocitest.File{"bin/app": {Data: []byte("app"), Mode: 0o755}, "etc/x": {Data: []byte("x")}}))
	s := newStore(t, oci.RegistryOptions{})
	img, pull, err := s.Get(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if pull.Cached || img.Layers != 1 || img.CompressedBytes == 0 || img.UnpackedBytes != 4 {
		t.Errorf("pull %+v, image %+v", pull, img)
	}
	if !slices.Equal(img.Config.Entrypoint, []string{"/bin/app"}) || img.Config.User != "app" || !slices.Equal(img.Config.Env, []string{"A=1"}) {
		t.Errorf("config %+v", img.Config)
	}
	if b, err := os.ReadFile(filepath.Join(img.Rootfs, "bin", "app")); err != nil || string(b) != "app" {
		t.Errorf("rootfs bin/app: %q %v", b, err)
	}
	mu.Lock()
	before := requests
	mu.Unlock()
	img2, pull2, err := s.Get(t.Context(), ref)
	if err != nil || !pull2.Cached || img2.Rootfs != img.Rootfs {
		t.Fatalf("second Get: %+v %+v %v", img2, pull2, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if requests != before {
		t.Errorf("the cached Get made %d registry requests", requests-before)
	}
}

// TestStoreConcurrentGets share one pull.
func TestStoreConcurrentGets(t *testing.T) {
	var mu sync.Mutex
	blobGets := 0
	reg := ocitest.Registry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
				mu.Lock()
				blobGets++
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	ref := ocitest.Push(t, reg, "a/b", testImage(t, map[string]ocitest.File{"f": {Data: bytes.Repeat([]byte("x"), 1<<16)}}))
	s := newStore(t, oci.RegistryOptions{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, _, err := s.Get(t.Context(), ref); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if blobGets != 2 { // the config and the one layer
		t.Errorf("%d blob downloads for 8 concurrent Gets, want 2", blobGets)
	}
}

// TestStoreRefusesTamperedLayer: a registry that serves other bytes than
// the manifest pins fails the pull as a digest mismatch, and nothing is
// cached.
func TestStoreRefusesTamperedLayer(t *testing.T) {
	img := testImage(t, map[string]ocitest.File{"bin/app": {Data: []byte("the real program")}})
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	// The same length as the real blob, one byte changed.
	evilBytes := func() []byte {
		rc, _ := layers[0].Compressed()
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		b[len(b)/2] ^= 0xff
		return b
	}()
	tamper := false
	reg := ocitest.Registry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tamper && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+ld.String()) {
				w.Header().Set("Content-Length", fmt.Sprint(len(evilBytes)))
				w.Write(evilBytes)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ref := ocitest.Push(t, reg, "a/b", img)
	tamper = true
	s := newStore(t, oci.RegistryOptions{})
	_, _, err := s.Get(t.Context(), ref)
	var pe *oci.PullError
	if !errors.As(err, &pe) || pe.Cause != oci.PullDigestMismatch {
		t.Fatalf("pull of a tampered layer: %v, want %q", err, oci.PullDigestMismatch)
	}
	t.Logf("tampered layer: %v", pe.Err)
	if _, ok := s.Lookup(ref); ok {
		t.Error("the tampered image is in the cache")
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp")); len(ents) != 0 {
		t.Errorf("scratch left: %v", ents)
	}
	// A digest the registry does not have for this repository.
	bad := ref[:strings.LastIndex(ref, "@")] + "@sha256:" + strings.Repeat("0", 64)
	if _, _, err := s.Get(t.Context(), bad); !errors.As(err, &pe) || pe.Cause != oci.PullNotFound {
		t.Errorf("pull of an unknown digest: %v, want %q", err, oci.PullNotFound)
	}
}

// TestStorePicksPlatform: from a multi-platform index, the image for this
// machine is pulled; Resolve lists the platforms.
func TestStorePicksPlatform(t *testing.T) {
	ours := testImage(t, map[string]ocitest.File{"which": {Data: []byte("ours")}})
	other, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "s390x"}}},
		mutate.IndexAddendum{Add: ours, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	reg := ocitest.Registry(t, nil)
	ref, err := ocitest.PushIndex(reg, "multi/arch", idx)
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, oci.RegistryOptions{})
	img, _, err := s.Get(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(img.Rootfs, "which")); string(b) != "ours" {
		t.Errorf("pulled %q, want ours", b)
	}
	res, err := oci.Resolve(t.Context(), reg+"/multi/arch:latest", oci.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ref != ref || len(res.Platforms) != 2 || !strings.Contains(res.MediaType, "index") {
		t.Errorf("Resolve = %+v, want %s and two platforms", res, ref)
	}
	// No image for this platform.
	s2 := newStore(t, oci.RegistryOptions{Platform: &v1.Platform{OS: "linux", Architecture: "riscv64"}})
	var pe *oci.PullError
	if _, _, err := s2.Get(t.Context(), ref); !errors.As(err, &pe) || pe.Cause != oci.PullWrongPlatform || !strings.Contains(pe.Err.Error(), "linux/riscv64") {
		t.Errorf("pull for a missing platform: %v, want %q, saying linux/riscv64 in its detail", err, oci.PullWrongPlatform)
	}
}

// recorder is a transport that records and refuses every request.
type recorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.Scheme+"://"+req.URL.Host)
	r.mu.Unlock()
	return nil, errors.New("no network in this test")
}

// TestPlainHTTPOnlyOnLoopback: a registry on a private address is only
// ever contacted over HTTPS (the registry client alone would also try
// plain HTTP there); loopback may use plain HTTP.
func TestPlainHTTPOnlyOnLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:5000": true, "localhost:5000": true, "[::1]:5000": true, "127.1.2.3": true, "localhost": true,
		"10.0.0.5:5000": false, "192.168.1.2:5000": false, "registry.local:5000": false, "ghcr.io": false, "localhost.evil.com": false,
	} {
		if got := oci.PlainHTTPAllowed(host); got != want {
			t.Errorf("PlainHTTPAllowed(%q) = %v, want %v", host, got, want)
		}
	}
	rec := &recorder{}
	_, err := oci.Resolve(t.Context(), "10.9.8.7:5000/a/b:1", oci.RegistryOptions{Transport: rec})
	if err == nil {
		t.Fatal("resolved through a refusing transport")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, u := range rec.urls {
		if !strings.HasPrefix(u, "https://") {
			t.Errorf("plain HTTP request to %s reached the transport", u)
		}
	}
	if len(rec.urls) == 0 {
		t.Error("no HTTPS attempt either")
	}
}

// TestRegistryAuth: credentials come from Docker's config
// ($DOCKER_CONFIG/config.json); without them the registry's refusal is
// reported.
func TestRegistryAuth(t *testing.T) {
	reg := ocitest.Registry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	img := testImage(t, map[string]ocitest.File{"f": {Data: []byte("x")}})
	ref, err := ocitest.PushImageAuth(reg, "private/app", img, &authn.Basic{Username: "alice", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := t.TempDir()
	t.Setenv("DOCKER_CONFIG", cfg)
	var pe *oci.PullError
	if _, _, err := newStore(t, oci.RegistryOptions{}).Get(t.Context(), ref); !errors.As(err, &pe) || pe.Cause != oci.PullUnauthorized {
		t.Fatalf("pull without credentials: %v, want %q", err, oci.PullUnauthorized)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"auths":{"`+reg+`":{"auth":"`+auth+`"}}}`), 0o600)
	if _, _, err := newStore(t, oci.RegistryOptions{}).Get(t.Context(), ref); err != nil {
		t.Fatalf("pull with credentials in $DOCKER_CONFIG: %v", err)
	}
	// A provider pulls a stranger's image (Egress set): never on its
	// operator's credentials, or a job could name the operator's private
	// image and read it out through its outputs.
	policy := &egress.Policy{AllowEndpoints: []netip.AddrPort{netip.MustParseAddrPort(reg)}}
	if _, _, err := newStore(t, oci.RegistryOptions{Egress: policy}).Get(t.Context(), ref); !errors.As(err, &pe) || pe.Cause != oci.PullUnauthorized {
		t.Fatalf("a provider's pull of a private image with its operator's credentials in $DOCKER_CONFIG: %v, want %q", err, oci.PullUnauthorized)
	}
}

func TestParseRef(t *testing.T) {
	d := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		ref  string
		want string // "" for valid, else a substring of the error
	}{
		{"127.0.0.1:5000/tools/wc@sha256:" + d, ""},
		{"ghcr.io/acme/trainer:1.4@sha256:" + d, ""},
		{"alpine@sha256:" + d, ""},
		{"", "empty"},
		{"alpine:3.20", "not pinned by digest"},
		{"alpine@sha256:abc", "64 lower-case hex"},
		{"alpine@sha256:" + strings.ToUpper(d), "64 lower-case hex"},
		{"alpine@sha512:" + d + d, "sha256"},
		{"Alpine@sha256:" + d, "invalid image reference"},
	} {
		_, err := oci.ParseRef(tc.ref)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ParseRef(%q) = %v", tc.ref, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, oci.ErrBadRef)):
			t.Errorf("ParseRef(%q) = %v, want an ErrBadRef containing %q", tc.ref, err, tc.want)
		}
	}
}
