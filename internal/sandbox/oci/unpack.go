package oci

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
)

// An image's layers are tar archives applied in order to one directory, as
// the OCI image spec describes: later entries replace earlier ones,
// ".wh.NAME" removes NAME from the layers below, and ".wh..wh..opq" empties
// its directory of what the layers below put there.
//
// Layers come from anyone who can push an image, so the unpacker treats
// them as hostile. Every operation goes through an os.Root on the rootfs,
// which refuses to reach outside it; on top of that, entry names with ".."
// are refused, and a symbolic link met in the parent path of an entry is
// resolved as the container would see it (an absolute target is relative
// to the rootfs, ".." stops at its root), never on the host. Device nodes
// and FIFOs are skipped (a job has no business with devices, and only root
// could create them); setuid and setgid bits are cleared.

// Errors the unpacker wraps, for callers that tell them apart.
var (
	// ErrBadLayer is a layer that cannot be applied: an entry name with
	// "..", a hard link to something that is not there, a parent that is
	// not a directory.
	ErrBadLayer = errors.New("bad layer")
	// ErrTooLarge is a rootfs past UnpackLimits.
	ErrTooLarge = errors.New("image too large")
)

// UnpackLimits bound what a rootfs may hold; zero fields mean the defaults.
type UnpackLimits struct {
	// MaxBytes bounds the total size of the regular files written
	// (default DefaultMaxRootfsBytes).
	MaxBytes int64
	// MaxEntries bounds the tar entries read, over all layers (default
	// DefaultMaxEntries).
	MaxEntries int
}

// Defaults of UnpackLimits.
const (
	DefaultMaxRootfsBytes = 64 << 30
	DefaultMaxEntries     = 4 << 20
)

// UnpackStats count what the unpacker did.
type UnpackStats struct {
	Files, Dirs, Symlinks, Hardlinks int
	Whiteouts, Opaques               int
	// Skipped counts device nodes, FIFOs and entry types the unpacker does
	// not create.
	Skipped int
	// Bytes is the size of the regular files written.
	Bytes int64
}

// Unpacker applies layers to one rootfs directory. It is not safe for
// concurrent use.
type Unpacker struct {
	root   *os.Root
	limits UnpackLimits
	// chown keeps the owners recorded in the layers (only root may).
	chown bool
	// owner makes every directory owner-writable while unpacking, for an
	// unprivileged unpacker that could not write into a 0555 directory.
	ownerWritable bool
	entries       int
	stats         UnpackStats
}

// NewUnpacker returns an unpacker writing into dir, an existing directory.
// Run as root it keeps the layers' file owners; otherwise files belong to
// the caller and directories stay writable by it. Close releases it.
func NewUnpacker(dir string, limits UnpackLimits) (*Unpacker, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	if limits.MaxBytes <= 0 {
		limits.MaxBytes = DefaultMaxRootfsBytes
	}
	if limits.MaxEntries <= 0 {
		limits.MaxEntries = DefaultMaxEntries
	}
	root0 := os.Geteuid() == 0
	return &Unpacker{root: root, limits: limits, chown: root0, ownerWritable: !root0}, nil
}

// Close releases the rootfs directory.
func (u *Unpacker) Close() error { return u.root.Close() }

// Stats returns what was unpacked so far.
func (u *Unpacker) Stats() UnpackStats { return u.stats }

const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
	maxLinks       = 40 // symbolic links followed while resolving one path, as Linux's ELOOP
)

// Apply applies one uncompressed layer (a tar stream). On error the rootfs
// is left half-applied: callers unpack into a scratch directory and discard
// it on failure.
func (u *Unpacker) Apply(r io.Reader) error {
	tr := tar.NewReader(r)
	// Paths (resolved, relative to the root) this layer wrote, and their
	// parents: whiteouts apply only to what lower layers left.
	mine := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: read tar: %v", ErrBadLayer, err)
		}
		u.entries++
		if u.entries > u.limits.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, u.limits.MaxEntries)
		}
		if err := u.entry(h, tr, mine); err != nil {
			return err
		}
	}
}

// cleanName turns a tar entry name into a clean path relative to the
// root ("." for the root itself), refusing names that climb with "..".
func cleanName(name string) (string, error) {
	if name == "" || len(name) > 4096 || strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: entry name %q is empty, too long or contains NUL", ErrBadLayer, clip(name))
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: entry %q contains \"..\"", ErrBadLayer, clip(name))
		}
	}
	p := strings.TrimPrefix(path.Clean("/"+name), "/")
	if p == "" {
		p = "."
	}
	return p, nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

func (u *Unpacker) entry(h *tar.Header, body io.Reader, mine map[string]bool) error {
	name, err := cleanName(h.Name)
	if err != nil {
		return err
	}
	if name == "." {
		return nil // the root itself: its mode is ours to choose
	}
	dir, base := path.Dir(name), path.Base(name)
	parent, err := u.resolve(dir)
	if err != nil {
		return fmt.Errorf("%w: entry %q: %v", ErrBadLayer, clip(h.Name), err)
	}
	switch {
	case base == whiteoutOpaque:
		u.stats.Opaques++
		return u.opaque(parent, mine)
	case strings.HasPrefix(base, whiteoutPrefix):
		victim := base[len(whiteoutPrefix):]
		if victim == "" || victim == "." || victim == ".." {
			return fmt.Errorf("%w: whiteout entry %q names nothing", ErrBadLayer, clip(h.Name))
		}
		u.stats.Whiteouts++
		target := path.Join(parent, victim)
		if mine[target] {
			return nil // whiteouts hide lower layers only
		}
		if err := u.root.RemoveAll(target); err != nil {
			return fmt.Errorf("whiteout %s: %w", target, err)
		}
		return nil
	}

	target := path.Join(parent, base)
	switch h.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo, tar.TypeXGlobalHeader, tar.TypeCont:
		u.stats.Skipped++
		return nil
	case tar.TypeDir, tar.TypeReg, tar.TypeGNUSparse, tar.TypeSymlink, tar.TypeLink:
	default:
		u.stats.Skipped++
		return nil
	}
	if parent != "." {
		if err := u.root.MkdirAll(parent, 0o755); err != nil {
			return fmt.Errorf("%w: entry %q: parent %s: %v", ErrBadLayer, clip(h.Name), parent, err)
		}
	}
	// Replace what is there, except a directory by a directory (which
	// keeps its contents, as tar does).
	if st, err := u.root.Lstat(target); err == nil {
		if !(st.IsDir() && h.Typeflag == tar.TypeDir) {
			if err := u.root.RemoveAll(target); err != nil {
				return fmt.Errorf("replace %s: %w", target, err)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: entry %q: %v", ErrBadLayer, clip(h.Name), err)
	}

	mode := fs.FileMode(h.Mode) & fs.ModePerm
	if h.Mode&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if u.ownerWritable {
			mode |= 0o700
		}
		if err := u.root.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("mkdir %s: %w", target, err)
		}
		u.stats.Dirs++
	case tar.TypeReg, tar.TypeGNUSparse:
		if err := u.writeFile(target, body, h.Size); err != nil {
			return err
		}
		u.stats.Files++
	case tar.TypeSymlink:
		if h.Linkname == "" || strings.IndexByte(h.Linkname, 0) >= 0 || len(h.Linkname) > 4096 {
			return fmt.Errorf("%w: symbolic link %q has an empty or invalid target", ErrBadLayer, clip(h.Name))
		}
		// The target is stored as is: it is resolved inside the container,
		// whose root is the rootfs, never by the unpacker on the host.
		if err := u.root.Symlink(h.Linkname, target); err != nil {
			return fmt.Errorf("symlink %s: %w", target, err)
		}
		u.stats.Symlinks++
	case tar.TypeLink:
		lname, err := cleanName(h.Linkname)
		if err != nil || lname == "." {
			return fmt.Errorf("%w: hard link %q to %q: the target must be a file in the image", ErrBadLayer, clip(h.Name), clip(h.Linkname))
		}
		ldir, err := u.resolve(path.Dir(lname))
		if err != nil {
			return fmt.Errorf("%w: hard link %q: %v", ErrBadLayer, clip(h.Name), err)
		}
		src := path.Join(ldir, path.Base(lname))
		st, err := u.root.Lstat(src)
		if err != nil || st.IsDir() {
			return fmt.Errorf("%w: hard link %q to %q: the target is not a file already in the image", ErrBadLayer, clip(h.Name), clip(h.Linkname))
		}
		if err := u.root.Link(src, target); err != nil {
			return fmt.Errorf("link %s: %w", target, err)
		}
		u.stats.Hardlinks++
		u.mark(target, mine)
		return nil // a hard link shares its target's owner, mode and times
	}
	if u.chown {
		if err := u.root.Lchown(target, h.Uid, h.Gid); err != nil {
			return fmt.Errorf("chown %s: %w", target, err)
		}
	}
	if h.Typeflag != tar.TypeSymlink {
		// After chown, which clears setuid bits anyway; setuid and setgid
		// are never set (no-new-privileges makes them void in a job too).
		if err := u.root.Chmod(target, mode); err != nil {
			return fmt.Errorf("chmod %s: %w", target, err)
		}
		if h.Typeflag != tar.TypeDir && !h.ModTime.IsZero() {
			if err := u.root.Chtimes(target, time.Time{}, h.ModTime); err != nil {
				return fmt.Errorf("chtimes %s: %w", target, err)
			}
		}
	}
	u.mark(target, mine)
	return nil
}

// mark records that this layer wrote p (and so needs its parents).
func (u *Unpacker) mark(p string, mine map[string]bool) {
	for ; p != "." && p != "/" && !mine[p]; p = path.Dir(p) {
		mine[p] = true
	}
}

func (u *Unpacker) writeFile(target string, body io.Reader, size int64) error {
	if size < 0 || size > u.limits.MaxBytes-u.stats.Bytes {
		return fmt.Errorf("%w: files exceed %d bytes", ErrTooLarge, u.limits.MaxBytes)
	}
	f, err := u.root.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", target, err)
	}
	n, err := io.Copy(f, io.LimitReader(body, size))
	u.stats.Bytes += n
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", target, err)
	}
	if n != size {
		return fmt.Errorf("%w: %s: tar entry ends early", ErrBadLayer, target)
	}
	return nil
}

// opaque empties dir of everything this layer did not write.
func (u *Unpacker) opaque(dir string, mine map[string]bool) error {
	d, err := u.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opaque %s: %w", dir, err)
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("opaque %s: %w", dir, err)
	}
	for _, e := range entries {
		child := path.Join(dir, e.Name())
		switch {
		case !mine[child]:
			if err := u.root.RemoveAll(child); err != nil {
				return fmt.Errorf("opaque %s: %w", child, err)
			}
		case e.IsDir():
			if err := u.opaque(child, mine); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolve follows the symbolic links in p (a clean path relative to the
// root) the way the container will: an absolute target starts again at
// the root, ".." never climbs above it. Components that do not exist yet
// are kept as they are. The result has no symbolic link in it.
func (u *Unpacker) resolve(p string) (string, error) {
	todo := splitPath(p)
	var done []string
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		cur := path.Join(append(append([]string{}, done...), c)...)
		st, err := u.root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			done = append(done, c)
			continue
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("too many levels of symbolic links in %q", clip(p))
		}
		target, err := u.root.Readlink(cur)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = nil
		}
		todo = append(splitPath(target), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

func splitPath(p string) []string {
	return strings.Split(strings.Trim(p, "/"), "/")
}
