// Package gemmimage builds the GPU example's container image
// (examples/gpugemm) from this repository and writes the job specs that run
// it: the publish tool serves it from a registry of its own, `gpunet devnet
// --registry` from the devnet's.
//
// The image holds the gpugemm program (built with cgo, so dynamically
// linked against glibc) and this machine's glibc loader and libraries; the
// NVIDIA driver's libraries (libcuda.so.1 and the PTX compiler) come from
// the provider's host at run time, through CDI. No CUDA toolkit anywhere.
// Its bytes depend only on the program and this machine's glibc, so the
// same build gives the same digest.
package gemmimage

import (
	"context"
	"fmt"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpunet/gpunet/examples/internal/progimage"
)

// Repo is the repository the image is pushed to in a registry.
const Repo = "gpunet/gpugemm"

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

// Supported says why this machine cannot build the image, or nil.
func Supported() error { return progimage.Supported() }

// BuildProgram builds the gpugemm program of the repository at repo (its
// root) into out, with the go command (progimage.BuildProgram: the same
// checkout and toolchain give the same bytes).
func BuildProgram(ctx context.Context, repo, out string) error {
	return progimage.BuildProgram(ctx, repo, "./examples/gpugemm", out)
}

// Build makes the example's image: the program binary at /gpugemm (its
// entrypoint) and this machine's glibc pieces.
func Build(binary string) (v1.Image, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	prog, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	files := map[string]progimage.File{"gpugemm": {Data: prog, Mode: 0o755}}
	for _, p := range glibc {
		b, err := os.ReadFile(p) // follows the links to the real files
		if err != nil {
			return nil, fmt.Errorf("this machine's glibc: %w", err)
		}
		files[strings.TrimPrefix(p, "/")] = progimage.File{Data: b, Mode: 0o755}
	}
	return progimage.Image(files, "/gpugemm")
}

// SpecOptions say what job a spec asks the image for.
type SpecOptions struct {
	// Size is "N K M", the product's dimensions (multiples of 64).
	Size string
	// Seed is the matrices' seed.
	Seed string
	// Verification is the spec's verification: spot, full or none.
	Verification string
	// CPU computes the product on the provider's CPU (gpugemm -cpu): a
	// job any provider with runc runs, no GPU needed.
	CPU bool
}

// Spec is the job spec that runs the image at ref (by digest): on one GPU,
// or with o.CPU on the CPU.
func Spec(ref string, o SpecOptions) (string, error) {
	dims := strings.Fields(o.Size)
	if len(dims) != 3 {
		return "", fmt.Errorf("size %q: want \"N K M\"", o.Size)
	}
	switch o.Verification {
	case "spot", "full", "none":
	default:
		return "", fmt.Errorf("verification %q: want spot, full or none", o.Verification)
	}
	name, args, gpu, where := "gpugemm", "", "\n  gpu: {count: 1}", "on one GPU"
	if o.CPU {
		name, args, gpu, where = "gpugemm-cpu", "-cpu, ", "", "on the provider's CPU (-cpu): no GPU needed"
	}
	return fmt.Sprintf(`# The GPU example (examples/gpugemm) %s; its image is built from
# this repository. Check its result: go run ./examples/gpugemm -cpu %s %s %s %q
name: %s
executor: oci
image: %s
args: [%s-out, /out, %q, %q, %q, %q]
outputs: [/out]
resources:
  cpu: 1
  memory: 2GiB%s
max_price: 2
timeout: 10m
deterministic: true
verification: %s
`, where, dims[0], dims[1], dims[2], o.Seed, name, ref, args, dims[0], dims[1], dims[2], o.Seed, gpu, o.Verification), nil
}
