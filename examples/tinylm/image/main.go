// image builds the services example's container image (examples/tinylm)
// from this repository, pushes it to a registry on loopback (a devnet's:
// `gpunet devnet --registry` serves one on 127.0.0.1:5000, and publishes
// this same image itself) and writes the service spec that names it by
// digest:
//
//	go run ./examples/tinylm/image -registry 127.0.0.1:5000 -out /tmp/svc
//	gpunet service deploy /tmp/svc/tinylm.yaml --from alice
//
// -model tinylm-int8 writes the spec that serves the int8 network from the
// same image instead (DIR/tinylm-int8.yaml).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"

	"github.com/gpunet/gpunet/examples/tinylm/lmimage"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

func main() {
	registry := flag.String("registry", "127.0.0.1:5000", "the loopback registry to push the image to (host:port)")
	out := flag.String("out", "", "write the service spec to DIR/tinylm.yaml (default: stdout)")
	binary := flag.String("binary", "", "use this tinylm binary (static) instead of building ./examples/tinylm")
	model := flag.String("model", "tinylm", "the model the spec serves: tinylm or "+lmimage.Int8Model)
	flag.Parse()
	if err := run(context.Background(), *registry, *out, *binary, *model); err != nil {
		log.Fatalf("image: %v", err)
	}
}

func run(ctx context.Context, registry, out, binary, model string) error {
	specFor := map[string]func(string) string{"tinylm": lmimage.Spec, lmimage.Int8Model: lmimage.Int8Spec}[model]
	if specFor == nil {
		return fmt.Errorf("-model %q: want tinylm or %s", model, lmimage.Int8Model)
	}
	if err := lmimage.Supported(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(registry); err != nil || !oci.PlainHTTPAllowed(registry) {
		return fmt.Errorf("-registry %q: want a loopback host:port", registry)
	}
	if binary == "" {
		dir, err := os.MkdirTemp("", "tinylm")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "tinylm")
		if err := lmimage.BuildProgram(ctx, ".", binary); err != nil {
			return fmt.Errorf("%w (run this from the repository's root)", err)
		}
	}
	img, err := lmimage.Build(binary)
	if err != nil {
		return err
	}
	ref, err := oci.PushImage(registry, lmimage.Repo, img)
	if err != nil {
		return fmt.Errorf("push to %s: %w (is a registry serving there? gpunet devnet --registry)", registry, err)
	}
	spec := specFor(ref)
	if out == "" {
		fmt.Print(spec)
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(out, model+".yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "image %s\nspec written to %s\n", ref, path)
	return nil
}
