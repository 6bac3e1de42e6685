package devnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/gpunet/gpunet/examples/gpugemm/gemmimage"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// DefaultRegistry is where `gpunet devnet --registry` serves its registry
// when the home has no address of its own yet (the port Docker's registry
// image uses, so the README's image names work as written).
const DefaultRegistry = "127.0.0.1:5000"

// Registry is an OCI registry served in process on loopback, in memory:
// what a devnet's providers pull container images from without any outside
// registry. Images are content-addressed, so a spec naming one by digest
// stays valid as long as the same bytes are pushed again.
type Registry struct {
	// Addr is host:port, e.g. 127.0.0.1:5000.
	Addr string
	srv  *http.Server
}

// StartRegistry serves a registry on addr (a loopback host:port; empty:
// the address the home's registry had last, else DefaultRegistry). When
// that port is taken it takes a free one and says so in moved. The home
// remembers the address for the next start.
func StartRegistry(home, addr string) (r *Registry, moved string, err error) {
	if addr == "" {
		s, err := readState(home)
		if err != nil {
			return nil, "", err
		}
		addr = s.Registry
		if addr == "" {
			addr = DefaultRegistry
		}
	}
	if _, _, err := net.SplitHostPort(addr); err != nil || !oci.PlainHTTPAllowed(addr) {
		return nil, "", fmt.Errorf("registry address %q: want a loopback host:port, e.g. %s", addr, DefaultRegistry)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, "", err
		}
		moved = fmt.Sprintf("registry address %s is taken by another process; using %s", addr, ln.Addr())
	}
	r = &Registry{Addr: ln.Addr().String(), srv: &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}}
	go r.srv.Serve(ln)
	if err := updateState(home, func(s *state) { s.Registry = r.Addr }); err != nil {
		r.Close()
		return nil, "", err
	}
	return r, moved, nil
}

// Close stops serving; the images it held are gone.
func (r *Registry) Close() error {
	if err := r.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ContainerExample is the container example a devnet's registry serves.
type ContainerExample struct {
	// Image is the image's reference by digest; Tag the tag it is also
	// pushed under (REGISTRY/gpunet/gpugemm:latest).
	Image string `json:"image"`
	Tag   string `json:"tag"`
	// Spec is a job spec that runs it on a provider's CPU (any provider
	// with runc); GPUSpec one that runs it on a GPU.
	Spec    string `json:"spec"`
	GPUSpec string `json:"gpu_spec"`
}

// ContainerExampleSize is the product the CPU example spec computes: small
// enough to take a second on a CPU.
const ContainerExampleSize = "512 512 512"

// PublishExample builds the GPU example's image (examples/gpugemm) from
// the repository at repo (its root; the go command builds the program),
// pushes it to r, and writes two job specs naming it by digest to
// home/examples/container: job.yaml computes on a CPU, gpu.yaml on a GPU.
func PublishExample(ctx context.Context, home string, r *Registry, repo string) (*ContainerExample, error) {
	if err := gemmimage.Supported(); err != nil {
		return nil, err
	}
	dir := filepath.Join(home, "examples", "container")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "gpunet-gpugemm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "gpugemm")
	if err := gemmimage.BuildProgram(ctx, repo, bin); err != nil {
		return nil, err
	}
	img, err := gemmimage.Build(bin)
	if err != nil {
		return nil, err
	}
	ref, err := oci.PushImage(r.Addr, gemmimage.Repo, img)
	if err != nil {
		return nil, fmt.Errorf("push the example image to %s: %w", r.Addr, err)
	}
	ex := &ContainerExample{Image: ref, Tag: r.Addr + "/" + gemmimage.Repo + ":latest",
		Spec: filepath.Join(dir, "job.yaml"), GPUSpec: filepath.Join(dir, "gpu.yaml")}
	for path, o := range map[string]gemmimage.SpecOptions{
		ex.Spec:    {Size: ContainerExampleSize, Seed: "gpunet", Verification: "spot", CPU: true},
		ex.GPUSpec: {Size: "4096 4096 4096", Seed: "gpunet", Verification: "spot"},
	} {
		y, err := gemmimage.Spec(ref, o)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			return nil, err
		}
	}
	return ex, nil
}

// FindRepo returns the root of the gpunet repository that holds dir (or
// a parent of it), where --registry builds the example image from.
func FindRepo(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "examples", "gpugemm", "main.go")); err == nil && bytes.HasPrefix(b, []byte("module github.com/gpunet/gpunet\n")) {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is not in a gpunet repository: the example image is built from the repository's examples/gpugemm (run the devnet from a clone)", dir)
		}
	}
}
