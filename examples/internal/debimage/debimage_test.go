package debimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseDepends(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [][]string
	}{
		{"", nil},
		{", ", nil},
		{"libc6 (>= 2.34)", [][]string{{"libc6"}}},
		{"python3 (<< 3.12), python3:any, libblas3 | libblas.so.3, python3.11:any", [][]string{{"python3"}, {"python3"}, {"libblas3", "libblas.so.3"}, {"python3.11"}}},
		{"foo [amd64], bar:amd64 (= 1) | baz", [][]string{{"foo"}, {"bar", "baz"}}},
		{"python3-numpy-abi9, media-types | mime-support", [][]string{{"python3-numpy-abi9"}, {"media-types", "mime-support"}}},
	} {
		if got := ParseDepends(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseDepends(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzParseDepends: whatever dpkg prints, the clauses hold names only:
// no spaces, versions, architectures or empty alternatives.
func FuzzParseDepends(f *testing.F) {
	f.Add("libc6 (>= 2.34), libblas3 | libblas.so.3, python3:any")
	f.Add("a|b|,,|c (")
	f.Add("foo [amd64] <!nocheck>")
	f.Fuzz(func(t *testing.T, s string) {
		for _, alts := range ParseDepends(s) {
			if len(alts) == 0 {
				t.Fatalf("%q: an empty clause", s)
			}
			for _, a := range alts {
				if a == "" || strings.ContainsAny(a, " ([,|:") {
					t.Fatalf("%q: alternative %q", s, a)
				}
			}
		}
	})
}

// requireDebian fails (CI=true) or skips where dpkg has no dash: the
// tests read this machine's installed packages.
func requireDebian(t *testing.T) {
	t.Helper()
	err := Installed("dash", "libc6")
	if err == nil {
		_, err = exec.LookPath("dpkg-query")
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(err)
	}
	t.Skip(err)
}

// TestResolveDash builds the root of Debian's dash: the shell, the
// loader and libc that it links (found through ldconfig, below /usr as
// on a merged-/usr system), no manual pages; the manifest names both
// packages; two builds give the same layer digest; and, as root, the
// shell runs in the root with nothing of this machine's.
func TestResolveDash(t *testing.T) {
	requireDebian(t)
	spec := Spec{
		Packages: []string{"dash"},
		Exclude:  func(p string) bool { return strings.HasPrefix(p, "/usr/share/") },
		Files:    map[string]File{"job/hello": {Data: []byte("echo hello from the root\n"), Mode: 0o755}},
	}
	root, err := Resolve(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"usr/bin/dash", "usr/lib64/ld-linux-x86-64.so.2", "usr/lib/x86_64-linux-gnu/libc.so.6", "bin", "lib64", "job/hello"} {
		if !root.Has(p) {
			t.Errorf("the root has no %s: %q", p, root.Paths())
		}
	}
	for _, p := range root.Paths() {
		if strings.HasPrefix(p, "usr/share/") || strings.HasPrefix(p, "lib/") || strings.HasPrefix(p, "bin/") {
			t.Errorf("the root holds %s: excluded, or not below /usr", p)
		}
	}
	var pkgs []string
	for _, m := range root.Manifest {
		pkgs = append(pkgs, strings.Fields(m)[0])
	}
	for _, want := range []string{"dash", "libc6"} {
		if !strings.Contains(" "+strings.Join(pkgs, " ")+" ", " "+want+" ") {
			t.Errorf("the manifest %q does not name %s", root.Manifest, want)
		}
	}
	digest := func(r *Root) string {
		l, err := r.Layer()
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	again, err := Resolve(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := digest(root), digest(again); a != b {
		t.Errorf("two builds: layer digests %s and %s", a, b)
	}
	var buf bytes.Buffer
	if err := root.WriteTar(&buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == ManifestPath {
			b, _ := io.ReadAll(tr)
			if !strings.Contains(string(b), "dash ") {
				t.Errorf("%s: %q", ManifestPath, b)
			}
		}
	}
	if os.Geteuid() != 0 {
		return
	}
	dir := t.TempDir()
	var tb bytes.Buffer
	if err := root.WriteTar(&tb); err != nil {
		t.Fatal(err)
	}
	untar := exec.Command("tar", "-xf", "-", "-C", dir)
	untar.Stdin = &tb
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	out, err := exec.Command("/usr/sbin/chroot", dir, "/bin/sh", "/job/hello").CombinedOutput()
	if err != nil || string(out) != "hello from the root\n" {
		t.Errorf("/bin/sh /job/hello in the root: %v, %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "etc", "ld.so.cache")); err == nil {
		t.Errorf("the root has an ld.so.cache: the loader would find the libraries by this machine's cache")
	}
}
