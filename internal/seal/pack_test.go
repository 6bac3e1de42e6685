package seal

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeTree creates files (path → content; a trailing "/" makes a
// directory) under dir in the given order.
func writeTree(t *testing.T, dir string, order []string, files map[string]string, perm os.FileMode, mtime time.Time) {
	t.Helper()
	for _, p := range order {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o700); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
				t.Fatal(err)
			}
			mode := perm
			if strings.HasSuffix(p, ".sh") {
				mode |= 0o100
			}
			if err := os.WriteFile(full, []byte(files[p]), mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(full, mode)
		}
		os.Chtimes(full, mtime, mtime)
	}
}

func pack(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := PackDir(&buf, dir); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type hdrSummary struct {
	Name string
	Mode int64
	Size int64
	Type byte
}

func listArchive(t *testing.T, b []byte) []hdrSummary {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	var out []hdrSummary
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("entry %q not normalised: uid %d gid %d uname %q gname %q mtime %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		out = append(out, hdrSummary{h.Name, h.Mode, h.Size, h.Typeflag})
	}
}

var sampleTree = map[string]string{
	"a.txt":          "alpha",
	"a/b.txt":        "bravo",
	"a/c/":           "",
	"a/c/deep.bin":   "\x00\x01\x02",
	"run.sh":         "#!/bin/sh\necho hi\n",
	"z/":             "",
	"empty":          "",
	"Upper.txt":      "sorted by bytes",
	"ünïcødé-näme.t": "pax or not, same bytes",
}

func TestPackDirDeterministic(t *testing.T) {
	order := slices.Sorted(func(yield func(string) bool) {
		for k := range sampleTree {
			if !yield(k) {
				return
			}
		}
	})
	reversed := slices.Clone(order)
	slices.Reverse(reversed)

	d1, d2 := t.TempDir(), t.TempDir()
	writeTree(t, d1, order, sampleTree, 0o644, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	writeTree(t, d2, reversed, sampleTree, 0o600, time.Now())
	b1, b2 := pack(t, d1), pack(t, d2)
	if !bytes.Equal(b1, b2) {
		t.Fatalf("same tree, different mtimes/modes/creation order: archives differ (%d vs %d bytes)", len(b1), len(b2))
	}

	want := []hdrSummary{
		{"Upper.txt", 0o644, 15, tar.TypeReg},
		{"a/", 0o755, 0, tar.TypeDir},
		{"a/b.txt", 0o644, 5, tar.TypeReg},
		{"a/c/", 0o755, 0, tar.TypeDir},
		{"a/c/deep.bin", 0o644, 3, tar.TypeReg},
		{"a.txt", 0o644, 5, tar.TypeReg},
		{"empty", 0o644, 0, tar.TypeReg},
		{"run.sh", 0o755, 18, tar.TypeReg},
		{"z/", 0o755, 0, tar.TypeDir},
		{"ünïcødé-näme.t", 0o644, 22, tar.TypeReg},
	}
	if got := listArchive(t, b1); !slices.Equal(got, want) {
		t.Errorf("entries:\n got %v\nwant %v", got, want)
	}

	// And the bytes do depend on what matters: content, names, exec bit.
	for _, change := range []func(dir string){
		func(d string) { os.WriteFile(filepath.Join(d, "a", "b.txt"), []byte("bravO"), 0o644) },
		func(d string) { os.Rename(filepath.Join(d, "empty"), filepath.Join(d, "empty2")) },
		func(d string) { os.Chmod(filepath.Join(d, "a.txt"), 0o744) },
		func(d string) { os.Mkdir(filepath.Join(d, "new"), 0o755) },
	} {
		change(d2)
		if b := pack(t, d2); bytes.Equal(b, b1) {
			t.Errorf("a change to the tree did not change the archive")
		}
		b1 = pack(t, d2)
	}
}

func TestPackDirRejectsSymlinks(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, []string{"sub/ok.txt"}, map[string]string{"sub/ok.txt": "ok"}, 0o644, time.Now())
	link := filepath.Join(dir, "sub", "escape")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Skipf("cannot create symlinks here: %v", err)
	}
	err := PackDir(io.Discard, dir)
	if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("PackDir = %v; want an error naming the symlink %s", err, link)
	}
	err = PackFiles(io.Discard, map[string]string{"/in": dir})
	if err == nil || !strings.Contains(err.Error(), link) {
		t.Fatalf("PackFiles = %v; want an error naming the symlink %s", err, link)
	}

	// A symlink named as the source itself is followed.
	os.Remove(link)
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(dir, alias); err != nil {
		t.Fatal(err)
	}
	if got, want := pack(t, alias), pack(t, dir); !bytes.Equal(got, want) {
		t.Error("packing through a symlink to the directory gave different bytes")
	}
}

func TestPackFiles(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, []string{"input.txt", "tool.sh", "data/x", "data/y/z"}, map[string]string{
		"input.txt": "the input", "tool.sh": "#!/bin/sh", "data/x": "x", "data/y/z": "z",
	}, 0o600, time.Now())
	var got bytes.Buffer
	err := PackFiles(&got, map[string]string{
		"/in/input.txt": filepath.Join(src, "input.txt"),
		"/in/data":      filepath.Join(src, "data"),
		"bin/tool.sh":   filepath.Join(src, "tool.sh"),
		"/in/more/":     filepath.Join(src, "data"), // a directory may appear twice
	})
	if err != nil {
		t.Fatal(err)
	}

	// The same tree laid out on disk packs to the same bytes.
	same := t.TempDir()
	writeTree(t, same, []string{"in/input.txt", "in/data/x", "in/data/y/z", "in/more/x", "in/more/y/z", "bin/tool.sh"}, map[string]string{
		"in/input.txt": "the input", "bin/tool.sh": "#!/bin/sh", "in/data/x": "x", "in/data/y/z": "z", "in/more/x": "x", "in/more/y/z": "z",
	}, 0o644, time.Now())
	if want := pack(t, same); !bytes.Equal(got.Bytes(), want) {
		t.Errorf("PackFiles differs from PackDir of the same tree:\n got %v\nwant %v", listArchive(t, got.Bytes()), listArchive(t, want))
	}

	// The whole directory at the root is PackDir.
	var root bytes.Buffer
	if err := PackFiles(&root, map[string]string{"/": same}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(root.Bytes(), pack(t, same)) {
		t.Error(`PackFiles({"/": dir}) differs from PackDir(dir)`)
	}
}

func TestPackFilesErrors(t *testing.T) {
	src := t.TempDir()
	file := filepath.Join(src, "f")
	os.WriteFile(file, []byte("f"), 0o644)
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"dot-dot", map[string]string{"/in/../x": file}, `"/in/../x": contains ".."`},
		{"empty archive path", map[string]string{"": file}, "empty archive path"},
		{"file at root", map[string]string{"/": file}, "needs an archive path"},
		{"missing source", map[string]string{"/x": filepath.Join(src, "nope")}, "nope"},
		{"same path twice", map[string]string{"/x": file, "x": file}, `archive path "/x" would come from both`},
		{"file under a file", map[string]string{"/x": file, "/x/y": file}, `archive path "/x"`},
		{"dir over a file", map[string]string{"/d": src, "/d/f": file}, `archive path "/d/f"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := PackFiles(io.Discard, tt.files)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("PackFiles = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestPackUnpackRoundTrip(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, slices.Sorted(func(yield func(string) bool) {
		for k := range sampleTree {
			if !yield(k) {
				return
			}
		}
	}), sampleTree, 0o644, time.Now())
	archive := pack(t, src)
	dst := filepath.Join(t.TempDir(), "new", "dir")
	if err := UnpackDir(bytes.NewReader(archive), dst, Limits{}); err != nil {
		t.Fatal(err)
	}
	if again := pack(t, dst); !bytes.Equal(again, archive) {
		t.Errorf("pack(unpack(pack(tree))) != pack(tree):\n got %v\nwant %v", listArchive(t, again), listArchive(t, archive))
	}
	if info, err := os.Stat(filepath.Join(dst, "run.sh")); err != nil || info.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh lost its execute bit: %v, %v", info.Mode(), err)
	}
}
