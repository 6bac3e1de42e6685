package seal

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits bounds what UnpackDir extracts. A zero field takes its default.
type Limits struct {
	MaxBytes   int64 // total size of all files; default DefaultMaxBytes
	MaxEntries int   // files and directories; default DefaultMaxEntries
}

// Defaults for zero Limits fields.
const (
	DefaultMaxBytes   = 16 << 30
	DefaultMaxEntries = 100_000
)

// maxTrailing bounds the bytes UnpackDir accepts after the end-of-archive
// marker (a tar writer may pad to a record size).
const maxTrailing = 64 << 10

// ErrLimit is wrapped by UnpackDir's errors for an archive over its Limits.
var ErrLimit = errors.New("archive exceeds limit")

// UnpackDir extracts a tar stream made by PackDir or PackFiles into dir,
// creating dir and any missing parents of entries. It is meant for
// archives from untrusted parties and only ever writes inside dir:
//
//   - an entry whose name is absolute or has a ".." element is rejected,
//     as is any name that is not a local path on this OS;
//   - only regular files and directories are extracted; symlinks, hard
//     links, devices, fifos and anything else are errors naming the entry;
//   - all writes go through an os.Root, so even symlinks already in dir
//     cannot lead outside it;
//   - lim bounds the total file bytes and the number of entries (ErrLimit);
//   - a name may appear only once.
//
// Files get mode 0755 if the archive marks them owner-executable, 0644
// otherwise; existing files are overwritten. After the end-of-archive
// marker UnpackDir reads r to EOF, so that an authenticated stream such
// as Decrypt's is verified to its end. On error, dir may hold part of the
// archive.
func UnpackDir(r io.Reader, dir string, lim Limits) error {
	if lim.MaxBytes < 0 || lim.MaxEntries < 0 {
		return fmt.Errorf("seal: unpack: negative limit %+v", lim)
	}
	if lim.MaxBytes == 0 {
		lim.MaxBytes = DefaultMaxBytes
	}
	if lim.MaxEntries == 0 {
		lim.MaxEntries = DefaultMaxEntries
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("seal: unpack: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("seal: unpack: %w", err)
	}
	defer root.Close()

	tr := tar.NewReader(r)
	seen := map[string]bool{}
	var total int64
	for entries := 0; ; entries++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("seal: unpack: reading archive: %w", err)
		}
		if entries >= lim.MaxEntries {
			return fmt.Errorf("seal: unpack: %w: more than %d entries", ErrLimit, lim.MaxEntries)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return fmt.Errorf("seal: unpack: %w", err)
		}
		if seen[name] {
			return fmt.Errorf("seal: unpack: entry %q appears twice", hdr.Name)
		}
		seen[name] = true

		switch hdr.Typeflag {
		case tar.TypeDir:
			if name == "." {
				continue
			}
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("seal: unpack: entry %q: %w", hdr.Name, err)
			}
		case tar.TypeReg:
			if name == "." {
				return fmt.Errorf("seal: unpack: file entry %q has no name", hdr.Name)
			}
			if hdr.Size > lim.MaxBytes-total {
				return fmt.Errorf("seal: unpack: %w: entry %q (%d bytes) would take the total past %d bytes", ErrLimit, hdr.Name, hdr.Size, lim.MaxBytes)
			}
			n, err := writeFile(root, name, hdr, tr)
			total += n
			if err != nil {
				return fmt.Errorf("seal: unpack: entry %q: %w", hdr.Name, err)
			}
		default:
			return fmt.Errorf("seal: unpack: entry %q is %s; only regular files and directories are allowed", hdr.Name, typeName(hdr))
		}
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r, maxTrailing+1))
	if err != nil {
		return fmt.Errorf("seal: unpack: after the archive: %w", err)
	}
	if n > maxTrailing {
		return fmt.Errorf("seal: unpack: more than %d bytes of data after the end of the archive", maxTrailing)
	}
	return nil
}

// entryName validates an archive entry's name and returns it cleaned,
// "." for the root.
func entryName(raw string) (string, error) {
	switch {
	case raw == "":
		return "", errors.New("entry with an empty name")
	case strings.ContainsRune(raw, 0):
		return "", fmt.Errorf("entry %q: name contains NUL", raw)
	case strings.HasPrefix(raw, "/"):
		return "", fmt.Errorf("entry %q: absolute path", raw)
	}
	for _, el := range strings.Split(raw, "/") {
		if el == ".." {
			return "", fmt.Errorf("entry %q: path contains \"..\"", raw)
		}
	}
	name := path.Clean(raw)
	if name != "." && !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", fmt.Errorf("entry %q: not a local path on this system", raw)
	}
	return name, nil
}

func writeFile(root *os.Root, name string, hdr *tar.Header, src io.Reader) (int64, error) {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return 0, err
		}
	}
	mode := os.FileMode(0o644)
	if hdr.Mode&0o100 != 0 {
		mode = 0o755
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, src) // tar.Reader stops at hdr.Size
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	return n, root.Chmod(name, mode) // in case the file existed with another mode
}

func typeName(hdr *tar.Header) string {
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		return fmt.Sprintf("a symlink (to %q)", hdr.Linkname)
	case tar.TypeLink:
		return fmt.Sprintf("a hard link (to %q)", hdr.Linkname)
	case tar.TypeChar:
		return "a character device"
	case tar.TypeBlock:
		return "a block device"
	case tar.TypeFifo:
		return "a named pipe"
	default:
		return fmt.Sprintf("of unsupported type %q", hdr.Typeflag)
	}
}
