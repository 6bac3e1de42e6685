// Package lmimage builds the services example's container image
// (examples/tinylm) from this repository and writes the service spec that
// serves it: `gpunet devnet --registry` publishes it on the devnet's
// registry, examples/tinylm/image on any loopback registry.
//
// The image holds the tinylm program alone, built static (CGO_ENABLED=0:
// no libc needed), its model's tables embedded in it; its bytes depend
// only on the program, so the same build gives the same digest.
package lmimage

import (
	"context"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpunet/gpunet/examples/internal/progimage"
)

// Repo is the repository the image is pushed to in a registry.
const Repo = "gpunet/tinylm"

// Port is where the image's server listens, as the spec asks it to.
const Port = 8000

// Supported says why this machine cannot build the image, or nil.
func Supported() error { return progimage.Supported() }

// BuildProgram builds the tinylm program of the repository at repo (its
// root) into out, static.
func BuildProgram(ctx context.Context, repo, out string) error {
	return progimage.BuildProgram(ctx, repo, "./examples/tinylm", out, "CGO_ENABLED=0")
}

// Build makes the image: the program at /tinylm, its entrypoint.
func Build(binary string) (v1.Image, error) {
	prog, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	return progimage.Image(map[string]progimage.File{"tinylm": {Data: prog, Mode: 0o755}}, "/tinylm")
}

// Spec is the service spec (kind: service, docs/jobspec.md) that serves
// the image at ref (by digest): one small replica that every node's
// /openai/v1 routes model "tinylm" to, reachable with the owner's key. Its
// answers are declared bit-exact (openai.exact: the trigram model is integer
// code), so that a replica outvoted on a checked request is disputed.
func Spec(ref string) string {
	return spec(ref, "tinylm", nil, "integer code: bit-exact answers on any hardware")
}

// Int8Model is the name the int8 network (model.Int8) is served under.
const Int8Model = "tinylm-int8"

// Int8Spec is Spec for the int8 network (-model tinylm-int8), the same
// image: a replica computes its int8 matrix products on its GPU's kernels
// when the provider gives it one, else on the CPU, and its answers are the
// same bit for bit either way, so they too are declared exact.
func Int8Spec(ref string) string {
	return spec(ref, Int8Model, []string{"-model", Int8Model}, "int8 GEMMs, integer sampling: bit-exact on any GPU or CPU")
}

func spec(ref, model string, args []string, why string) string {
	quoted := fmt.Sprintf("%q, %q", "-addr", fmt.Sprintf(":%d", Port))
	for _, a := range args {
		quoted += fmt.Sprintf(", %q", a)
	}
	return fmt.Sprintf(`# The services example (examples/tinylm): a tiny language model behind
# OpenAI's chat completions API; its image is built from this repository.
# Deploy it: gpunet service deploy THIS_FILE --from alice
kind: service
name: %s
image: %s
args: [%s]
ports:
  - {port: %d, name: api}
readiness: {path: /health, port: %d, interval: 2s, timeout: 1s, failure_threshold: 3, start: 2m}
replicas: 1
budget: 5 SYNC
max_price: 1 SYNC/h
resources: {cpu: 0.5, memory: 128MiB, disk: 256MiB}
openai: {port: %d, models: [%s], exact: true}   # %s
public: false
`, model, ref, quoted, Port, Port, Port, model, why)
}
