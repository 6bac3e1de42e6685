package seal

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rawTar builds an archive from headers, bypassing PackDir's rules; a
// regular file's content is its name repeated to hdr.Size.
func rawTar(t testing.TB, hdrs ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size > 0 {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func file(name string, size int64) tar.Header {
	return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}
}

// sandbox returns a directory to unpack into (not yet created) and a
// check that nothing appeared or changed beside it.
func sandbox(t *testing.T) (string, func()) {
	t.Helper()
	parent := t.TempDir()
	sentinel := filepath.Join(parent, "sentinel")
	os.WriteFile(sentinel, []byte("untouched"), 0o644)
	return filepath.Join(parent, "out"), func() {
		t.Helper()
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.Name() != "out" && e.Name() != "sentinel" {
				t.Errorf("unpack wrote outside its directory: %s", filepath.Join(parent, e.Name()))
			}
		}
		if b, err := os.ReadFile(sentinel); err != nil || string(b) != "untouched" {
			t.Errorf("file beside the target changed: %q, %v", b, err)
		}
		filepath.WalkDir(filepath.Join(parent, "out"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !d.Type().IsRegular() {
				t.Errorf("unpack created %s, which is %v", p, d.Type())
			}
			return nil
		})
	}
}

func TestUnpackDirRejects(t *testing.T) {
	tests := []struct {
		name string
		hdrs []tar.Header
		lim  Limits
		want string
	}{
		{"dot-dot", []tar.Header{file("../x", 1)}, Limits{}, `"../x": path contains ".."`},
		{"dot-dot deeper", []tar.Header{file("a/../../x", 1)}, Limits{}, `"a/../../x"`},
		{"dot-dot that cleans away", []tar.Header{file("a/../x", 1)}, Limits{}, `"a/../x"`},
		{"absolute", []tar.Header{file("/etc/x", 1)}, Limits{}, `"/etc/x": absolute path`},
		{"empty name", []tar.Header{file("", 1)}, Limits{}, "empty name"},
		{"symlink", []tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}, Limits{}, `"l" is a symlink (to "/etc/passwd")`},
		{"hard link", []tar.Header{file("a", 1), {Name: "b", Typeflag: tar.TypeLink, Linkname: "a"}}, Limits{}, `"b" is a hard link`},
		{"char device", []tar.Header{{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}, Limits{}, `"null" is a character device`},
		{"block device", []tar.Header{{Name: "sda", Typeflag: tar.TypeBlock}}, Limits{}, `"sda" is a block device`},
		{"fifo", []tar.Header{{Name: "p", Typeflag: tar.TypeFifo}}, Limits{}, `"p" is a named pipe`},
		{"duplicate", []tar.Header{file("a", 1), file("./a", 1)}, Limits{}, "appears twice"},
		{"too many entries", []tar.Header{file("a", 1), file("b", 1), file("c", 1)}, Limits{MaxEntries: 2}, "more than 2 entries"},
		{"too many bytes", []tar.Header{file("a", 600), file("b", 600)}, Limits{MaxBytes: 1000}, `entry "b" (600 bytes) would take the total past 1000 bytes`},
		{"file over dir", []tar.Header{{Name: "d/", Typeflag: tar.TypeDir}, file("d", 1)}, Limits{}, `"d"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, check := sandbox(t)
			defer check()
			err := UnpackDir(bytes.NewReader(rawTar(t, tt.hdrs...)), out, tt.lim)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("UnpackDir = %v; want an error containing %s", err, tt.want)
			}
			if strings.HasPrefix(tt.name, "too many") && !errors.Is(err, ErrLimit) {
				t.Errorf("error %v does not wrap ErrLimit", err)
			}
		})
	}
}

func TestUnpackDirLimitsAreInclusive(t *testing.T) {
	out, check := sandbox(t)
	defer check()
	archive := rawTar(t, file("a", 600), file("b", 400))
	if err := UnpackDir(bytes.NewReader(archive), out, Limits{MaxBytes: 1000, MaxEntries: 2}); err != nil {
		t.Fatalf("an archive exactly at its limits: %v", err)
	}
	if err := UnpackDir(bytes.NewReader(archive), t.TempDir(), Limits{MaxBytes: -1}); err == nil {
		t.Error("negative limit accepted")
	}
}

// Symlinks already in the target cannot be used to escape it.
func TestUnpackDirDoesNotFollowExistingSymlinksOut(t *testing.T) {
	out, check := sandbox(t)
	defer check()
	outside := t.TempDir()
	os.MkdirAll(out, 0o755)
	if err := os.Symlink(outside, filepath.Join(out, "link")); err != nil {
		t.Skipf("cannot create symlinks here: %v", err)
	}
	err := UnpackDir(bytes.NewReader(rawTar(t, file("link/pwned", 5))), out, Limits{})
	if err == nil {
		t.Error("UnpackDir through a symlink pointing outside succeeded")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("wrote outside through a symlink: %v", entries)
	}
	os.Remove(filepath.Join(out, "link")) // so check() sees only regular files
}

func TestUnpackDirStreamEnd(t *testing.T) {
	archive := rawTar(t, file("a", 10))
	if err := UnpackDir(bytes.NewReader(append(bytes.Clone(archive), make([]byte, 10240)...)), t.TempDir(), Limits{}); err != nil {
		t.Errorf("archive padded to a record: %v", err)
	}
	if err := UnpackDir(bytes.NewReader(append(bytes.Clone(archive), make([]byte, 1<<20)...)), t.TempDir(), Limits{}); err == nil {
		t.Error("1 MiB after the end of the archive accepted")
	}
	if err := UnpackDir(bytes.NewReader(archive[:512+5]), t.TempDir(), Limits{}); err == nil {
		t.Error("truncated archive accepted")
	}
}

// FuzzUnpackDir feeds arbitrary bytes to UnpackDir: it must never panic
// and never write outside its directory or create anything but regular
// files and directories.
func FuzzUnpackDir(f *testing.F) {
	f.Add(rawTar(f, tar.Header{Name: "d/", Typeflag: tar.TypeDir}, file("d/f", 3), file("g", 0)))
	f.Add(rawTar(f, file("../escape", 3)))
	f.Add(rawTar(f, file("/abs", 3)))
	f.Add(rawTar(f, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../../x"}, file("l/x", 1)))
	f.Add(rawTar(f, file("a", 1), tar.Header{Name: "b", Typeflag: tar.TypeLink, Linkname: "../a"}))
	f.Add(rawTar(f, file(strings.Repeat("long/", 40)+"name", 2)))
	f.Add([]byte("not a tar at all"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		out, check := sandbox(t)
		UnpackDir(bytes.NewReader(data), out, Limits{MaxBytes: 1 << 20, MaxEntries: 100})
		check()
	})
}
