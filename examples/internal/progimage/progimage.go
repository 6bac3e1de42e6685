// Package progimage builds the examples' container images from this
// repository: one Go program, built by the go command, and the files it
// needs, in one layer, the program the entrypoint. Its bytes depend only
// on the files, so the same build gives the same digest, and a spec that
// names the image by digest stays valid.
//
// examples/gpugemm/gemmimage (a cgo program and this machine's glibc) and
// examples/tinylm/lmimage (a static program alone) are built with it.
package progimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpunet/gpunet/internal/sandbox/oci/ocilayer"
)

// Supported says why this machine cannot build the examples' images
// (linux/amd64 ones), or nil.
func Supported() error {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return fmt.Errorf("the example images are built for linux/amd64 (this is %s/%s)", runtime.GOOS, runtime.GOARCH)
	}
	return nil
}

// BuildProgram builds the program pkg ("./examples/gpugemm") of the
// repository at repo (its root) into out, with the go command and env
// added to its environment ("CGO_ENABLED=0" for a static program). The
// build records no VCS state, so one checkout and toolchain give the same
// bytes at every commit that leaves the program alone. (It keeps the
// source paths: -trimpath would miss the build cache of every other build
// and compile the standard library again.)
func BuildProgram(ctx context.Context, repo, pkg, out string, env ...string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = repo
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", pkg, repo, err, msg.Bytes())
	}
	return nil
}

// File is a file of an image.
type File = ocilayer.File

// Image is a linux/amd64 image of one layer holding files (paths without
// the leading /) and an /etc/passwd and /etc/group that name root and
// nobody, which runs entrypoint in / with PATH=/.
func Image(files map[string]File, entrypoint ...string) (v1.Image, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	all := map[string]File{
		"etc/passwd": {Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		"etc/group":  {Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	for p, f := range files {
		all[p] = f
	}
	layer, err := ocilayer.Layer(all)
	if err != nil {
		return nil, err
	}
	return ocilayer.Image(layer, "amd64", v1.Config{Entrypoint: entrypoint, Env: []string{"PATH=/"}})
}
