package provider

import (
	"errors"
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
// different, a judge that never ends runs out of its fuel (no verdict:
// errJudgeOutOfFuel) at the same count every time, and a judge that tries
// to change its trees or read beyond them cannot: the trees are as they
// were, the secret beside them unread. A judge stopped by the wall-clock
// bound before its fuel is spent gives no verdict either, and is not taken
// for running out of fuel.
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
	if !ex.MetersFuel() {
		t.Fatalf("the wasm executor's engine %s counts no fuel: this build lacks wasmtime (cgo)", wasm.DefaultEngine)
	}
	const fuel = 300_000_000
	limit := judgeWallTime(fuel)
	pj := &programJudge{run: ex, module: module, job: 7, dir: scratch, fuel: fuel, limit: limit}
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
		{"loop", false, "out of fuel (budget 300000000)"},
		{"loop", false, "out of fuel (budget 300000000)"},
		{"write", false, "exited 1"},
		{"escape", false, "exited 1"},
	} {
		a, b := tree(c.mode), tree("same")
		t0 := time.Now()
		same, why, err := pj.same(t.Context(), 0, 1, a, b)
		took := time.Since(t0)
		t.Logf("%s: same %v in %s: %s (%v)", c.mode, same, took.Round(time.Millisecond), why, err)
		if c.mode == "loop" {
			if !errors.Is(err, errJudgeOutOfFuel) {
				t.Errorf("a judge that never ends: %v, want errJudgeOutOfFuel", err)
			}
			if took > limit {
				t.Errorf("a judge that never ends took %s to run out of fuel (wall-clock bound %s)", took, limit)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", c.mode, err)
		}
		if same != c.same || !strings.Contains(why, c.why) {
			t.Errorf("%s: same %v (%q), want %v (%q)", c.mode, same, why, c.same, c.why)
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

	// The wall-clock bound, with fuel to spare: no verdict, and not
	// out of fuel.
	short := *pj
	short.fuel, short.limit = 1<<50, 500*time.Millisecond
	same, why, err := short.same(t.Context(), 0, 1, tree("loop"), tree("same"))
	t.Logf("loop past the wall-clock bound: same %v: %s (%v)", same, why, err)
	if err == nil || errors.Is(err, errJudgeOutOfFuel) || !strings.Contains(why, "timed out") {
		t.Errorf("a judge stopped by the wall-clock bound: same %v, %q, %v; want an error that is not errJudgeOutOfFuel", same, why, err)
	}
}

// TestJudgeWallTime: the wall-clock bound is the fuel at judgeMinFuelRate,
// within [minJudgeWallTime, judgeTimeout].
func TestJudgeWallTime(t *testing.T) {
	for _, c := range []struct {
		fuel uint64
		want time.Duration
	}{
		{1, minJudgeWallTime},
		{60 * judgeMinFuelRate, time.Minute},
		{100 * judgeMinFuelRate, 100 * time.Second},
		{5_000_000_000, 100 * time.Second},
		{1 << 63, judgeTimeout},
	} {
		if got := judgeWallTime(c.fuel); got != c.want {
			t.Errorf("judgeWallTime(%d) = %s, want %s", c.fuel, got, c.want)
		}
	}
}
