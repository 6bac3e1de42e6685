package oci

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// ErrBadRef is wrapped by the errors ParseRef returns.
var ErrBadRef = errors.New("invalid image reference")

// ParseRef checks an image reference from a job: it must name its image by
// a sha256 digest (registry/repo@sha256:<64 hex>, a tag before the "@"
// allowed and ignored), so that every provider runs the same bytes.
func ParseRef(ref string) (name.Digest, error) {
	if ref == "" {
		return name.Digest{}, fmt.Errorf("%w: empty", ErrBadRef)
	}
	at := strings.LastIndexByte(ref, '@')
	if at < 0 {
		return name.Digest{}, fmt.Errorf("%w: %q is not pinned by digest; write REPO@sha256:<64 hex digits> (`gpunet image digest %s` finds it)", ErrBadRef, clip(ref), clip(ref))
	}
	dg := ref[at+1:]
	if !strings.HasPrefix(dg, "sha256:") || len(dg) != len("sha256:")+64 || strings.ToLower(dg) != dg {
		return name.Digest{}, fmt.Errorf("%w: %q: the digest must be sha256: and 64 lower-case hex digits", ErrBadRef, clip(ref))
	}
	if _, err := hex.DecodeString(dg[len("sha256:"):]); err != nil {
		return name.Digest{}, fmt.Errorf("%w: %q: the digest must be sha256: and 64 lower-case hex digits", ErrBadRef, clip(ref))
	}
	d, err := name.NewDigest(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("%w: %v", ErrBadRef, err)
	}
	return d, nil
}

// PlainHTTPAllowed reports whether a registry host (with or without a port)
// may be reached without TLS: only on loopback, as Docker does.
func PlainHTTPAllowed(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// policyTransport refuses plain HTTP to anything but loopback. The
// registry client itself would also try plain HTTP for private (RFC 1918)
// addresses; this network only allows it where Docker does.
type policyTransport struct{ base http.RoundTripper }

func (t policyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !PlainHTTPAllowed(req.URL.Host) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("refusing plain HTTP to %s: registries are reached over HTTPS, except on 127.0.0.1 or localhost", req.URL.Host)
	}
	return t.base.RoundTrip(req)
}

// RegistryOptions say how registries are reached.
type RegistryOptions struct {
	// Keychain finds credentials for a registry; nil means Docker's
	// config ($DOCKER_CONFIG/config.json or ~/.docker/config.json, with
	// its credential helpers), anonymous where it has none.
	Keychain authn.Keychain
	// Transport is the HTTP transport under the plain-HTTP policy; nil
	// means remote.DefaultTransport.
	Transport http.RoundTripper
	// Platform selects the image from a multi-platform index; nil means
	// linux and this machine's architecture.
	Platform *v1.Platform
}

func (o RegistryOptions) remote(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	base := o.Transport
	if base == nil {
		base = remote.DefaultTransport
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(kc),
		remote.WithTransport(policyTransport{base}),
		remote.WithPlatform(o.platform()),
		remote.WithUserAgent("gpunet"),
	}
}

func (o RegistryOptions) platform() v1.Platform {
	if o.Platform != nil {
		return *o.Platform
	}
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if runtime.GOARCH == "arm64" {
		p.Variant = "v8"
	}
	return p
}

// Resolved is what Resolve found for a reference.
type Resolved struct {
	// Ref is the reference to put in a job spec: repository@digest.
	Ref string `json:"ref"`
	// Digest is the manifest's or the index's digest.
	Digest string `json:"digest"`
	// MediaType is the manifest's media type: an image, or an index of
	// images for several platforms.
	MediaType string `json:"media_type"`
	// Platforms lists an index's platforms ("linux/amd64", …).
	Platforms []string `json:"platforms,omitempty"`
	// Size is the manifest's size in bytes.
	Size int64 `json:"size"`
}

// Resolve asks a registry for the digest a reference (a tag, or already a
// digest) names, without downloading the image.
func Resolve(ctx context.Context, ref string, o RegistryOptions) (*Resolved, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRef, err)
	}
	desc, err := remote.Get(r, o.remote(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if got := sha256Hex(desc.Manifest); "sha256:"+got != desc.Digest.String() {
		return nil, fmt.Errorf("%s: the registry said digest %s for a manifest whose sha256 is %s", ref, desc.Digest, got)
	}
	out := &Resolved{
		Ref:       r.Context().Name() + "@" + desc.Digest.String(),
		Digest:    desc.Digest.String(),
		MediaType: string(desc.MediaType),
		Size:      desc.Size,
	}
	if desc.MediaType.IsIndex() {
		if im, err := v1.ParseIndexManifest(bytes.NewReader(desc.Manifest)); err == nil {
			for _, m := range im.Manifests {
				if m.Platform != nil {
					out.Platforms = append(out.Platforms, m.Platform.String())
				}
			}
		}
	}
	return out, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ImageConfig is what a job takes from its image's configuration.
type ImageConfig struct {
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// Image is an image unpacked in a Store.
type Image struct {
	// Ref is the reference it was pulled by; Digest its digest (of the
	// manifest, or of the index the manifest was chosen from).
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Manifest is the digest of the platform's manifest.
	Manifest string      `json:"manifest"`
	Platform string      `json:"platform"`
	Config   ImageConfig `json:"config"`
	Layers   int         `json:"layers"`
	// CompressedBytes is what was downloaded; UnpackedBytes the size of
	// the rootfs's files.
	CompressedBytes int64       `json:"compressed_bytes"`
	UnpackedBytes   int64       `json:"unpacked_bytes"`
	Stats           UnpackStats `json:"stats"`
	PulledAt        time.Time   `json:"pulled_at"`
	// Dir is the image's cache directory; Rootfs its unpacked rootfs, to
	// be used read-only.
	Dir    string `json:"-"`
	Rootfs string `json:"-"`
}

// Pull is what Store.Get did to get an image.
type Pull struct {
	// Cached is true when the image was already unpacked.
	Cached bool
	// Duration is the time Get took, waiting for another caller's pull
	// of the same image included.
	Duration time.Duration
}

// Store pulls images by digest, verifies them, and keeps their rootfs
// unpacked in a content-addressed cache (DIR/sha256/<hex>/rootfs) that
// later jobs reuse. It is safe for concurrent use, also by several
// processes sharing a directory: an image is unpacked in a scratch
// directory and renamed into place whole.
type Store struct {
	dir    string
	reg    RegistryOptions
	limits UnpackLimits

	// ctx bounds every pull; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	inflight map[string]*pullCall
}

// PullTimeout bounds one image pull.
const PullTimeout = 30 * time.Minute

type pullCall struct {
	done chan struct{}
	img  *Image
	err  error
}

// NewStore returns a store caching under dir.
func NewStore(dir string, reg RegistryOptions, limits UnpackLimits) (*Store, error) {
	for _, d := range []string{filepath.Join(dir, "sha256"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image cache: %w", err)
		}
	}
	// The rootfs directories must be reachable by a job's user.
	if err := os.Chmod(filepath.Join(dir, "sha256"), 0o711); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Store{dir: dir, reg: reg, limits: limits, ctx: ctx, cancel: cancel, inflight: map[string]*pullCall{}}, nil
}

// Close stops the pulls in progress.
func (s *Store) Close() { s.cancel() }

// Dir is the cache directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) imageDir(digest string) string {
	return filepath.Join(s.dir, "sha256", strings.TrimPrefix(digest, "sha256:"))
}

// Lookup returns the cached image of a reference, if it is there.
func (s *Store) Lookup(ref string) (*Image, bool) {
	d, err := ParseRef(ref)
	if err != nil {
		return nil, false
	}
	img, err := s.load(d.DigestStr())
	return img, err == nil
}

func (s *Store) load(digest string) (*Image, error) {
	dir := s.imageDir(digest)
	b, err := os.ReadFile(filepath.Join(dir, "image.json"))
	if err != nil {
		return nil, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "image.json"), err)
	}
	img.Dir, img.Rootfs = dir, filepath.Join(dir, "rootfs")
	return &img, nil
}

// Get returns the unpacked image ref names, pulling it first unless it is
// cached. Concurrent calls for one image share one pull.
func (s *Store) Get(ctx context.Context, ref string) (*Image, *Pull, error) {
	t0 := time.Now()
	d, err := ParseRef(ref)
	if err != nil {
		return nil, nil, err
	}
	if img, err := s.load(d.DigestStr()); err == nil {
		return img, &Pull{Cached: true, Duration: time.Since(t0)}, nil
	}
	key := d.DigestStr()
	s.mu.Lock()
	c, ok := s.inflight[key]
	if !ok {
		c = &pullCall{done: make(chan struct{})}
		s.inflight[key] = c
		// The pull is shared, so one caller's cancellation does not end it
		// for the others; it runs to the end (the image is then cached for
		// the next job) unless the store closes or PullTimeout passes.
		go func() {
			pctx, cancel := context.WithTimeout(s.ctx, PullTimeout)
			defer cancel()
			c.img, c.err = s.pull(pctx, d)
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			close(c.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-c.done:
		if c.err != nil {
			return nil, nil, c.err
		}
		return c.img, &Pull{Duration: time.Since(t0)}, nil
	case <-ctx.Done():
		return nil, nil, context.Cause(ctx)
	}
}

// pull downloads, verifies and unpacks an image into the cache.
func (s *Store) pull(ctx context.Context, d name.Digest) (*Image, error) {
	ref := d.String()
	desc, err := remote.Get(d, s.reg.remote(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	// The registry client checks this too; the network's guarantee that
	// every provider runs the same bytes rests on it, so check it here.
	if got := "sha256:" + sha256Hex(desc.Manifest); got != d.DigestStr() {
		return nil, fmt.Errorf("pull %s: the registry served a manifest whose digest is %s", ref, got)
	}
	img, err := desc.Image()
	if err != nil {
		if desc.MediaType.IsIndex() {
			p := s.reg.platform()
			return nil, fmt.Errorf("pull %s: no %s image in this multi-platform index (%w)", ref, p.String(), err)
		}
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("pull %s: manifest: %w", ref, err)
	}
	manifest, err := v1.ParseManifest(bytes.NewReader(rawManifest))
	if err != nil {
		return nil, fmt.Errorf("pull %s: manifest: %w", ref, err)
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("pull %s: config: %w", ref, err)
	}
	if got := "sha256:" + sha256Hex(rawConfig); got != manifest.Config.Digest.String() {
		return nil, fmt.Errorf("pull %s: config digest is %s, the manifest says %s", ref, got, manifest.Config.Digest)
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return nil, fmt.Errorf("pull %s: config: %w", ref, err)
	}
	want := s.reg.platform()
	if (cfg.OS != "" && cfg.OS != want.OS) || (cfg.Architecture != "" && cfg.Architecture != want.Architecture) {
		return nil, fmt.Errorf("pull %s: the image is for %s/%s; this provider runs %s/%s", ref, cfg.OS, cfg.Architecture, want.OS, want.Architecture)
	}
	if len(manifest.Layers) > 500 {
		return nil, fmt.Errorf("pull %s: %d layers; at most 500", ref, len(manifest.Layers))
	}

	scratch, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "pull-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	rootfs := filepath.Join(scratch, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, err
	}
	// MkdirTemp's 0700 would keep a job's user out of its rootfs.
	if err := os.Chmod(scratch, 0o711); err != nil {
		return nil, err
	}
	u, err := NewUnpacker(rootfs, s.limits)
	if err != nil {
		return nil, err
	}
	defer u.Close()
	var compressed int64
	for i, ld := range manifest.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := s.applyLayer(img, ld, u)
		if err != nil {
			return nil, fmt.Errorf("pull %s: layer %d (%s): %w", ref, i+1, ld.Digest, err)
		}
		compressed += n
	}
	out := &Image{
		Ref: ref, Digest: d.DigestStr(), Manifest: "sha256:" + sha256Hex(rawManifest),
		Platform: cfg.OS + "/" + cfg.Architecture,
		Config: ImageConfig{
			Entrypoint: cfg.Config.Entrypoint, Cmd: cfg.Config.Cmd, Env: cfg.Config.Env,
			WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User,
		},
		Layers: len(manifest.Layers), CompressedBytes: compressed,
		UnpackedBytes: u.Stats().Bytes, Stats: u.Stats(), PulledAt: time.Now().UTC(),
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(scratch, "image.json"), b, 0o644); err != nil {
		return nil, err
	}
	final := s.imageDir(d.DigestStr())
	if err := os.Rename(scratch, final); err != nil {
		// Another process may have unpacked the same image meanwhile.
		if img, lerr := s.load(d.DigestStr()); lerr == nil {
			return img, nil
		}
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	out.Dir, out.Rootfs = final, filepath.Join(final, "rootfs")
	return out, nil
}

// applyLayer downloads one layer, checks its digest and size against the
// manifest, and unpacks it; it returns the bytes downloaded. The digest is
// checked once the whole blob was read, so a layer that fails it has been
// unpacked into the scratch directory, which the caller then discards.
func (s *Store) applyLayer(img v1.Image, ld v1.Descriptor, u *Unpacker) (int64, error) {
	switch ld.MediaType {
	case types.DockerForeignLayer, types.OCIRestrictedLayer, types.OCIUncompressedRestrictedLayer:
		return 0, fmt.Errorf("non-distributable layer (%s) not supported", ld.MediaType)
	}
	if ld.Digest.Algorithm != "sha256" {
		return 0, fmt.Errorf("layer digest %s: only sha256 is supported", ld.Digest)
	}
	layer, err := img.LayerByDigest(ld.Digest)
	if err != nil {
		return 0, err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(rc, h)}
	plain, closeFn, err := decompress(bufio.NewReaderSize(cr, 1<<20))
	if err != nil {
		return cr.n, err
	}
	defer closeFn()
	if err := u.Apply(plain); err != nil {
		return cr.n, err
	}
	// Read the rest of the blob (tar padding, compression trailer) so that
	// the digest covers all of it.
	if _, err := io.Copy(io.Discard, plain); err != nil {
		return cr.n, fmt.Errorf("%w: %v", ErrBadLayer, err)
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return cr.n, err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != ld.Digest.Hex {
		return cr.n, fmt.Errorf("digest mismatch: the registry served sha256:%s", got)
	}
	if ld.Size > 0 && cr.n != ld.Size {
		return cr.n, fmt.Errorf("size mismatch: %d bytes served, the manifest says %d", cr.n, ld.Size)
	}
	return cr.n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// decompress sniffs gzip or zstd (else plain tar) at the start of r.
func decompress(r *bufio.Reader) (io.Reader, func(), error) {
	magic, _ := r.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: gzip: %v", ErrBadLayer, err)
		}
		zr.Multistream(true)
		return zr, func() { zr.Close() }, nil
	case len(magic) == 4 && bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: zstd: %v", ErrBadLayer, err)
		}
		return zr, zr.Close, nil
	}
	return r, func() {}, nil
}

// newID returns n random hex characters.
func newID(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// PushImage writes img to the registry at host as repo:latest and returns
// its reference by digest, the form jobs name images by. Providers never
// push; the benchmarks and tests serve their images this way.
func PushImage(host, repo string, img v1.Image) (string, error) {
	tag, err := name.NewTag(host + "/" + repo + ":latest")
	if err != nil {
		return "", err
	}
	if err := remote.Write(tag, img); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return host + "/" + repo + "@" + d.String(), nil
}
