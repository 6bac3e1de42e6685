package sandbox_test

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/seal"
)

// workTree makes base/work holding outputs, symbolic links that stay inside
// and that lead out, and base/outside/secret.txt next to it. It returns the
// work dir.
func workTree(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	work := filepath.Join(base, "work")
	files := map[string]string{
		"work/out/a.txt":        "A",
		"work/out/sub/b.txt":    "BB",
		"work/result.txt":       "R",
		"work/in/input.txt":     "input",
		"outside/secret.txt":    "SECRET",
		"outside/dir/other.txt": "SECRET",
	}
	for name, content := range files {
		p := filepath.Join(base, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"work/out/escape":   "../../outside/secret.txt",
		"work/out/abs":      filepath.Join(base, "outside"),
		"work/out/inside":   "a.txt",
		"work/linkdir":      "../outside",
		"work/outlink":      "out",
		"work/result2.txt":  "result.txt",
		"work/out/sub/loop": "../sub",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(base, filepath.FromSlash(name))); err != nil {
			t.Skip("cannot create symbolic links here:", err)
		}
	}
	return work
}

// tree lists the regular files under dir with their contents.
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return got
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t.Errorf("collected a symbolic link: %s", p)
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			got[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCollectOutputs(t *testing.T) {
	work := workTree(t)
	outFiles := map[string]string{"out/a.txt": "A", "out/sub/b.txt": "BB"}
	tests := []collectTest{
		{name: "directory", outputs: []string{"/out"}, want: outFiles},
		{name: "nothing declared", outputs: nil, want: map[string]string{}},
		{name: "file", outputs: []string{"/result.txt"}, want: map[string]string{"result.txt": "R"}},
		{name: "nested outputs once", outputs: []string{"/out/a.txt", "/out", "/out/sub"}, want: outFiles},
		{name: "unclean path", outputs: []string{"//out/./sub/"}, want: map[string]string{"out/sub/b.txt": "BB"}},
		{name: "whole work dir", outputs: []string{"/"}, want: map[string]string{
			"out/a.txt": "A", "out/sub/b.txt": "BB", "result.txt": "R", "in/input.txt": "input"}},
		{name: "through a link inside", outputs: []string{"/outlink/a.txt"}, want: map[string]string{"outlink/a.txt": "A"}},
		// /out, a.txt, sub and b.txt: 4 entries of 512 B, and 3 bytes.
		{name: "within limit", outputs: []string{"/out"}, max: 4*sandbox.OutputEntryBytes + 3, want: outFiles},
		{name: "over limit", outputs: []string{"/out"}, max: 4*sandbox.OutputEntryBytes + 2, wantErr: sandbox.ErrOutputTooLarge, errMsg: "output /out/sub/b.txt: outputs exceed the disk limit of 2 KiB"},
		{name: "entries over limit", outputs: []string{"/out"}, max: 3*sandbox.OutputEntryBytes + 3, wantErr: sandbox.ErrOutputTooLarge, errMsg: "output /out/sub/b.txt: outputs exceed the disk limit"},
		{name: "missing", outputs: []string{"/out", "/nope"}, wantErr: sandbox.ErrOutputMissing, errMsg: "output /nope missing"},
		{name: "declared symlink", outputs: []string{"/result2.txt"}, wantErr: sandbox.ErrOutputSymlink},
		{name: "symlink to outside dir", outputs: []string{"/linkdir"}, wantErr: sandbox.ErrOutputSymlink},
		{name: "through a link outside", outputs: []string{"/linkdir/secret.txt"}, wantErr: sandbox.ErrOutputEscapes},
		{name: "through an absolute link", outputs: []string{"/out/abs/secret.txt"}, wantErr: sandbox.ErrOutputEscapes},
		{name: "relative", outputs: []string{"out"}, wantErr: sandbox.ErrOutputPath, errMsg: "not absolute"},
		{name: "dot-dot", outputs: []string{"/../outside/secret.txt"}, wantErr: sandbox.ErrOutputPath},
		{name: "dot-dot inside", outputs: []string{"/out/../result.txt"}, wantErr: sandbox.ErrOutputPath},
		{name: "empty", outputs: []string{""}, wantErr: sandbox.ErrOutputPath},
	}
	for _, link := range []bool{true, false} {
		sandbox.SetLinkOutputs(t, link)
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/link=%v", tc.name, link), func(t *testing.T) { tc.check(t, work) })
		}
	}
}

// collectTest is a case of TestCollectOutputs.
type collectTest struct {
	name    string
	outputs []string
	max     uint64
	want    map[string]string // files collected
	wantErr error             // an ErrOutput… value; nil for success
	errMsg  string            // a substring of the error
}

// check collects tc.outputs from work into a new directory and checks
// what it got.
func (tc collectTest) check(t *testing.T, work string) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "dst")
	err := sandbox.CollectOutputs(work, tc.outputs, dst, tc.max)
	if tc.wantErr == nil {
		if err != nil {
			t.Fatalf("got %v, want success", err)
		}
		if got := tree(t, dst); !maps.Equal(got, tc.want) {
			t.Errorf("collected %v, want %v", got, tc.want)
		}
		return
	}
	var oe *sandbox.OutputError
	if !errors.As(err, &oe) || !errors.Is(err, tc.wantErr) {
		t.Fatalf("got %v, want an *OutputError wrapping %v", err, tc.wantErr)
	}
	if !strings.Contains(err.Error(), tc.errMsg) {
		t.Errorf("got %q, want it to contain %q", err, tc.errMsg)
	}
	for p, content := range tree(t, dst) {
		if content == "SECRET" {
			t.Errorf("collected %s from outside the work dir", p)
		}
	}
}

// TestCollectOutputsLinks: a job's own output file is collected as a hard
// link to it (O(1), whatever its size: issue 36), with the mode a copy gets;
// a file with another name, here one outside the work dir, is copied, so
// that nothing the provider later does to the collected outputs reaches
// that other file; neither is a symbolic link to outside collected.
func TestCollectOutputsLinks(t *testing.T) {
	work := workTree(t)
	outside := filepath.Join(filepath.Dir(work), "outside", "secret.txt")
	if err := os.Chmod(outside, 0o600); err != nil {
		t.Fatal(err)
	}
	files := map[string]fs.FileMode{"out/own.bin": 0o600, "out/tool": 0o710}
	for name, mode := range files {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(name), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	if err := os.Link(outside, filepath.Join(work, "out", "hardlink")); err != nil {
		t.Skip("cannot create hard links here:", err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	if err := sandbox.CollectOutputs(work, []string{"/out"}, dst, 0); err != nil {
		t.Fatal(err)
	}
	same := func(a, b string) bool {
		t.Helper()
		sa, err := os.Stat(a)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := os.Stat(b)
		if err != nil {
			t.Fatal(err)
		}
		return os.SameFile(sa, sb)
	}
	for name, want := range map[string]fs.FileMode{"out/own.bin": 0o644, "out/tool": 0o755, "out/hardlink": 0o644} {
		got := filepath.Join(dst, name)
		st, err := os.Lstat(got)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, st.Mode(), want)
		}
		linked := same(got, filepath.Join(work, name))
		if wantLinked := name != "out/hardlink"; linked != wantLinked {
			t.Errorf("%s: collected as a hard link %v, want %v", name, linked, wantLinked)
		}
	}
	if same(filepath.Join(dst, "out", "hardlink"), outside) {
		t.Errorf("the collected output is the file outside the work dir")
	}
	if st, err := os.Stat(outside); err != nil || st.Mode() != 0o600 {
		t.Errorf("the file outside the work dir: %v, %v; want it untouched (0600)", st.Mode(), err)
	}
	// Writing the collected copy does not reach the file outside.
	if err := os.WriteFile(filepath.Join(dst, "out", "hardlink"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "SECRET" {
		t.Errorf("the file outside the work dir reads %q, %v; want SECRET", b, err)
	}
	// A symbolic link to outside is still refused, declared or found.
	for _, out := range []string{"/out/escape", "/linkdir"} {
		err := sandbox.CollectOutputs(work, []string{out}, filepath.Join(t.TempDir(), "dst"), 0)
		if !errors.Is(err, sandbox.ErrOutputSymlink) {
			t.Errorf("%s: got %v, want ErrOutputSymlink", out, err)
		}
	}
}

// TestCollectOutputsAcrossFileSystems: where the destination is on
// another file system, where no hard link can be made, outputs are copied.
func TestCollectOutputsAcrossFileSystems(t *testing.T) {
	work := workTree(t)
	other, err := os.MkdirTemp("/dev/shm", "collect-")
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	defer os.RemoveAll(other)
	if a, b := deviceOf(t, work), deviceOf(t, other); a == b {
		t.Skip("/dev/shm is on the same file system as", work)
	}
	dst := filepath.Join(other, "dst")
	if err := sandbox.CollectOutputs(work, []string{"/out"}, dst, 0); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, dst), map[string]string{"out/a.txt": "A", "out/sub/b.txt": "BB"}; !maps.Equal(got, want) {
		t.Errorf("collected %v, want %v", got, want)
	}
}

func deviceOf(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no device numbers here")
	}
	return uint64(sys.Dev)
}

// BenchmarkCollectOutputs collects 256 MiB in 8 files, copied and linked,
// in the same run. It reports the time a collection takes (the outputs are
// removed between iterations, their pages flushed with the rest).
func BenchmarkCollectOutputs(b *testing.B) {
	const files, size = 8, 32 << 20
	work := b.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "out"), 0o755); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for i := range files {
		if err := os.WriteFile(filepath.Join(work, "out", strconv.Itoa(i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, link := range []bool{false, true} {
		name := "copy"
		if link {
			name = "link"
		}
		b.Run(name, func(b *testing.B) {
			sandbox.SetLinkOutputs(b, link)
			b.SetBytes(files * size)
			for b.Loop() {
				dst := filepath.Join(work, "dst")
				if err := sandbox.CollectOutputs(work, []string{"/out"}, dst, 0); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := os.RemoveAll(dst); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

func TestCleanGuestPath(t *testing.T) {
	tests := []struct {
		in, want string // want "" for an error
	}{
		{"/out", "/out"},
		{"/", "/"},
		{"//out//x/", "/out/x"},
		{"/./out/.", "/out"},
		{"/out/..", ""},
		{"/..", ""},
		{"/a/../b", ""},
		{"/a..b", "/a..b"},
		{"/...", "/..."},
		{"out", ""},
		{"./out", ""},
		{"", ""},
		{"/out\x00", ""},
		{`/out\..\..`, ""},
		{"/" + strings.Repeat("a", 5000), ""},
	}
	for _, tc := range tests {
		got, err := sandbox.CleanGuestPath(tc.in)
		if tc.want == "" {
			if err == nil || !errors.Is(err, sandbox.ErrOutputPath) {
				t.Errorf("CleanGuestPath(%q) = %q, %v; want an ErrOutputPath", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CleanGuestPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestFinish(t *testing.T) {
	work := workTree(t)
	tests := []struct {
		name       string
		outputs    []string
		res        sandbox.Result
		wantFailed bool
		wantReason string
		wantFiles  []string
	}{
		{"clean", []string{"/out"}, sandbox.Result{Reason: "exited 0"}, false, "exited 0", []string{"out/a.txt", "out/sub/b.txt"}},
		{"missing output fails a clean exit", []string{"/nope"}, sandbox.Result{Reason: "exited 0"}, true, "output /nope missing", nil},
		{"a failure keeps its reason", []string{"/nope"}, sandbox.Result{ExitCode: 3, Failed: true, Reason: "exited 3"}, true, "exited 3", nil},
		{"a failure keeps its outputs", []string{"/result.txt"}, sandbox.Result{ExitCode: 3, Failed: true, Reason: "exited 3"}, true, "exited 3", []string{"result.txt"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := &sandbox.Job{ID: "j", WorkDir: work, Outputs: tc.outputs, Limits: sandbox.Limits{Timeout: time.Second}}
			res := tc.res
			if err := sandbox.Finish(job, &res); err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(res.OutputDir)
			if filepath.Dir(res.OutputDir) != filepath.Dir(work) {
				t.Errorf("OutputDir %s is not beside the work dir %s", res.OutputDir, work)
			}
			if res.Failed != tc.wantFailed || res.Reason != tc.wantReason || res.Finished.IsZero() {
				t.Errorf("got failed %v reason %q finished %v; want %v %q", res.Failed, res.Reason, res.Finished, tc.wantFailed, tc.wantReason)
			}
			got := slices.Sorted(maps.Keys(tree(t, res.OutputDir)))
			if !slices.Equal(got, tc.wantFiles) {
				t.Errorf("collected %v, want %v", got, tc.wantFiles)
			}
		})
	}
}

// TestOutputsBudgetFileCounts: 200,000 empty files once passed a 1 MiB
// disk limit (they weigh 0 bytes) and the consumer paid for outputs that it
// could not unpack. Each file and directory now costs OutputEntryBytes
// against the limit, and no job's outputs hold more than MaxOutputEntries
// whatever its limit; Finish turns either into a failed run whose reason
// says so. The cap is lowered to 3,000 here so as not to write 100,000
// files; TestOutputEntryCapIsWhatConsumersUnpack ties the real one.
func TestOutputsBudgetFileCounts(t *testing.T) {
	const maxEntries = 3_000
	sandbox.SetMaxOutputEntries(t, maxEntries)
	work := t.TempDir()
	out := filepath.Join(work, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// maxEntries empty files: with /out that is one too many.
	for i := range maxEntries {
		if err := os.WriteFile(filepath.Join(out, strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		disk    uint64
		wantErr error
	}{
		{"1 MiB", 1 << 20, sandbox.ErrOutputTooLarge}, // 2,048 entries of 512 B
		{"1 TiB", 1 << 40, sandbox.ErrOutputTooMany},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &sandbox.Job{WorkDir: work, Outputs: []string{"/out"}, Limits: sandbox.Limits{DiskBytes: tc.disk}}
			res := &sandbox.Result{}
			if err := sandbox.Finish(job, res); err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(res.OutputDir)
			if want := strings.TrimPrefix(tc.wantErr.Error(), "outputs "); !res.Failed || !strings.Contains(res.Reason, want) {
				t.Fatalf("Finish: failed %v reason %q, want the job failed saying %q", res.Failed, res.Reason, want)
			}
		})
	}
	// One file fewer fits a large limit.
	if err := os.Remove(filepath.Join(out, "0")); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.CollectOutputs(work, []string{"/out"}, t.TempDir(), 1<<40); err != nil {
		t.Fatalf("%d entries: %v", maxEntries, err)
	}
}

// TestOutputEntryCapIsWhatConsumersUnpack: a job's outputs may hold no more
// entries than a consumer's unpack accepts, so that no consumer pays for
// outputs it cannot open.
func TestOutputEntryCapIsWhatConsumersUnpack(t *testing.T) {
	if sandbox.MaxOutputEntries != seal.DefaultMaxEntries {
		t.Fatalf("MaxOutputEntries %d, seal.DefaultMaxEntries %d: they must agree", sandbox.MaxOutputEntries, seal.DefaultMaxEntries)
	}
}

// TestZeroDiskIsFinite: Limits with no disk get DefaultDiskBytes, not an
// unlimited budget.
func TestZeroDiskIsFinite(t *testing.T) {
	if got := (sandbox.Limits{}).Disk(); got != sandbox.DefaultDiskBytes || got == 0 {
		t.Fatalf("Limits{}.Disk() = %d, want %d", got, sandbox.DefaultDiskBytes)
	}
	if got := (sandbox.Limits{DiskBytes: 5 << 20}).Disk(); got != 5<<20 {
		t.Fatalf("Disk() = %d, want the job's 5 MiB", got)
	}
}
