// image builds the PyTorch example's container image (examples/torchrun)
// from Debian's packages installed on this machine, pushes it to a
// registry on loopback (a devnet's: `gpunet devnet --registry` serves one
// on 127.0.0.1:5000) and writes the job specs that name it by digest: a
// gang of -nodes members running torchrun (gang.yaml) and the
// one-process run it must agree with (local.yaml):
//
//	apt-get install --no-install-recommends python3-torch dash
//	go run ./examples/torchrun/image -registry 127.0.0.1:5000 -out /tmp/torchrun
//	gpunet job run /tmp/torchrun/gang.yaml
//
// With -tar FILE it writes the image's root as a tar instead (no registry).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/gpunet/gpunet/examples/torchrun"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

func main() {
	registry := flag.String("registry", "127.0.0.1:5000", "the loopback registry to push the image to (host:port)")
	out := flag.String("out", "", "write the job specs to DIR/gang.yaml and DIR/local.yaml (default: stdout)")
	nodes := flag.Int("nodes", 2, "the gang's members")
	elems := flag.Int("elems", 100_000, "train.py --elems: the all-reduced vector's length")
	steps := flag.Int("steps", 20, "train.py --steps: the training steps")
	seed := flag.Int("seed", 1, "train.py --seed")
	tarPath := flag.String("tar", "", "write the image's root as a tar to FILE and stop")
	flag.Parse()
	if err := run(context.Background(), *registry, *out, *tarPath, torchrun.SpecOptions{Nodes: *nodes, Elems: *elems, Steps: *steps, Seed: *seed}); err != nil {
		log.Fatalf("image: %v", err)
	}
}

func run(ctx context.Context, registry, out, tarPath string, o torchrun.SpecOptions) error {
	if o.Nodes < 2 {
		return fmt.Errorf("-nodes %d: a gang has 2 or more members", o.Nodes)
	}
	if tarPath == "" {
		if _, _, err := net.SplitHostPort(registry); err != nil || !oci.PlainHTTPAllowed(registry) {
			return fmt.Errorf("-registry %q: want a loopback host:port", registry)
		}
	}
	t0 := time.Now()
	img, root, err := torchrun.Build(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "resolved %d paths, %d MB, from %d packages in %s\n", len(root.Paths()), root.Bytes>>20, len(root.Manifest), time.Since(t0).Round(time.Millisecond))
	if tarPath != "" {
		f, err := os.Create(tarPath)
		if err != nil {
			return err
		}
		if err := root.WriteTar(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	ref, err := oci.PushImage(registry, torchrun.Repo, img)
	if err != nil {
		return fmt.Errorf("push to %s: %w (is a registry serving there? gpunet devnet --registry)", registry, err)
	}
	gang, err := torchrun.Spec(ref, o)
	if err != nil {
		return err
	}
	local, err := torchrun.Spec(ref, torchrun.SpecOptions{Nodes: 1, Local: o.Nodes, Elems: o.Elems, Steps: o.Steps, Seed: o.Seed})
	if err != nil {
		return err
	}
	if out == "" {
		fmt.Print(gang, "---\n", local)
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for name, spec := range map[string]string{"gang.yaml": gang, "local.yaml": local} {
		if err := os.WriteFile(filepath.Join(out, name), []byte(spec), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "image %s (%s)\nspecs written to %s: gang.yaml, local.yaml\n", ref, time.Since(t0).Round(time.Millisecond), out)
	return nil
}
