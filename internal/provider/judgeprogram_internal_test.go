package provider

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// TestProgramJudge runs a real judge program (testdata/probejudge) in the
// wasm executor over pairs of trees: exit 0 is the same, exit 1 or a panic
// different, a judge that never ends is different once its time is up, and
// a judge that tries to change its trees or read beyond them cannot: the
// trees are as they were, the secret beside them unread.
func TestProgramJudge(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go toolchain to build the wasip1 judge: %v", err)
	}
	dir := t.TempDir()
	module := filepath.Join(dir, "probe.wasm")
	build := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s", "-o", module, "./testdata/probejudge")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build probejudge: %v\n%s", err, out)
	}
	ex, err := wasm.New(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	scratch := filepath.Join(dir, "judge")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	// A secret beside the judge's work dirs, where ../secret would lead
	// from the root of one.
	if err := os.WriteFile(filepath.Join(scratch, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	const limit = 2 * time.Second
	pj := &programJudge{run: ex, module: module, job: 7, dir: scratch, limit: limit}
	tree := func(mode string) string {
		d := filepath.Join(t.TempDir(), "tree")
		if err := os.MkdirAll(filepath.Join(d, "out"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string]string{"mode": mode, "out/data.txt": "1 2 3\n"} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	for _, c := range []struct {
		mode string
		same bool
		why  string
	}{
		{"same", true, ""},
		{"diff", false, "exited 1"},
		{"panic", false, "judge panics"},
		{"loop", false, "timed out"},
		{"write", false, "exited 1"},
		{"escape", false, "exited 1"},
	} {
		a, b := tree(c.mode), tree("same")
		t0 := time.Now()
		same, why, err := pj.same(t.Context(), 0, 1, a, b)
		took := time.Since(t0)
		t.Logf("%s: same %v in %s: %s", c.mode, same, took.Round(time.Millisecond), why)
		if err != nil {
			t.Fatalf("%s: %v", c.mode, err)
		}
		if same != c.same || !strings.Contains(why, c.why) {
			t.Errorf("%s: same %v (%q), want %v (%q)", c.mode, same, why, c.same, c.why)
		}
		if c.mode == "loop" && took > limit+30*time.Second {
			t.Errorf("a judge that never ends took %s to be judged (limit %s)", took, limit)
		}
		for d, want := range map[string]string{a: c.mode, b: "same"} {
			if got, err := os.ReadFile(filepath.Join(d, "mode")); err != nil || string(got) != want {
				t.Errorf("%s: %s/mode now %q, %v; want %q", c.mode, d, got, err, want)
			}
			entries, _ := os.ReadDir(d)
			if len(entries) != 2 {
				t.Errorf("%s: the tree %s now holds %d entries; want its 2", c.mode, d, len(entries))
			}
		}
		if entries, _ := os.ReadDir(scratch); len(entries) != 1 {
			t.Errorf("%s: the pair's work dir was left behind: %v", c.mode, entries)
		}
	}
}

// TestJudgePairTime: each run's time fits half the window with the pairs
// it has to judge, within [minJudgePairTime, maxJudgePairTime].
func TestJudgePairTime(t *testing.T) {
	for _, c := range []struct {
		reveal time.Duration
		pairs  int
		want   time.Duration
	}{
		{120 * time.Second, 1, time.Minute},
		{120 * time.Second, 3, 20 * time.Second},
		{120 * time.Second, 55, 120 * time.Second / 110},
		{10 * time.Second, 55, time.Second},
		{time.Hour, 3, 50 * time.Second}, // judgeTimeout/6
		{120 * time.Second, 0, time.Minute},
	} {
		if got := judgePairTime(c.reveal, c.pairs); got != c.want {
			t.Errorf("judgePairTime(%s, %d) = %s, want %s", c.reveal, c.pairs, got, c.want)
		}
	}
}
