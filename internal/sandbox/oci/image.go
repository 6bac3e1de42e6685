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
	"log/slog"
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

	"github.com/gpunet/gpunet/internal/egress"
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
	// its credential helpers), anonymous where it has none — except with
	// Egress set (a stranger's image reference, pulled by a provider):
	// then nil means anonymous, so that a job cannot name its operator's
	// private image and read it out through its outputs on the operator's
	// credentials.
	Keychain authn.Keychain
	// Egress, when set, checks every connection to a registry on the
	// address dialled, after name resolution: redirects, token servers
	// and the environment's proxy included (egress.Policy.Transport). A
	// provider sets it, since a job's or a service's image reference is a
	// stranger's choice; nil dials anything, for one's own commands
	// (`gpunet image digest`) that name one's own registry.
	Egress *egress.Policy
	// Transport is the HTTP transport under the plain-HTTP policy; nil
	// means remote.DefaultTransport. It is ignored when Egress is set: a
	// transport of one's own would dial unchecked.
	Transport http.RoundTripper
	// Platform selects the image from a multi-platform index; nil means
	// linux and this machine's architecture.
	Platform *v1.Platform
}

// transport is the HTTP transport registries are reached with, under the
// plain-HTTP policy.
func (o RegistryOptions) transport() http.RoundTripper {
	switch {
	case o.Egress != nil:
		base, _ := remote.DefaultTransport.(*http.Transport) // nil: net/http's defaults
		return policyTransport{o.Egress.Transport(base)}
	case o.Transport != nil:
		return policyTransport{o.Transport}
	}
	return policyTransport{remote.DefaultTransport}
}

func (o RegistryOptions) remote(ctx context.Context, rt http.RoundTripper) []remote.Option {
	kc := o.Keychain
	switch {
	case kc == nil && o.Egress != nil:
		kc = authn.NewMultiKeychain() // anonymous everywhere
	case kc == nil:
		kc = authn.DefaultKeychain
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(kc),
		remote.WithTransport(rt),
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
	desc, err := remote.Get(r, o.remote(ctx, o.transport())...)
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

	use         *os.File // image.json, share-locked while in use (imagecache.go)
	releaseOnce sync.Once
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
// directory and renamed into place whole. The cache is bounded
// (CacheOptions.MaxBytes): after each pull, the least recently used
// images that no caller is using are removed until the rest fit.
type Store struct {
	dir      string
	reg      RegistryOptions
	rt       http.RoundTripper // reg.transport(), shared by its pulls
	limits   UnpackLimits
	maxBytes int64
	log      *slog.Logger
	evictMu  sync.Mutex

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

// CacheOptions bound a Store's cache.
type CacheOptions struct {
	// MaxBytes bounds the unpacked images kept (Image.DiskBytes); 0 means
	// DefaultImageCacheBytes. Images in use are kept whatever it is.
	MaxBytes int64
	// Logger gets what eviction could not do; nil: nothing.
	Logger *slog.Logger
}

// NewStore returns a store caching under dir, and evicts what a smaller
// bound than the last one no longer holds.
func NewStore(dir string, reg RegistryOptions, limits UnpackLimits, cache CacheOptions) (*Store, error) {
	if cache.MaxBytes < 0 {
		return nil, fmt.Errorf("image cache: bound %d bytes is negative", cache.MaxBytes)
	}
	if cache.MaxBytes == 0 {
		cache.MaxBytes = DefaultImageCacheBytes
	}
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
	// What an eviction killed midway left behind (never in use).
	if old, err := filepath.Glob(filepath.Join(dir, "tmp", "evict-*")); err == nil {
		for _, d := range old {
			os.RemoveAll(d)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{dir: dir, reg: reg, rt: reg.transport(), limits: limits, maxBytes: cache.MaxBytes, log: cache.Logger, ctx: ctx, cancel: cancel, inflight: map[string]*pullCall{}}
	s.evict("")
	return s, nil
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
// cached, for the caller's use until it calls the image's Release: the
// store does not evict it before. Concurrent calls for one image share one
// pull. An image that could not be pulled, for a reason of the image's or
// its registry's, is a *PullError, whose text is fit for the ledger; other
// errors are this machine's (its disk).
func (s *Store) Get(ctx context.Context, ref string) (*Image, *Pull, error) {
	t0 := time.Now()
	d, err := ParseRef(ref)
	if err != nil {
		return nil, nil, err
	}
	img, ok, err := s.acquire(d.DigestStr())
	if err != nil {
		return nil, nil, err
	}
	if ok {
		return img, &Pull{Cached: true, Duration: time.Since(t0)}, nil
	}
	// Another pull's eviction may remove the image between its pull and
	// our acquiring it (it is not in use yet): pull it again, a few times.
	for range 3 {
		if err := s.pullShared(ctx, d); err != nil {
			return nil, nil, err
		}
		img, ok, err := s.acquire(d.DigestStr())
		if err != nil {
			return nil, nil, err
		}
		if ok {
			return img, &Pull{Duration: time.Since(t0)}, nil
		}
	}
	return nil, nil, fmt.Errorf("image %s: evicted from the cache as soon as it was pulled, three times: the cache bound is too small for the images in use", ref)
}

// pullShared pulls d into the cache, or waits for the pull of it in
// progress.
func (s *Store) pullShared(ctx context.Context, d name.Digest) error {
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
		return c.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// pull downloads, verifies and unpacks an image into the cache. What goes
// wrong with the image or its registry is a *PullError; other errors are
// this machine's.
func (s *Store) pull(ctx context.Context, d name.Digest) (*Image, error) {
	ref := d.String()
	host := d.RegistryStr()
	fail := func(cause PullCause, err error) error { return &PullError{Ref: ref, Cause: cause, Err: err} }
	// fetched is a failure to fetch something pinned by its digest: the
	// registry's answer (or none), or, with no sign of the network, the
	// registry client's own check of what it read against the digest and
	// size that pin it: the registry served other bytes.
	fetched := func(what string, err error) error {
		cause, network := registryCause(host, err)
		switch {
		case ctx.Err() != nil:
			cause = PullUnreachable
		case !network:
			cause = PullDigestMismatch
		}
		return fail(cause, fmt.Errorf("%s: %w", what, err))
	}
	desc, err := remote.Get(d, s.reg.remote(ctx, s.rt)...)
	if err != nil {
		return nil, fetched("manifest", err)
	}
	// The registry client checks this too; the network's guarantee that
	// every provider runs the same bytes rests on it, so check it here.
	if got := "sha256:" + sha256Hex(desc.Manifest); got != d.DigestStr() {
		return nil, fail(PullDigestMismatch, fmt.Errorf("the registry served a manifest whose digest is %s", got))
	}
	img, err := desc.Image()
	if err != nil {
		cause, network := registryCause(host, err)
		if desc.MediaType.IsIndex() && !network {
			p := s.reg.platform()
			return nil, fail(PullWrongPlatform, fmt.Errorf("no %s image in this multi-platform index (%w)", p.String(), err))
		}
		if !network {
			cause = PullInvalid
		}
		return nil, fail(cause, err)
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return nil, fetched("manifest", err)
	}
	manifest, err := v1.ParseManifest(bytes.NewReader(rawManifest))
	if err != nil {
		return nil, fail(PullInvalid, fmt.Errorf("manifest: %w", err))
	}
	rawConfig, err := img.RawConfigFile()
	if err != nil {
		return nil, fetched("config", err)
	}
	if got := "sha256:" + sha256Hex(rawConfig); got != manifest.Config.Digest.String() {
		return nil, fail(PullDigestMismatch, fmt.Errorf("config digest is %s, the manifest says %s", got, manifest.Config.Digest))
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawConfig))
	if err != nil {
		return nil, fail(PullInvalid, fmt.Errorf("config: %w", err))
	}
	want := s.reg.platform()
	if (cfg.OS != "" && cfg.OS != want.OS) || (cfg.Architecture != "" && cfg.Architecture != want.Architecture) {
		return nil, fail(PullWrongPlatform, fmt.Errorf("the image is for %s/%s; this provider runs %s/%s", cfg.OS, cfg.Architecture, want.OS, want.Architecture))
	}
	if len(manifest.Layers) > 500 {
		return nil, fail(PullTooLarge, fmt.Errorf("%d layers; at most 500", len(manifest.Layers)))
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
			return nil, fail(PullUnreachable, err)
		}
		n, err := s.applyLayer(host, img, ld, u)
		var le *layerError
		if errors.As(err, &le) {
			if ctx.Err() != nil {
				le.cause = PullUnreachable
			}
			return nil, fail(le.cause, fmt.Errorf("layer %d (%s): %w", i+1, ld.Digest, le.err))
		}
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
	s.evict(d.DigestStr())
	return out, nil
}

// layerError is a layer that could not be applied for a reason of its own
// or its registry's.
type layerError struct {
	cause PullCause
	err   error
}

func (e *layerError) Error() string { return e.err.Error() }
func (e *layerError) Unwrap() error { return e.err }

// applyLayer downloads one layer, checks its digest and size against the
// manifest, and unpacks it; it returns the bytes downloaded. The digest is
// checked once the whole blob was read, so a layer that fails it has been
// unpacked into the scratch directory, which the caller then discards. A
// failure of the layer's or its registry's (at host) is a *layerError.
func (s *Store) applyLayer(host string, img v1.Image, ld v1.Descriptor, u *Unpacker) (int64, error) {
	switch ld.MediaType {
	case types.DockerForeignLayer, types.OCIRestrictedLayer, types.OCIUncompressedRestrictedLayer:
		return 0, &layerError{PullInvalid, fmt.Errorf("non-distributable layer (%s) not supported", ld.MediaType)}
	}
	if ld.Digest.Algorithm != "sha256" {
		return 0, &layerError{PullInvalid, fmt.Errorf("layer digest %s: only sha256 is supported", ld.Digest)}
	}
	fromRegistry := func(err error) error {
		cause, _ := registryCause(host, err)
		return &layerError{cause, err}
	}
	layer, err := img.LayerByDigest(ld.Digest)
	if err != nil {
		return 0, fromRegistry(err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		return 0, fromRegistry(err)
	}
	defer rc.Close()
	h := sha256.New()
	src := &sourceReader{r: rc}
	cr := &countingReader{r: io.TeeReader(src, h)}
	mismatch := func() bool { return hex.EncodeToString(h.Sum(nil)) != ld.Digest.Hex }
	// failed tells what made the layer fail: the registry's stream, bytes
	// other than the digest pins, or the layer itself.
	failed := func(err error) error {
		if !errors.Is(err, ErrBadLayer) && !errors.Is(err, ErrTooLarge) && src.err == nil {
			return err // this machine's (its disk)
		}
		if errors.Is(err, ErrBadLayer) && src.err == nil {
			// Read the rest: a layer the registry altered is told from
			// one that is bad as its digest pins it.
			io.Copy(io.Discard, cr)
		}
		switch {
		case src.err != nil && cr.n == ld.Size && mismatch():
			return &layerError{PullDigestMismatch, fmt.Errorf("the registry served other bytes (sha256 mismatch): %w", src.err)}
		case src.err != nil:
			return fromRegistry(src.err)
		case errors.Is(err, ErrTooLarge):
			return &layerError{PullTooLarge, err}
		case mismatch():
			return &layerError{PullDigestMismatch, fmt.Errorf("the registry served other bytes (sha256 mismatch): %w", err)}
		}
		return &layerError{PullInvalid, err}
	}
	plain, closeFn, err := decompress(bufio.NewReaderSize(cr, 1<<20))
	if err != nil {
		return cr.n, failed(err)
	}
	defer closeFn()
	if err := u.Apply(plain); err != nil {
		return cr.n, failed(err)
	}
	// Read the rest of the blob (tar padding, compression trailer) so that
	// the digest covers all of it.
	if _, err := io.Copy(io.Discard, plain); err != nil {
		return cr.n, failed(fmt.Errorf("%w: %v", ErrBadLayer, err))
	}
	if _, err := io.Copy(io.Discard, cr); err != nil {
		return cr.n, failed(err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != ld.Digest.Hex {
		return cr.n, &layerError{PullDigestMismatch, fmt.Errorf("digest mismatch: the registry served sha256:%s", got)}
	}
	if ld.Size > 0 && cr.n != ld.Size {
		return cr.n, &layerError{PullDigestMismatch, fmt.Errorf("size mismatch: %d bytes served, the manifest says %d", cr.n, ld.Size)}
	}
	return cr.n, nil
}

// sourceReader keeps the first error other than io.EOF of the registry's
// stream.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
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
