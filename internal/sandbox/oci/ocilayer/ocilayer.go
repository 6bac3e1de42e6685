// Package ocilayer builds an image layer from files held in memory: a tar
// of the files and their parent directories in a fixed order, with fixed
// times and modes, so the same files always give the same bytes and the
// same digest. The examples' image builders (examples/internal/progimage)
// use it, and so do tests (ocitest); it links no test code, so a binary
// that builds images may import it.
package ocilayer

import (
	"archive/tar"
	"bytes"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is a file of a layer.
type File struct {
	Data []byte
	Mode int64 // default 0644
}

// mtime is every entry's modification time: a fixed one, so that a layer's
// digest depends on its files only.
var mtime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Tar writes files (path → file; a leading / is dropped), and their parent
// directories (mode 0755), as an uncompressed tar archive: directories
// first, then files, each sorted by path.
func Tar(files map[string]File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, n := range names {
		n = strings.TrimPrefix(n, "/")
		for d := path.Dir(n); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var dl []string
	for d := range dirs {
		dl = append(dl, d)
	}
	sort.Strings(dl)
	for _, d := range dl {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		f := files[n]
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(n, "/"), Mode: mode, Size: int64(len(f.Data)), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Layer is Tar(files) as an image layer (gzip-compressed when pushed).
func Layer(files map[string]File) (v1.Layer, error) {
	b, err := Tar(files)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

// Image is a Linux image for arch (GOARCH's names) of the one layer,
// running as c says (entrypoint, command, environment, working directory;
// "/" when c names none).
func Image(layer v1.Layer, arch string, c v1.Config) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Config = c
	if cf.Config.WorkingDir == "" {
		cf.Config.WorkingDir = "/"
	}
	return mutate.ConfigFile(img, cf)
}
