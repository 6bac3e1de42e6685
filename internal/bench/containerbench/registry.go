package containerbench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// registry serves images from memory on 127.0.0.1, read-only: what the
// executor's pulls ask of a registry (the /v2/ ping, then manifests and
// blobs by digest, GET or HEAD). The benchmark adds its images with add;
// nothing is pushed over HTTP. It stands in for go-containerregistry's
// pkg/registry, a registry for tests that would otherwise ship in the
// binary with its test helpers.
type registry struct {
	addr string
	srv  *http.Server

	mu    sync.RWMutex
	blobs map[string]blob // manifests, configs and layers, by digest
}

type blob struct {
	mediaType string
	data      []byte
}

// serveRegistry starts an empty registry on a free loopback port.
func serveRegistry() (*registry, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &registry{addr: l.Addr().String(), blobs: map[string]blob{}}
	r.srv = &http.Server{Handler: r}
	go r.srv.Serve(l)
	return r, nil
}

func (r *registry) close() { r.srv.Close() }

// add makes img available as repo and returns its reference by digest,
// host:port/repo@sha256:….
func (r *registry) add(repo string, img v1.Image) (string, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return "", err
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return "", err
	}
	configName, err := img.ConfigName()
	if err != nil {
		return "", err
	}
	add := map[string]blob{
		digest.String():     {string(mediaType), manifest},
		configName.String(): {"application/octet-stream", config},
	}
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return "", err
		}
		rc, err := l.Compressed()
		if err != nil {
			return "", err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return "", err
		}
		add[d.String()] = blob{"application/octet-stream", data}
	}
	r.mu.Lock()
	for d, b := range add {
		r.blobs[d] = b
	}
	r.mu.Unlock()
	return r.addr + "/" + repo + "@" + digest.String(), nil
}

// ServeHTTP answers the ping, and manifests and blobs by digest in any
// repository.
func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		registryError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "this registry is read-only")
		return
	}
	if req.URL.Path == "/v2/" || req.URL.Path == "/v2" {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
		return
	}
	path := req.URL.Path
	var ref, unknown string
	if i := strings.LastIndex(path, "/manifests/"); strings.HasPrefix(path, "/v2/") && i > 0 {
		ref, unknown = path[i+len("/manifests/"):], "MANIFEST_UNKNOWN"
	} else if i := strings.LastIndex(path, "/blobs/"); strings.HasPrefix(path, "/v2/") && i > 0 {
		ref, unknown = path[i+len("/blobs/"):], "BLOB_UNKNOWN"
	} else {
		registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "no such path")
		return
	}
	r.mu.RLock()
	b, ok := r.blobs[ref]
	r.mu.RUnlock()
	if !ok {
		registryError(w, http.StatusNotFound, unknown, fmt.Sprintf("%s: not here (this registry serves by digest only)", ref))
		return
	}
	h := w.Header()
	h.Set("Content-Type", b.mediaType)
	h.Set("Docker-Content-Digest", ref)
	h.Set("Content-Length", strconv.Itoa(len(b.data)))
	if req.Method == http.MethodGet {
		w.Write(b.data)
	}
}

// registryError writes an error as the distribution spec has it.
func registryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`, code, msg)
}
