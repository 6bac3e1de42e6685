package oci_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpunet/gpunet/internal/egress"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// pullCause pulls ref into a new store with reg and returns why it failed,
// checking that the error says exactly the fixed phrase.
func pullCause(t *testing.T, reg oci.RegistryOptions, limits oci.UnpackLimits, ref string) (oci.PullCause, *oci.PullError) {
	t.Helper()
	s, err := oci.NewStore(t.TempDir(), reg, limits, oci.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, _, err = s.Get(t.Context(), ref)
	var pe *oci.PullError
	if !errors.As(err, &pe) {
		t.Fatalf("pull %s: %v, want a *PullError", ref, err)
	}
	if want := "image " + ref + " could not be pulled: " + string(pe.Cause); err.Error() != want {
		t.Errorf("pull %s: %q, want %q", ref, err.Error(), want)
	}
	return pe.Cause, pe
}

// TestPullStaysOffTheProvidersNetwork (issue 27): with an egress policy, as
// a provider pulls a stranger's image, a registry on this machine's
// loopback, named by address or by name, gets no connection, and the
// failure says it was refused; allowing the address, or that one
// endpoint, lets the image be pulled, and an endpoint allowed does not
// allow another port of its address.
func TestPullStaysOffTheProvidersNetwork(t *testing.T) {
	reg := ocitest.CountingRegistry(t, "127.0.0.1:0", nil)
	ref := ocitest.Push(t, reg.Host, "a/b", testImage(t, map[string]ocitest.File{"bin/app": {Data: []byte("app"), Mode: 0o755}}))
	ap := netip.MustParseAddrPort(reg.Host)
	byName := fmt.Sprintf("localhost:%d", ap.Port()) + strings.TrimPrefix(ref, reg.Host)
	before := reg.Conns()
	for _, p := range []*egress.Policy{
		{},
		{AllowEndpoints: []netip.AddrPort{netip.AddrPortFrom(ap.Addr(), ap.Port()+1)}},
		{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}},
	} {
		for _, r := range []string{ref, byName} {
			if cause, _ := pullCause(t, oci.RegistryOptions{Egress: p}, oci.UnpackLimits{}, r); cause != oci.PullRefused {
				t.Errorf("policy %+v, %s: %s, want %s", p, r, cause, oci.PullRefused)
			}
		}
	}
	if n := reg.Conns() - before; n != 0 {
		t.Fatalf("the registry on the provider's loopback got %d connections", n)
	}
	for _, p := range []*egress.Policy{
		{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		{AllowEndpoints: []netip.AddrPort{ap}},
	} {
		s := newStore(t, oci.RegistryOptions{Egress: p})
		if _, _, err := s.Get(t.Context(), ref); err != nil {
			t.Errorf("policy %+v: %v", p, err)
		}
	}
	if reg.Conns() == before {
		t.Error("the allowed registry got no connection")
	}
}

// TestPullRedirectStaysOffTheProvidersNetwork: a registry the provider
// allows (this one endpoint only) that redirects its blobs to a name on
// the provider's loopback, at another port, gets the pull refused there
// with no connection reaching it. Said on chain: "refused" where the
// address refused is the one the reference names (127.0.0.1), and
// otherwise (::1, if the name resolves to it first) "could not be
// reached", as if the name had been a server that is down.
func TestPullRedirectStaysOffTheProvidersNetwork(t *testing.T) {
	inner := ocitest.CountingRegistry(t, "127.0.0.1:0", nil)
	innerPort := netip.MustParseAddrPort(inner.Host).Port()
	redirect := false
	outer := ocitest.CountingRegistry(t, "127.0.0.1:0", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if redirect && strings.Contains(r.URL.Path, "/blobs/") {
				http.Redirect(w, r, fmt.Sprintf("http://localhost:%d%s", innerPort, r.URL.Path), http.StatusTemporaryRedirect)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ref := ocitest.Push(t, outer.Host, "a/b", testImage(t, map[string]ocitest.File{"f": {Data: []byte("x")}}))
	redirect = true
	p := &egress.Policy{AllowEndpoints: []netip.AddrPort{netip.MustParseAddrPort(outer.Host)}}
	cause, pe := pullCause(t, oci.RegistryOptions{Egress: p}, oci.UnpackLimits{}, ref)
	var re *egress.RefusedError
	switch {
	case !errors.As(pe, &re):
		t.Errorf("redirected pull: %s (%v), want a refusal", cause, pe.Err)
	case re.Addr == netip.MustParseAddr("127.0.0.1") && cause != oci.PullRefused,
		re.Addr != netip.MustParseAddr("127.0.0.1") && cause != oci.PullUnreachable:
		t.Errorf("redirected pull refused at %s: %s", re.Addr, cause)
	}
	if n := inner.Conns(); n != 0 {
		t.Fatalf("the server on the provider's loopback got %d connections", n)
	}
	if outer.Conns() == 0 {
		t.Fatal("the allowed registry got no connection")
	}
}

// TestPullFailureSaysNoRegistryWords (issue 27): whatever a registry
// answers, a failed pull's text is the reference and a fixed cause; the
// registry's words are only in the detail that goes to the provider's
// log.
func TestPullFailureSaysNoRegistryWords(t *testing.T) {
	const secret = "SECRET-only-the-registry-knows-7f3a"
	img := testImage(t, map[string]ocitest.File{"bin/app": {Data: []byte("the real program")}})
	cfgDigest, _ := img.ConfigName()
	for _, c := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request) bool // true: answered
		want   oci.PullCause
	}{
		{"manifest unknown", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":%q,"detail":%q}]}`, secret, secret)
			return true
		}, oci.PullNotFound},
		{"unauthorized", func(w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, secret, http.StatusUnauthorized)
			return true
		}, oci.PullUnauthorized},
		{"denied", func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/v2/" {
				return false
			}
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"errors":[{"code":"DENIED","message":%q}]}`, secret)
			return true
		}, oci.PullUnauthorized},
		{"other status", func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/v2/" {
				return false
			}
			http.Error(w, secret, http.StatusTeapot)
			return true
		}, oci.PullUnreachable},
		{"manifest of other bytes", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				return false
			}
			raw, _ := img.RawManifest()
			mt, _ := img.MediaType()
			w.Header().Set("Content-Type", string(mt))
			w.Write(append(raw, ' '))
			return true
		}, oci.PullDigestMismatch},
		{"config blob unknown", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/blobs/"+cfgDigest.String()) {
				return false
			}
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":%q}]}`, secret)
			return true
		}, oci.PullNotFound},
		{"config of other bytes", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/blobs/"+cfgDigest.String()) {
				return false
			}
			raw, _ := img.RawConfigFile()
			w.Write(bytes.Replace(raw, []byte(`"A=1"`), []byte(`"B=2"`), 1))
			return true
		}, oci.PullDigestMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			on := false
			reg := ocitest.Registry(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if on && r.Method == http.MethodGet && c.answer(w, r) {
						return
					}
					h.ServeHTTP(w, r)
				})
			})
			ref := ocitest.Push(t, reg, "a/b", img)
			on = true
			t.Setenv("DOCKER_CONFIG", t.TempDir())
			cause, pe := pullCause(t, oci.RegistryOptions{}, oci.UnpackLimits{}, ref)
			if cause != c.want {
				t.Errorf("cause %s (%v), want %s", cause, pe.Err, c.want)
			}
			if strings.Contains(pe.Error(), secret) {
				t.Errorf("the failure's text %q carries the registry's words", pe.Error())
			}
			var log bytes.Buffer
			slog.New(slog.NewTextHandler(&log, nil)).Warn("pull", "err", pe)
			if !strings.Contains(c.name, "other bytes") && !strings.Contains(log.String(), secret) {
				t.Errorf("the provider's log has no detail of the registry's answer:\n%s", log.String())
			}
		})
	}
}

// TestPullCausesOfLayers: a layer whose bytes are not the ones its digest
// pins is a digest mismatch, even where they do not unpack; a layer
// pinned as it is but not a valid one is not a valid image; a rootfs past
// the limits is too large; an image for another architecture is not for
// this platform.
func TestPullCausesOfLayers(t *testing.T) {
	img := testImage(t, map[string]ocitest.File{"bin/app": {Data: bytes.Repeat([]byte("the real program "), 64)}})
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	real := func() []byte {
		rc, _ := layers[0].Compressed()
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return b
	}()
	// The same length as the real blob, one byte changed: it no longer
	// decompresses.
	garbled := bytes.Clone(real)
	garbled[len(garbled)/2] ^= 0xff
	// The same length, one byte of the gzip header's OS field changed: it
	// unpacks, to the same files.
	unpacks := bytes.Clone(real)
	unpacks[9] ^= 0x01
	for _, c := range []struct {
		name string
		blob []byte
	}{{"garbled", garbled}, {"unpacks", unpacks}} {
		serve := false
		reg := ocitest.Registry(t, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if serve && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+ld.String()) {
					w.Header().Set("Content-Length", fmt.Sprint(len(c.blob)))
					w.Write(c.blob)
					return
				}
				h.ServeHTTP(w, r)
			})
		})
		ref := ocitest.Push(t, reg, "a/b", img)
		serve = true
		if cause, pe := pullCause(t, oci.RegistryOptions{}, oci.UnpackLimits{}, ref); cause != oci.PullDigestMismatch {
			t.Errorf("%s layer: %s (%v), want %s", c.name, cause, pe.Err, oci.PullDigestMismatch)
		}
	}

	reg := ocitest.Registry(t, nil)
	if cause, pe := pullCause(t, oci.RegistryOptions{}, oci.UnpackLimits{MaxBytes: 100}, ocitest.Push(t, reg, "big/one", img)); cause != oci.PullTooLarge {
		t.Errorf("past the limits: %s (%v), want %s", cause, pe.Err, oci.PullTooLarge)
	}
	hostile := func() v1.Image {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		tw.Write([]byte("x"))
		tw.Close()
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.Bytes())), nil })
		if err != nil {
			t.Fatal(err)
		}
		i, err := mutate.AppendLayers(empty.Image, l)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		i, err = mutate.ConfigFile(i, cf)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}()
	if cause, pe := pullCause(t, oci.RegistryOptions{}, oci.UnpackLimits{}, ocitest.Push(t, reg, "bad/layer", hostile)); cause != oci.PullInvalid {
		t.Errorf("hostile layer: %s (%v), want %s", cause, pe.Err, oci.PullInvalid)
	}
	if cause, pe := pullCause(t, oci.RegistryOptions{Platform: &v1.Platform{OS: "linux", Architecture: "riscv64"}}, oci.UnpackLimits{}, ocitest.Push(t, reg, "a/b", img)); cause != oci.PullWrongPlatform {
		t.Errorf("other architecture: %s (%v), want %s", cause, pe.Err, oci.PullWrongPlatform)
	}
}
