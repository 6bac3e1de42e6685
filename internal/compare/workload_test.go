package compare_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/compare"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// TestFloatReplicas runs a real float job (testdata/fsum: sums in an order
// shuffled per replica) in the wasm sandbox, as providers would: honest
// replicas differ in their bytes but are judged equivalent; a replica that
// skips half the terms or adds in float32 is not.
func TestFloatReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a wasm job")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the wasip1 guest")
	}
	module := filepath.Join(t.TempDir(), "fsum.wasm")
	build := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s", "-o", module, "./testdata/fsum")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fsum: %v\n%s", err, out)
	}
	ex, err := wasm.New(filepath.Join(t.TempDir(), "cache"), wasm.WithSpares(0))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	run := func(seed int, cheat ...string) string {
		t.Helper()
		work := filepath.Join(t.TempDir(), "work")
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := ex.Run(t.Context(), &sandbox.Job{
			ID: "fsum-" + strconv.Itoa(seed), Module: module, WorkDir: work,
			Args:          append(cheat, strconv.Itoa(seed), "20000"),
			Outputs:       []string{"/out"},
			Limits:        sandbox.Limits{Timeout: time.Minute, MemoryBytes: 256 << 20},
			Deterministic: true,
		}, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(res.OutputDir) })
		if res.Failed || res.ExitCode != 0 {
			t.Fatalf("fsum %v %d: exit %d, %s", cheat, seed, res.ExitCode, res.Reason)
		}
		return res.OutputDir
	}
	honest1, honest2 := run(1), run(2)
	if same, _ := os.ReadFile(filepath.Join(honest1, "out", "sums.f64")); string(same) == string(must(os.ReadFile(filepath.Join(honest2, "out", "sums.f64")))) {
		t.Fatal("the two honest replicas wrote the same bytes: the test would not show a tolerance at work")
	}
	tol := compare.Tolerance{RTol: 1e-5, ATol: 1e-8}
	d, err := compare.Trees(honest1, honest2, tol, compare.DefaultLimits)
	if err != nil || d != nil {
		t.Errorf("honest replicas with different summation orders: %v, %v; want equivalent", d, err)
	}
	if d, _ := compare.Trees(honest1, honest2, compare.Tolerance{}, compare.DefaultLimits); d == nil {
		t.Error("honest replicas judged equal with zero tolerance: their outputs do not differ in the low bits")
	}
	for _, cheat := range []string{"-half", "-f32"} {
		c := run(3, cheat)
		for _, h := range []string{honest1, honest2} {
			d, err := compare.Trees(h, c, tol, compare.DefaultLimits)
			if err != nil || d == nil {
				t.Errorf("an honest replica against one run with %s: %v, %v; want a difference", cheat, d, err)
			} else {
				t.Logf("%s caught: %s", cheat, d)
			}
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
