package oci_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// entry is one tar entry of a test layer.
type entry struct {
	name, link string
	typ        byte
	data       string
	mode       int64
}

func dir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func file(name, data string) entry {
	return entry{name: name, typ: tar.TypeReg, data: data, mode: 0o644}
}
func symlink(name, target string) entry { return entry{name: name, typ: tar.TypeSymlink, link: target} }
func hardlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeLink, link: target}
}

func layer(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.data))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.data))
		}
	}
	tw.Close()
	return buf.Bytes()
}

// apply unpacks layers in order into a fresh rootfs inside a sandbox
// directory, returning the rootfs and the sandbox (so that tests can check
// nothing landed beside the rootfs).
func apply(t testing.TB, layers ...[]byte) (rootfs, outside string, err error) {
	t.Helper()
	outside = t.TempDir()
	rootfs = filepath.Join(outside, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := oci.NewUnpacker(rootfs, oci.UnpackLimits{MaxBytes: 1 << 20, MaxEntries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for _, l := range layers {
		if err = u.Apply(bytes.NewReader(l)); err != nil {
			return rootfs, outside, err
		}
	}
	return rootfs, outside, nil
}

// tree lists a rootfs: "path" for files (with "=contents"), "path/" for
// directories, "path -> target" for symbolic links.
func tree(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out = append(out, rel+" -> "+l)
		case d.IsDir():
			out = append(out, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			out = append(out, rel+"="+string(b))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// onlyRootfs checks that nothing but the rootfs is in outside.
func onlyRootfs(t testing.TB, outside string) {
	t.Helper()
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "rootfs" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("the unpacker wrote outside the rootfs: %v", names)
	}
}

func TestUnpackLayers(t *testing.T) {
	tests := []struct {
		name   string
		layers [][]byte
		want   []string
	}{
		{
			"files, dirs, implicit parents",
			[][]byte{layer(t, dir("etc/"), file("etc/os-release", "gpunet"), file("usr/bin/tool", "bin"))},
			[]string{"etc/", "etc/os-release=gpunet", "usr/", "usr/bin/", "usr/bin/tool=bin"},
		},
		{
			"later layer replaces a file, a file replaces a dir",
			[][]byte{
				layer(t, file("a", "1"), dir("b/"), file("b/c", "2")),
				layer(t, file("a", "3"), file("b", "now a file")),
			},
			[]string{"a=3", "b=now a file"},
		},
		{
			"whiteout removes a file and a directory of lower layers",
			[][]byte{
				layer(t, file("keep", "k"), file("gone", "g"), dir("d/"), file("d/x", "x")),
				layer(t, file(".wh.gone", ""), file(".wh.d", "")),
			},
			[]string{"keep=k"},
		},
		{
			"whiteout of something not there is harmless",
			[][]byte{layer(t, file("a", "1")), layer(t, file("dir/.wh.nothing", ""))},
			[]string{"a=1"},
		},
		{
			"whiteout does not hide a file of its own layer",
			[][]byte{layer(t, file("a", "1"), file(".wh.a", ""))},
			[]string{"a=1"},
		},
		{
			"opaque directory hides lower contents, keeps its own layer's",
			[][]byte{
				layer(t, dir("d/"), file("d/old1", "o"), dir("d/sub/"), file("d/sub/old2", "o"), file("other", "x")),
				layer(t, dir("d/"), file("d/new", "n"), file("d/.wh..wh..opq", ""), file("d/sub2/new2", "n2")),
			},
			[]string{"d/", "d/new=n", "d/sub2/", "d/sub2/new2=n2", "other=x"},
		},
		{
			"opaque keeps this layer's files in pre-existing subdirs, drops the lower ones",
			[][]byte{
				layer(t, file("d/sub/old", "o")),
				layer(t, file("d/sub/mine", "m"), file("d/.wh..wh..opq", "")),
			},
			[]string{"d/", "d/sub/", "d/sub/mine=m"},
		},
		{
			"symlinks are stored as they are",
			[][]byte{layer(t, symlink("abs", "/etc/passwd"), symlink("rel", "../../x"), file("f", "1"))},
			[]string{"abs -> /etc/passwd", "f=1", "rel -> ../../x"},
		},
		{
			"entries through an in-image symlinked directory land inside it",
			[][]byte{
				layer(t, dir("usr/lib/"), symlink("lib", "usr/lib"), symlink("lib64", "/usr/lib")),
				layer(t, file("lib/a.so", "a"), file("lib64/b.so", "b")),
			},
			[]string{"lib -> usr/lib", "lib64 -> /usr/lib", "usr/", "usr/lib/", "usr/lib/a.so=a", "usr/lib/b.so=b"},
		},
		{
			"hard links share contents",
			[][]byte{layer(t, file("bin/busybox", "bb"), hardlink("bin/sh", "bin/busybox"))},
			[]string{"bin/", "bin/busybox=bb", "bin/sh=bb"},
		},
		{
			"leading ./ and / are the root",
			[][]byte{layer(t, dir("./"), file("./a", "1"), file("/b", "2"))},
			[]string{"a=1", "b=2"},
		},
		{
			"device nodes and fifos are skipped",
			[][]byte{layer(t, entry{name: "dev/null", typ: tar.TypeChar, mode: 0o666}, entry{name: "fifo", typ: tar.TypeFifo, mode: 0o644}, file("a", "1"))},
			[]string{"a=1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root, outside, err := apply(t, tc.layers...)
			if err != nil {
				t.Fatal(err)
			}
			onlyRootfs(t, outside)
			got := tree(t, root)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestUnpackHostile: layers that try to write outside the rootfs are
// refused or confined, and never touch anything beside it.
func TestUnpackHostile(t *testing.T) {
	tests := []struct {
		name    string
		layers  [][]byte
		wantErr error  // nil: applies, confined
		want    string // with wantErr nil: a file that must exist in the rootfs
	}{
		{"dot-dot entry", [][]byte{layer(t, file("../escape", "x"))}, oci.ErrBadLayer, ""},
		{"dot-dot inside", [][]byte{layer(t, file("a/../../escape", "x"))}, oci.ErrBadLayer, ""},
		{"dot-dot whiteout", [][]byte{layer(t, file("../.wh.rootfs", ""))}, oci.ErrBadLayer, ""},
		{"hard link to outside", [][]byte{layer(t, hardlink("l", "../../etc/passwd"))}, oci.ErrBadLayer, ""},
		{"hard link to absolute host path resolves inside", [][]byte{layer(t, hardlink("l", "/etc/passwd"))}, oci.ErrBadLayer, ""},
		{"hard link to a directory", [][]byte{layer(t, dir("d/"), hardlink("l", "d"))}, oci.ErrBadLayer, ""},
		{
			"write through a symlink pointing outside (relative)",
			[][]byte{layer(t, symlink("evil", "../../../../"), file("evil/escape", "x"))},
			nil, "escape",
		},
		{
			"write through a symlink pointing outside (absolute)",
			[][]byte{layer(t, symlink("evil", "/tmp")), layer(t, file("evil/escape", "x"))},
			nil, "tmp/escape",
		},
		{
			"chained symlinks",
			[][]byte{layer(t, symlink("a", "b"), symlink("b", "../c"), file("a/escape", "x"))},
			nil, "c/escape",
		},
		{
			"whiteout through a symlink outside",
			[][]byte{layer(t, symlink("evil", "/..")), layer(t, file("evil/.wh.rootfs", ""))},
			nil, "evil",
		},
		{
			"opaque through a symlink outside",
			[][]byte{layer(t, symlink("evil", "../../..")), layer(t, file("evil/.wh..wh..opq", ""), file("keep", "k"))},
			nil, "keep",
		},
		{"symlink loop", [][]byte{layer(t, symlink("a", "b"), symlink("b", "a"), file("a/x", "x"))}, oci.ErrBadLayer, ""},
		{"file as a parent", [][]byte{layer(t, file("f", "1"), file("f/x", "2"))}, oci.ErrBadLayer, ""},
		{"too large", [][]byte{layer(t, file("big", strings.Repeat("x", 2<<20)))}, oci.ErrTooLarge, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A file beside the rootfs that an escape would overwrite or
			// delete.
			root, outside, err := apply(t, tc.layers...)
			onlyRootfs(t, outside)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Lstat(filepath.Join(root, tc.want)); err != nil {
				t.Errorf("%s not in the rootfs: %v (tree %v)", tc.want, err, tree(t, root))
			}
		})
	}
}

// TestUnpackModes: permissions are kept except setuid and setgid.
func TestUnpackModes(t *testing.T) {
	root, _, err := apply(t, layer(t,
		entry{name: "suid", typ: tar.TypeReg, mode: 0o4755, data: "x"},
		entry{name: "ro", typ: tar.TypeReg, mode: 0o444, data: "x"},
		entry{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
	))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]fs.FileMode{"suid": 0o755, "ro": 0o444, "tmp": fs.ModeDir | fs.ModeSticky | 0o777} {
		st, err := os.Lstat(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, st.Mode(), want)
		}
	}
}

// FuzzUnpack applies arbitrary bytes as a layer (and then again, over
// itself): the unpacker may refuse them but must never panic, and must never
// create, change or remove anything outside the rootfs.
func FuzzUnpack(f *testing.F) {
	f.Add(layer(f, dir("d/"), file("d/a", "1"), symlink("s", "../.."), file("s/x", "2")))
	f.Add(layer(f, file(".wh.x", ""), file("d/.wh..wh..opq", ""), hardlink("h", "d/a")))
	f.Add(layer(f, symlink("evil", "/"), file("evil/etc/passwd", "root"), hardlink("l", "../x")))
	f.Add(layer(f, file("../x", "1")))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, data []byte) {
		outside := t.TempDir()
		sentinel := filepath.Join(outside, "sentinel")
		if err := os.WriteFile(sentinel, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		rootfs := filepath.Join(outside, "rootfs")
		os.Mkdir(rootfs, 0o755)
		u, err := oci.NewUnpacker(rootfs, oci.UnpackLimits{MaxBytes: 1 << 20, MaxEntries: 200})
		if err != nil {
			t.Fatal(err)
		}
		u.Apply(bytes.NewReader(data))
		u.Apply(bytes.NewReader(data))
		u.Close()
		ents, _ := os.ReadDir(outside)
		if len(ents) != 2 {
			t.Fatalf("entries beside the rootfs: %v", ents)
		}
		if b, err := os.ReadFile(sentinel); err != nil || string(b) != "keep" {
			t.Fatalf("the sentinel beside the rootfs changed: %q %v", b, err)
		}
		// Make everything removable for TempDir's cleanup.
		filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
}
