// publish builds the GPU example's container image from this repository
// and serves it from a registry on loopback, so that a devnet's providers
// can pull it without any outside registry; it writes the job spec that
// names the image by digest.
//
//	go run ./examples/gpugemm/publish -spec /tmp/gpugemm.yaml   # keeps serving until Ctrl-C
//	gpunet job run /tmp/gpugemm.yaml --from alice --out result
//
// The image holds the gpugemm program (built here with cgo, so dynamically
// linked against glibc) and this machine's glibc loader and libraries; the
// NVIDIA driver's libraries (libcuda.so.1 and the PTX compiler) come from
// the provider's host at run time, through CDI. No CUDA toolkit anywhere.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// The glibc pieces a cgo program and libcuda.so.1 load: the loader, libc,
// and the libraries libcuda links (libm, libdl, libpthread, librt).
var glibc = []string{
	"/lib64/ld-linux-x86-64.so.2",
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/lib/x86_64-linux-gnu/libm.so.6",
	"/lib/x86_64-linux-gnu/libdl.so.2",
	"/lib/x86_64-linux-gnu/libpthread.so.0",
	"/lib/x86_64-linux-gnu/librt.so.1",
}

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "where to serve the registry (loopback)")
	spec := flag.String("spec", "", "write the job spec here (default: stdout)")
	binary := flag.String("binary", "", "use this gpugemm binary instead of building ./examples/gpugemm")
	dims := flag.String("size", "4096 4096 4096", "N K M of the product")
	seed := flag.String("seed", "gpunet", "the matrices' seed")
	once := flag.Bool("once", false, "exit after writing the spec (the registry stops too)")
	verification := flag.String("verification", "spot", "the spec's verification: spot re-runs the job on a second GPU provider now and then, none never")
	flag.Parse()
	if err := run(*addr, *spec, *binary, *dims, *seed, *verification, *once); err != nil {
		log.Fatalf("publish: %v", err)
	}
}

// buildImage makes the example's image: the program at /gpugemm (its
// entrypoint) and this machine's glibc pieces.
func buildImage(binary string) (v1.Image, error) {
	prog, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	files := map[string]ocitest.File{}
	files["gpugemm"] = ocitest.File{Data: prog, Mode: 0o755}
	for _, p := range glibc {
		b, err := os.ReadFile(p) // follows the links to the real files
		if err != nil {
			return nil, fmt.Errorf("this machine's glibc: %w", err)
		}
		files[strings.TrimPrefix(p, "/")] = ocitest.File{Data: b, Mode: 0o755}
	}
	files["etc/passwd"] = ocitest.File{Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")}
	files["etc/group"] = ocitest.File{Data: []byte("root:x:0:\nnogroup:x:65534:\n")}
	tarb, err := ocitest.TarFiles(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarb)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = []string{"/gpugemm"}
	cf.Config.Env = []string{"PATH=/"}
	cf.Config.WorkingDir = "/"
	return mutate.ConfigFile(img, cf)
}

// jobSpec is the job spec that runs the image at ref on one GPU.
func jobSpec(ref, dims, seed, verification string) (string, error) {
	args := strings.Fields(dims)
	if len(args) != 3 {
		return "", fmt.Errorf("-size %q: want \"N K M\"", dims)
	}
	return fmt.Sprintf(`# The GPU example (examples/gpugemm), written by examples/gpugemm/publish.
# Check its result on the CPU: go run ./examples/gpugemm -cpu %s %s %s %q
name: gpugemm
executor: oci
image: %s
args: [-out, /out, %q, %q, %q, %q]
outputs: [/out]
resources:
  cpu: 1
  memory: 2GiB
  gpu: {count: 1}
max_price: 2
timeout: 10m
deterministic: true
verification: %s
`, args[0], args[1], args[2], seed, ref, args[0], args[1], args[2], seed, verification), nil
}

func run(addr, specPath, binary, dims, seed, verification string, once bool) error {
	if verification != "spot" && verification != "none" && verification != "full" {
		return fmt.Errorf("-verification %q: want spot, full or none", verification)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return fmt.Errorf("the example image is built for linux/amd64 (this is %s/%s)", runtime.GOOS, runtime.GOARCH)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil || !oci.PlainHTTPAllowed(addr) {
		return fmt.Errorf("-addr %q: want a loopback host:port", addr)
	}
	if binary == "" {
		dir, err := os.MkdirTemp("", "gpugemm")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "gpugemm")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", binary, "./examples/gpugemm")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		// go-nvml's cgo wrappers name calls that NVML deprecates.
		cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build ./examples/gpugemm (run this from the repository's root): %w", err)
		}
	}
	img, err := buildImage(binary)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve the registry: %w (another publish running? pick another -addr)", err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go srv.Serve(ln)
	defer srv.Close()
	ref, err := oci.PushImage(ln.Addr().String(), "gpunet/gpugemm", img)
	if err != nil {
		return err
	}
	y, err := jobSpec(ref, dims, seed, verification)
	if err != nil {
		return err
	}
	if specPath == "" {
		fmt.Print(y)
	} else if err := os.WriteFile(specPath, []byte(y), 0o644); err != nil {
		return err
	} else {
		fmt.Fprintf(os.Stderr, "image %s\nspec written to %s\n", ref, specPath)
	}
	if once {
		return nil
	}
	fmt.Fprintf(os.Stderr, "serving the image on %s until interrupted\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done()
	if err := srv.Shutdown(context.Background()); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
