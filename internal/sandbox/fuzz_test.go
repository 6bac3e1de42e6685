package sandbox_test

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// FuzzOutputPath feeds arbitrary declared outputs to CleanGuestPath and
// CollectOutputs over a work dir with symbolic links leading out of it,
// and checks that nothing from outside is ever collected and that an
// accepted path is canonical.
func FuzzOutputPath(f *testing.F) {
	for _, s := range []string{
		"/out", "/", "", "out", "/out/../../outside/secret.txt", "/../outside", "//out//a.txt",
		"/linkdir/secret.txt", "/linkdir", "/out/escape", "/out/abs/dir", "/outlink/../linkdir",
		"/out/./sub/loop/loop/b.txt", "/out\x00", `/out\..\..\outside`, "/...", "/out/...",
	} {
		f.Add(s)
	}
	work := workTree(f)
	f.Fuzz(func(t *testing.T, p string) {
		clean, err := sandbox.CleanGuestPath(p)
		if err == nil {
			if !strings.HasPrefix(clean, "/") || path.Clean(clean) != clean {
				t.Fatalf("CleanGuestPath(%q) = %q, not canonical", p, clean)
			}
			for _, el := range strings.Split(clean, "/") {
				if el == ".." {
					t.Fatalf("CleanGuestPath(%q) = %q keeps ..", p, clean)
				}
			}
			if rel, err := filepath.Rel(work, filepath.Join(work, filepath.FromSlash(clean))); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("CleanGuestPath(%q) = %q lies outside the root", p, clean)
			}
		}

		dst := t.TempDir()
		err = sandbox.CollectOutputs(work, []string{p}, dst, 1<<20)
		var oe *sandbox.OutputError
		if err != nil && !errors.As(err, &oe) {
			t.Fatalf("CollectOutputs(%q): %v is not the job's error", p, err)
		}
		filepath.WalkDir(dst, func(q string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if d.Type()&os.ModeSymlink != 0 {
				t.Fatalf("CollectOutputs(%q) collected a link %s", p, q)
			}
			if b, _ := os.ReadFile(q); string(b) == "SECRET" {
				t.Fatalf("CollectOutputs(%q) collected %s from outside the work dir", p, q)
			}
			return nil
		})
	})
}
