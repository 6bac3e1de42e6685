// Package debimage builds a container image from Debian packages installed
// on this machine: the files dpkg lists for a set of packages, the
// packages of the same kind they depend on (Python ones, for a Python
// program), and every shared library the loader must find for the ELF
// files among them, in one layer whose bytes depend only on those files.
//
// It takes the installed files rather than downloading .debs (apt-get
// download, dpkg-deb -x) so that a build needs no network and no apt
// state, and so that the libraries come in by what the programs link (the
// loader's DT_NEEDED closure) rather than by the packages' Depends, which
// for python3-torch name Qt, GDAL and a hundred more that no Python
// process opens. The image records the packages and versions its files
// came from (Manifest), so the same installed versions give the same
// digest on any machine.
package debimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gpunet/gpunet/internal/sandbox/oci/ocilayer"
)

// Spec says what a root holds.
type Spec struct {
	// Packages are installed packages whose files all go in (less those
	// Exclude drops).
	Packages []string
	// Follow says which of a package's dependencies (Depends and
	// Pre-Depends; the first installed alternative) go in whole, as
	// Packages do, followed again from there. The others' files come in
	// only as the ELF closure needs them.
	Follow func(pkg string) bool
	// Exclude drops a listed file (its path as dpkg lists it): docs,
	// tests, headers. The ELF closure is never excluded.
	Exclude func(path string) bool
	// Files are files of one's own (path without the leading / → file).
	Files map[string]File
}

// File is a file of one's own in the root.
type File struct {
	Data []byte
	Mode int64 // default 0644
}

// entry is one path of the root: a file of this machine (src), a file of
// one's own (data), or a symlink (link).
type entry struct {
	src  string
	data []byte
	link string
	mode int64
	size int64
}

// Root is a resolved root filesystem: what Layer writes.
type Root struct {
	entries map[string]entry // path without the leading /
	// Manifest lists "package version", sorted, for every package a file
	// of the root belongs to.
	Manifest []string
	// Bytes is the size of the root's regular files.
	Bytes int64
}

// installed is what dpkg says of an installed package.
type installed struct {
	version string
	deps    [][]string // each a list of alternatives, names without arch
}

// mergedUsr are the top-level links of a merged-/usr system (Debian 12's):
// the root has them too, and every path is written below /usr.
var mergedUsr = map[string]string{"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}

// dpkgInfo is dpkg's database of installed packages' file lists.
const dpkgInfo = "/var/lib/dpkg/info"

// Resolve finds the files of spec on this machine.
func Resolve(ctx context.Context, spec Spec) (*Root, error) {
	pkgs, provides, err := queryInstalled(ctx)
	if err != nil {
		return nil, err
	}
	// The packages that go in whole: spec.Packages and what Follow takes.
	whole := map[string]bool{}
	var queue []string
	for _, p := range spec.Packages {
		if _, ok := pkgs[p]; !ok {
			return nil, fmt.Errorf("package %s is not installed (apt-get install %s)", p, p)
		}
		if !whole[p] {
			whole[p] = true
			queue = append(queue, p)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, alts := range pkgs[p].deps {
			dep := ""
			for _, a := range alts {
				if _, ok := pkgs[a]; ok {
					dep = a
					break
				}
				if real := provides[a]; real != "" {
					dep = real
					break
				}
			}
			if dep == "" || whole[dep] || spec.Follow == nil || !spec.Follow(dep) {
				continue
			}
			whole[dep] = true
			queue = append(queue, dep)
		}
	}
	owners, err := readOwners()
	if err != nil {
		return nil, err
	}
	ld, err := ldconfigMap(ctx)
	if err != nil {
		return nil, err
	}
	b := &builder{entries: map[string]entry{}, owners: owners, ld: ld, used: map[string]bool{}, seenELF: map[string]bool{}}
	names := make([]string, 0, len(whole))
	for p := range whole {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		list, err := readList(p)
		if err != nil {
			return nil, err
		}
		b.used[p] = true
		for _, f := range list {
			if spec.Exclude != nil && spec.Exclude(f) {
				continue
			}
			if err := b.add(f, false); err != nil {
				return nil, fmt.Errorf("package %s: %w", p, err)
			}
		}
	}
	for p, f := range spec.Files {
		p = strings.TrimPrefix(path.Clean("/"+p), "/")
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		b.entries[p] = entry{data: f.Data, mode: mode, size: int64(len(f.Data))}
	}
	// The ELF closure: every library the loader maps for the ELF files in
	// the root, found as this machine's loader finds it.
	for {
		var todo []string
		for p, e := range b.entries {
			if e.src != "" && !b.seenELF[p] {
				todo = append(todo, p)
			}
		}
		if len(todo) == 0 {
			break
		}
		sort.Strings(todo)
		for _, p := range todo {
			b.seenELF[p] = true
			if err := b.addNeeded(p); err != nil {
				return nil, err
			}
		}
	}
	for top, target := range mergedUsr {
		b.entries[top] = entry{link: target}
	}
	r := &Root{entries: b.entries}
	for _, e := range r.entries {
		r.Bytes += e.size
	}
	for p := range b.used {
		r.Manifest = append(r.Manifest, p+" "+pkgs[p].version)
	}
	sort.Strings(r.Manifest)
	return r, nil
}

type builder struct {
	entries map[string]entry
	owners  map[string]string // canonical path → package
	ld      map[string]string // soname → path
	used    map[string]bool   // packages a file came from
	seenELF map[string]bool
}

// canonical is p with its directory's links resolved: the path below
// which the file really is (so /lib/x86_64-linux-gnu/libc.so.6 becomes
// /usr/lib/x86_64-linux-gnu/libc.so.6), the file itself unresolved.
func canonical(p string) (string, error) {
	d, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	return filepath.Join(d, filepath.Base(p)), nil
}

// add puts the file at p (absolute) in the root: a regular file, or a
// symlink and, followed, what it points to. Directories are implied by
// their files. A listed path that is gone (a diverted or removed file)
// is skipped unless need says the loader needs it.
func (b *builder) add(p string, need bool) error {
	for hops := 0; hops < 40; hops++ {
		c, err := canonical(p)
		if err != nil {
			if !need && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel := strings.TrimPrefix(c, "/")
		if _, ok := b.entries[rel]; ok {
			return nil
		}
		fi, err := os.Lstat(c)
		if err != nil {
			if !need && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if pkg := b.owners[c]; pkg != "" {
			b.used[pkg] = true
		}
		switch {
		case fi.IsDir():
			return nil
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(c)
			if err != nil {
				return err
			}
			b.entries[rel] = entry{link: target}
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(c), target)
			}
			p = target
			continue
		case fi.Mode().IsRegular():
			mode := int64(0o644)
			if fi.Mode()&0o111 != 0 {
				mode = 0o755
			}
			b.entries[rel] = entry{src: c, mode: mode, size: fi.Size()}
			return nil
		default:
			return nil // devices, FIFOs: no package of ours ships one
		}
	}
	return fmt.Errorf("%s: too many levels of symbolic links", p)
}

// addNeeded adds the interpreter and the DT_NEEDED libraries of the file
// at rel, if it is an ELF file.
func (b *builder) addNeeded(rel string) error {
	src := b.entries[rel].src
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != elf.ELFMAG {
		return nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil // not an ELF file we can read: not one the loader maps either
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			raw, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
			if err != nil {
				return fmt.Errorf("%s: %w", src, err)
			}
			interp := strings.TrimRight(string(raw), "\x00")
			if err := b.add(interp, true); err != nil {
				return fmt.Errorf("%s's interpreter: %w", src, err)
			}
		}
	}
	needed, err := ef.DynString(elf.DT_NEEDED)
	if err != nil {
		return nil // no dynamic section: static
	}
	var search []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		rp, _ := ef.DynString(tag)
		for _, s := range rp {
			for _, d := range strings.Split(s, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", "$ORIGIN"), "$ORIGIN", filepath.Dir(src))
				if path.IsAbs(d) {
					search = append(search, d)
				}
			}
		}
	}
	for _, n := range needed {
		p := ""
		if strings.Contains(n, "/") {
			p = n
		}
		for _, d := range search {
			if p != "" {
				break
			}
			if _, err := os.Stat(filepath.Join(d, n)); err == nil {
				p = filepath.Join(d, n)
			}
		}
		if p == "" {
			p = b.ld[n]
		}
		if p == "" {
			return fmt.Errorf("%s needs %s, which this machine's loader does not find (ldconfig -p)", src, n)
		}
		if err := b.add(p, true); err != nil {
			return fmt.Errorf("%s needs %s: %w", src, n, err)
		}
	}
	return nil
}

// ManifestPath is where the root lists the packages and versions its
// files came from, one "package version" a line.
const ManifestPath = "usr/share/gpunet/debian-packages"

// queryInstalled asks dpkg for every installed package: its version and
// dependencies, and which installed package provides each virtual name.
func queryInstalled(ctx context.Context) (map[string]installed, map[string]string, error) {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Package}\t${db:Status-Abbrev}\t${Version}\t${Provides}\t${Pre-Depends}, ${Depends}\n").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("dpkg-query (is this a Debian system?): %w", err)
	}
	pkgs := map[string]installed{}
	provides := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 || strings.TrimSpace(f[1]) != "ii" {
			continue
		}
		pkgs[f[0]] = installed{version: f[2], deps: ParseDepends(f[4])}
		for _, alts := range ParseDepends(f[3]) {
			for _, v := range alts {
				if provides[v] == "" || f[0] < provides[v] {
					provides[v] = f[0]
				}
			}
		}
	}
	if len(pkgs) == 0 {
		return nil, nil, errors.New("dpkg-query lists no installed package")
	}
	return pkgs, provides, nil
}

// ParseDepends parses a dpkg relation field ("a (>= 1), b | c:any") into
// its clauses, each the alternatives' package names without version or
// architecture. Empty clauses are dropped.
func ParseDepends(field string) [][]string {
	var out [][]string
	for _, clause := range strings.Split(field, ",") {
		var alts []string
		for _, alt := range strings.Split(clause, "|") {
			alt = strings.TrimSpace(alt)
			if i := strings.IndexAny(alt, " (["); i >= 0 {
				alt = alt[:i]
			}
			alt, _, _ = strings.Cut(alt, ":")
			if alt != "" {
				alts = append(alts, alt)
			}
		}
		if len(alts) > 0 {
			out = append(out, alts)
		}
	}
	return out
}

// listFile is dpkg's file list of an installed package.
func listFile(pkg string) string {
	for _, name := range []string{pkg + ".list", pkg + ":amd64.list"} {
		p := filepath.Join(dpkgInfo, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Installed says which of pkgs dpkg has no file list for (not
// installed, or not a Debian system), or nil.
func Installed(pkgs ...string) error {
	var missing []string
	for _, p := range pkgs {
		if listFile(p) == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("not installed: the Debian package(s) %s (dpkg has no file list in %s)", strings.Join(missing, ", "), dpkgInfo)
	}
	return nil
}

// readList is the paths dpkg installed for pkg.
func readList(pkg string) ([]string, error) {
	p := listFile(pkg)
	if p == "" {
		return nil, fmt.Errorf("package %s: dpkg has no file list for it in %s", pkg, dpkgInfo)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "/") {
			out = append(out, l)
		}
	}
	return out, nil
}

// readOwners maps every installed file's canonical path to its package.
func readOwners() (map[string]string, error) {
	lists, err := filepath.Glob(filepath.Join(dpkgInfo, "*.list"))
	if err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	owners := map[string]string{}
	for _, l := range lists {
		pkg, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(l), ".list"), ":")
		b, err := os.ReadFile(l)
		if err != nil {
			return nil, err
		}
		for _, p := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(p, "/") {
				continue
			}
			d := filepath.Dir(p)
			cd, ok := dirs[d]
			if !ok {
				cd, err = filepath.EvalSymlinks(d)
				if err != nil {
					cd = d
				}
				dirs[d] = cd
			}
			owners[filepath.Join(cd, filepath.Base(p))] = pkg
		}
	}
	return owners, nil
}

// ldconfigMap maps each x86-64 shared library's soname to the path this
// machine's loader takes it from (its cache, ldconfig -p).
func ldconfigMap(ctx context.Context) (map[string]string, error) {
	bin := "/usr/sbin/ldconfig"
	if _, err := os.Stat(bin); err != nil {
		bin = "ldconfig"
	}
	out, err := exec.CommandContext(ctx, bin, "-p").Output()
	if err != nil {
		return nil, fmt.Errorf("ldconfig -p: %w", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), " (")
		if !ok {
			continue
		}
		flags, p, ok := strings.Cut(rest, ") => ")
		if !ok || !strings.Contains(flags, "x86-64") {
			continue
		}
		if _, dup := m[name]; !dup { // the first is the loader's choice
			m[name] = p
		}
	}
	return m, sc.Err()
}

// mtime is every entry's modification time: a fixed one, so that the
// layer's digest depends on the files only. (No .pyc goes in: Python's
// would check it against the source's mtime.)
var mtime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Paths lists the root's paths, sorted (for tests and size reports).
func (r *Root) Paths() []string {
	out := make([]string, 0, len(r.entries))
	for p := range r.entries {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Has reports whether the root holds p (without the leading /).
func (r *Root) Has(p string) bool { _, ok := r.entries[p]; return ok }

// WriteTar writes the root as an uncompressed tar: the manifest at
// ManifestPath, the directories (0755), then files and links, each sorted
// by path, owned by root, with a fixed time.
func (r *Root) WriteTar(w io.Writer) error {
	entries := make(map[string]entry, len(r.entries)+1)
	for p, e := range r.entries {
		entries[p] = e
	}
	man := []byte(strings.Join(r.Manifest, "\n") + "\n")
	entries[ManifestPath] = entry{data: man, mode: 0o644, size: int64(len(man))}
	names := make([]string, 0, len(entries))
	dirs := map[string]bool{}
	for p := range entries {
		names = append(names, p)
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	sort.Strings(names)
	var dl []string
	for d := range dirs {
		if _, ok := entries[d]; ok {
			return fmt.Errorf("%s is both a directory and a file or link of the root", d)
		}
		dl = append(dl, d)
	}
	sort.Strings(dl)
	tw := tar.NewWriter(w)
	for _, d := range dl {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	for _, n := range names {
		e := entries[n]
		if e.link != "" {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: n, Linkname: e.link, Mode: 0o777, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return err
			}
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: e.mode, Size: e.size, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if e.src == "" {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
			continue
		}
		f, err := os.Open(e.src)
		if err != nil {
			return err
		}
		// Exactly the size seen at Resolve: a file changed since (a
		// package upgraded under us) fails the write, not the image.
		n, err := io.Copy(tw, io.LimitReader(f, e.size))
		f.Close()
		if err == nil && n != e.size {
			err = fmt.Errorf("%s changed size since it was resolved", e.src)
		}
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// Layer is the root as an image layer, written afresh from the files each
// time it is read (so a root of hundreds of MB is never held in memory),
// zstd-compressed at its fastest level when pushed: for PyTorch's 566 MB
// root, 208 MB against gzip's 229 MB at its fastest level, in 0.6 to 1
// times the time here (4.7 to 5.4 s for gzip). (The provider's
// executor takes gzip, zstd or plain layers; so do containerd 1.5 and
// later, and the registries that follow the OCI image spec 1.1.)
func (r *Root) Layer() (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(r.WriteTar(pw)) }()
		return pr, nil
	}, tarball.WithCompression(compression.ZStd), tarball.WithCompressionLevel(1), tarball.WithMediaType(types.OCILayerZStd))
}

// Config is an image's run configuration.
type Config struct {
	Entrypoint, Cmd, Env []string
	WorkingDir           string
}

// Image is a linux/amd64 image of the root's one layer.
func (r *Root) Image(c Config) (v1.Image, error) {
	layer, err := r.Layer()
	if err != nil {
		return nil, err
	}
	return ocilayer.Image(layer, "amd64", v1.Config{Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env, WorkingDir: c.WorkingDir})
}
