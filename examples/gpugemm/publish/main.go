// publish builds the GPU example's container image from this repository
// and serves it from a registry on loopback, so that a devnet's providers
// can pull it without any outside registry; it writes the job spec that
// names the image by digest.
//
//	go run ./examples/gpugemm/publish -spec /tmp/gpugemm.yaml   # keeps serving until Ctrl-C
//	gpunet job run /tmp/gpugemm.yaml --from alice --out result
//
// The image is gemmimage's (the program and this machine's glibc).
// `gpunet devnet --registry` serves the same image from the devnet.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/gpunet/gpunet/examples/gpugemm/gemmimage"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

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

func run(addr, specPath, binary, dims, seed, verification string, once bool) error {
	so := gemmimage.SpecOptions{Size: dims, Seed: seed, Verification: verification}
	if _, err := gemmimage.Spec("check", so); err != nil {
		return err
	}
	if err := gemmimage.Supported(); err != nil {
		return err
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
		if err := gemmimage.BuildProgram(context.Background(), ".", binary); err != nil {
			return fmt.Errorf("%w (run this from the repository's root)", err)
		}
	}
	img, err := gemmimage.Build(binary)
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
	ref, err := oci.PushImage(ln.Addr().String(), gemmimage.Repo, img)
	if err != nil {
		return err
	}
	y, err := gemmimage.Spec(ref, so)
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
