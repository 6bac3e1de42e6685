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
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpunet/gpunet/examples/gpugemm/gemmimage"
	"github.com/gpunet/gpunet/examples/tinylm/lmimage"
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
	ref, dir, err := publish(ctx, home, "container", r, gemmimage.Repo, func(bin string) (v1.Image, error) {
		if err := gemmimage.BuildProgram(ctx, repo, bin); err != nil {
			return nil, err
		}
		return gemmimage.Build(bin)
	})
	if err != nil {
		return nil, err
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

// ServiceExample is the service example a devnet's registry serves: the
// tiny language model of examples/tinylm behind OpenAI's API.
type ServiceExample struct {
	// Image is the image's reference by digest; Tag the tag it is also
	// pushed under (REGISTRY/gpunet/tinylm:latest).
	Image string `json:"image"`
	Tag   string `json:"tag"`
	// Spec is the service spec (kind: service) that deploys it.
	Spec string `json:"spec"`
	// Model is the model name its OpenAI API serves.
	Model string `json:"model"`
	// Int8Spec deploys the same image serving the int8 network
	// (Int8Model): its matrix products are int8 GEMMs, so its answers are
	// the same bit for bit on every GPU and CPU (docs/services.md).
	Int8Spec  string `json:"int8_spec"`
	Int8Model string `json:"int8_model"`
}

// PublishServiceExample builds the service example's image
// (examples/tinylm, a static program) from the repository at repo, pushes
// it to r, and writes the service specs naming it by digest to
// home/examples/service/tinylm.yaml (the trigram model) and
// tinylm-int8.yaml (the int8 network).
func PublishServiceExample(ctx context.Context, home string, r *Registry, repo string) (*ServiceExample, error) {
	if err := lmimage.Supported(); err != nil {
		return nil, err
	}
	ref, dir, err := publish(ctx, home, "service", r, lmimage.Repo, func(bin string) (v1.Image, error) {
		if err := lmimage.BuildProgram(ctx, repo, bin); err != nil {
			return nil, err
		}
		return lmimage.Build(bin)
	})
	if err != nil {
		return nil, err
	}
	ex := &ServiceExample{
		Image: ref, Tag: r.Addr + "/" + lmimage.Repo + ":latest",
		Spec: filepath.Join(dir, "tinylm.yaml"), Model: "tinylm",
		Int8Spec: filepath.Join(dir, lmimage.Int8Model+".yaml"), Int8Model: lmimage.Int8Model,
	}
	if err := os.WriteFile(ex.Spec, []byte(lmimage.Spec(ref)), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(ex.Int8Spec, []byte(lmimage.Int8Spec(ref)), 0o644); err != nil {
		return nil, err
	}
	return ex, nil
}

// publish is what both examples do: build decides what image a program
// built at the path it is given makes (in a directory removed after),
// which is pushed to r under repoName; the specs go to the directory dir
// of home/examples, made here.
func publish(ctx context.Context, home, dir string, r *Registry, repoName string, build func(bin string) (v1.Image, error)) (ref, specDir string, err error) {
	specDir = filepath.Join(home, "examples", dir)
	if err := os.MkdirAll(specDir, 0o755); err != nil {
		return "", "", err
	}
	tmp, err := os.MkdirTemp("", "gpunet-example-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	img, err := build(filepath.Join(tmp, filepath.Base(repoName)))
	if err != nil {
		return "", "", err
	}
	if ref, err = oci.PushImage(r.Addr, repoName, img); err != nil {
		return "", "", fmt.Errorf("push the example image to %s: %w", r.Addr, err)
	}
	return ref, specDir, nil
}

// FindRepo returns the root of the gpunet repository that holds dir (or
// a parent of it), where --registry builds the example images from.
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
			return "", fmt.Errorf("%s is not in a gpunet repository: the example images are built from the repository's examples/gpugemm and examples/tinylm (run the devnet from a clone)", dir)
		}
	}
}
