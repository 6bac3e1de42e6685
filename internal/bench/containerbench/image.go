package containerbench

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageOf makes a one-layer linux image of files (path → contents, all
// executable) with entrypoint.
func imageOf(files map[string][]byte, entrypoint []string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		tw.Write(b)
	}
	tw.Close()
	return withLayers([][]byte{buf.Bytes()}, entrypoint)
}

// withLayers makes a linux image of this machine's architecture from
// uncompressed layer tars, with entrypoint.
func withLayers(tars [][]byte, entrypoint []string) (v1.Image, error) {
	img := empty.Image
	for _, t := range tars {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(t)), nil }, tarball.WithCompressedCaching)
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = entrypoint
	return mutate.ConfigFile(img, cf)
}

// bulkImage makes an image of layers layers holding mib MiB of 1 MiB
// files: half of each file random bytes, half English-like text, so that
// it compresses about as much as real images do.
func bulkImage(mib, layers int) (v1.Image, int, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the provider pulls an image by digest verifies every layer and unpacks it into a content addressed cache for later jobs")
	var tars [][]byte
	files := 0
	for l := range layers {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		per := mib / layers
		if l < mib%layers {
			per++
		}
		for f := range per {
			data := make([]byte, 1<<20)
			half := len(data) / 2
			for i := 0; i < half; i += 8 {
				v := rng.Uint64()
				for j := 0; j < 8 && i+j < half; j++ {
					data[i+j] = byte(v >> (8 * j))
				}
			}
			for i := half; i < len(data); {
				w := words[rng.IntN(len(words))]
				i += copy(data[i:], w+" ")
			}
			name := fmt.Sprintf("data/layer%d/dir%02d/file%03d.bin", l, f%16, f)
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				return nil, 0, err
			}
			tw.Write(data)
			files++
		}
		tw.Close()
		tars = append(tars, buf.Bytes())
	}
	img, err := withLayers(tars, []string{"/bin/true"})
	return img, files, err
}
