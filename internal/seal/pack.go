package seal

import (
	"archive/tar"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// packEpoch is every entry's modification time, so that when a file was
// written does not change the archive.
var packEpoch = time.Unix(0, 0).UTC()

// entry is one file or directory to pack.
type entry struct {
	name string // archive path: slash-separated, relative, clean; never "."
	dir  bool
	exec bool // regular file with its owner-execute bit set

	// Where a regular file's content comes from: rel inside root, or,
	// when root is nil, the host path file (a source named directly).
	root *os.Root
	rel  string
	file string
	info fs.FileInfo // as listed, to check the file opened is the same one
	host string      // for error messages
}

// PackDir writes the contents of dir (not dir itself) to w as a
// deterministic tar stream, so that equal trees give equal bytes:
//
//   - entries are in tree order (a directory before its contents,
//     siblings sorted by name bytes), names relative with "/" separators;
//   - only regular files and directories are packed, anything else
//     (symlinks included) is an error naming it;
//   - modification times are the Unix epoch, uid/gid 0, no user or group
//     names; modes are 0755 for directories and for files with the
//     owner-execute bit, 0644 otherwise.
//
// If dir itself is a symlink it is followed; symlinks inside it are not.
// Reads go through an os.Root, so nothing outside dir is ever packed even
// if the tree changes while it is read.
func PackDir(w io.Writer, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("seal: pack: %w", err)
	}
	defer root.Close()
	entries, err := listTree(root, dir, "")
	if err != nil {
		return err
	}
	return writeEntries(w, entries)
}

// PackFiles writes host files and directories to w at the archive paths
// that key files (e.g. {"/in/input.txt": "./input.txt", "/in/data":
// "./data"}), in the same deterministic form as PackDir. A directory
// brings its whole tree; the parents of every archive path are added as
// directories. A leading "/" on archive paths is dropped; archive paths
// must not contain "..", and no path may be given twice unless both give
// directories (their trees are merged, and must not share a file). The
// named sources are followed if they are symlinks; symlinks inside
// directories are errors.
func PackFiles(w io.Writer, files map[string]string) error {
	byName := map[string]entry{}
	add := func(e entry) error {
		if old, ok := byName[e.name]; ok {
			if old.dir && e.dir {
				return nil
			}
			return fmt.Errorf("seal: pack: archive path %q would come from both %s and %s", "/"+e.name, describe(old), describe(e))
		}
		byName[e.name] = e
		return nil
	}
	var roots []*os.Root
	defer func() {
		for _, r := range roots {
			r.Close()
		}
	}()
	// Visit in a fixed order so errors are reproducible.
	for _, ap := range slices.Sorted(maps.Keys(files)) {
		src := files[ap]
		name, err := archivePath(ap)
		if err != nil {
			return fmt.Errorf("seal: pack: %w", err)
		}
		info, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("seal: pack: %w", err)
		}
		var list []entry
		switch {
		case info.IsDir():
			root, err := os.OpenRoot(src)
			if err != nil {
				return fmt.Errorf("seal: pack: %w", err)
			}
			roots = append(roots, root)
			if name != "" {
				list = append(list, entry{name: name, dir: true, host: src})
			}
			more, err := listTree(root, src, name)
			if err != nil {
				return err
			}
			list = append(list, more...)
		case info.Mode().IsRegular():
			if name == "" {
				return fmt.Errorf("seal: pack: %s is a file; it needs an archive path below the root, not %q", src, ap)
			}
			list = append(list, entry{name: name, exec: info.Mode()&0o100 != 0, file: src, info: info, host: src})
		default:
			return fmt.Errorf("seal: pack: %s is %s; only regular files and directories can be packed", src, kindOf(info.Mode()))
		}
		for p := path.Dir(name); name != "" && p != "."; p = path.Dir(p) {
			if err := add(entry{name: p, dir: true, host: "the parent of " + src}); err != nil {
				return err
			}
		}
		for _, e := range list {
			if err := add(e); err != nil {
				return err
			}
		}
	}
	entries := make([]entry, 0, len(byName))
	for _, e := range byName {
		entries = append(entries, e)
	}
	return writeEntries(w, entries)
}

// archivePath turns a caller's archive path ("/in/input.txt") into an
// entry name ("in/input.txt"); "" stands for the root.
func archivePath(ap string) (string, error) {
	if ap == "" {
		return "", errors.New(`empty archive path; want a path such as "/in/input.txt"`)
	}
	if strings.ContainsRune(ap, 0) || strings.Contains(ap, `\`) {
		return "", fmt.Errorf("archive path %q: contains a NUL or a backslash", ap)
	}
	for _, el := range strings.Split(ap, "/") {
		if el == ".." {
			return "", fmt.Errorf("archive path %q: contains \"..\"", ap)
		}
	}
	name := path.Clean("/" + ap)[1:]
	return name, nil
}

// listTree lists everything under root as entries named prefix/<rel>.
func listTree(root *os.Root, hostDir, prefix string) ([]entry, error) {
	var list []entry
	err := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		host := filepath.Join(hostDir, filepath.FromSlash(rel))
		if err != nil {
			return fmt.Errorf("seal: pack: %s: %w", host, err)
		}
		if rel == "." {
			return nil
		}
		name := path.Join(prefix, rel)
		switch t := d.Type(); {
		case t.IsDir():
			list = append(list, entry{name: name, dir: true, host: host})
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return fmt.Errorf("seal: pack: %s: %w", host, err)
			}
			list = append(list, entry{name: name, exec: info.Mode()&0o100 != 0, root: root, rel: rel, info: info, host: host})
		default:
			return fmt.Errorf("seal: pack: %s is %s; only regular files and directories can be packed", host, kindOf(t))
		}
		return nil
	})
	return list, err
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "not a regular file (" + m.Type().String() + ")"
	}
}

func describe(e entry) string {
	if e.dir {
		return "directory " + e.host
	}
	return e.host
}

// compareNames orders archive paths as a tree: component by component,
// so "a/b" sorts before "a.txt" (as a directory's walk would list them).
func compareNames(a, b string) int {
	for {
		ae, arest, amore := strings.Cut(a, "/")
		be, brest, bmore := strings.Cut(b, "/")
		if c := cmp.Compare(ae, be); c != 0 {
			return c
		}
		switch {
		case !amore && !bmore:
			return 0
		case !amore:
			return -1
		case !bmore:
			return 1
		}
		a, b = arest, brest
	}
}

func writeEntries(w io.Writer, entries []entry) error {
	slices.SortFunc(entries, func(a, b entry) int { return compareNames(a.name, b.name) })
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if err := writeEntry(tw, e); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("seal: pack: %w", err)
	}
	return nil
}

func writeEntry(tw *tar.Writer, e entry) error {
	hdr := &tar.Header{Name: e.name, ModTime: packEpoch, Mode: 0o644, Typeflag: tar.TypeReg}
	if e.dir {
		hdr.Name += "/"
		hdr.Mode = 0o755
		hdr.Typeflag = tar.TypeDir
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("seal: pack: %s: %w", e.host, err)
		}
		return nil
	}
	if e.exec {
		hdr.Mode = 0o755
	}
	var f *os.File
	var err error
	if e.root != nil {
		f, err = e.root.Open(e.rel)
	} else {
		f, err = os.Open(e.file)
	}
	if err != nil {
		return fmt.Errorf("seal: pack: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("seal: pack: %w", err)
	}
	if !info.Mode().IsRegular() || !os.SameFile(info, e.info) {
		return fmt.Errorf("seal: pack: %s changed while being packed", e.host)
	}
	hdr.Size = info.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("seal: pack: %s: %w", e.host, err)
	}
	if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("seal: pack: %s shrank while being packed", e.host)
		}
		return fmt.Errorf("seal: pack: %s: %w", e.host, err)
	}
	return nil
}
