// Package ocitest helps tests of container jobs: it builds images from
// static Go programs, serves them from a registry on loopback, and decides
// whether a test that needs runc may run. It is test code (it imports
// testing and httptest): no binary may link it (internal/archtest checks),
// and what a binary needs of it lives in ocilayer.
package ocitest

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocilayer"
)

// RequireRunc skips the test when this machine cannot run containers,
// saying why, unless CI=true, where it fails it: CI installs runc, so a
// missing runc there is a broken setup, not a reason to skip.
func RequireRunc(t testing.TB, caps *oci.Capabilities, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("this machine cannot run containers: %v (install runc: apt-get install runc)", err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Registry serves an in-memory OCI registry on 127.0.0.1 until the test
// ends and returns its host:port. wrap, if not nil, wraps its handler
// (to tamper with blobs, require auth, count requests).
func Registry(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(nopLogger()))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Counted is a registry served by CountingRegistry.
type Counted struct {
	// Host is its host:port.
	Host  string
	conns atomic.Int64
}

// Conns is the number of TCP connections it accepted so far.
func (c *Counted) Conns() int64 { return c.conns.Load() }

// CountingRegistry is Registry on addr (e.g. "127.0.0.1:0"), counting the
// connections it accepts: a client refused before it dials leaves the
// count at 0, whatever it would have sent.
func CountingRegistry(t testing.TB, addr string, wrap func(http.Handler) http.Handler) *Counted {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(nopLogger()))
	if wrap != nil {
		h = wrap(h)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &Counted{Host: l.Addr().String()}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.conns.Add(1)
		}
	}}}
	srv.Start()
	t.Cleanup(srv.Close)
	return c
}

// BuildGo builds the Go program in dir as a static Linux binary for this
// machine's architecture (CGO_ENABLED=0) and returns it. On a machine
// without a Go toolchain (a GPU host test binaries are copied to), set
// OCITEST_PROGRAM to the program built elsewhere.
func BuildGo(t testing.TB, dir string) []byte {
	t.Helper()
	if p := os.Getenv("OCITEST_PROGRAM"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("OCITEST_PROGRAM: %v", err)
		}
		return b
	}
	out := filepath.Join(t.TempDir(), "prog")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// File is a file of a test layer.
type File = ocilayer.File

// Layer makes an uncompressed tar of files (path → file), with their
// parent directories, as a gzip-compressed image layer (ocilayer.Layer).
func Layer(t testing.TB, files map[string]File) v1.Layer {
	t.Helper()
	l, err := ocilayer.Layer(files)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ProgramImage is an image whose one layer holds prog at /job (its
// entrypoint), an /etc/passwd, and the empty directories /app and /data
// (/app with a file in it), for Linux on this machine's architecture.
func ProgramImage(t testing.TB, prog []byte, cmd ...string) v1.Image {
	t.Helper()
	layer := Layer(t, map[string]File{
		"job":        {Data: prog, Mode: 0o755},
		"etc/passwd": {Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\napp:x:1000:1000::/app:/bin/sh\n")},
		"etc/group":  {Data: []byte("root:x:0:\nnogroup:x:65534:\napp:x:1000:\n")},
		"app/README": {Data: []byte("the image's own /app\n")},
	})
	img, err := ocilayer.Image(layer, runtime.GOARCH, v1.Config{Entrypoint: []string{"/job"}, Cmd: cmd, Env: []string{"PATH=/", "GREETING=from the image"}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Push writes img to the registry at host as repo:latest and returns its
// reference by digest.
func Push(t testing.TB, host, repo string, img v1.Image) string {
	t.Helper()
	ref, err := PushImage(host, repo, img)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// PushImage writes img to the registry at host as repo:latest and returns
// its reference by digest (oci.PushImage).
func PushImage(host, repo string, img v1.Image) (string, error) {
	return oci.PushImage(host, repo, img)
}

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// PushImageAuth is PushImage with credentials.
func PushImageAuth(host, repo string, img v1.Image, auth authn.Authenticator) (string, error) {
	tag, err := name.NewTag(host + "/" + repo + ":latest")
	if err != nil {
		return "", err
	}
	if err := remote.Write(tag, img, remote.WithAuth(auth)); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return host + "/" + repo + "@" + d.String(), nil
}

// PushIndex writes a multi-platform index to the registry at host as
// repo:latest and returns its reference by digest.
func PushIndex(host, repo string, idx v1.ImageIndex) (string, error) {
	tag, err := name.NewTag(host + "/" + repo + ":latest")
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		return "", err
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return host + "/" + repo + "@" + d.String(), nil
}
