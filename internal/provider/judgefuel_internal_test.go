package provider

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// buildWasip1 builds the Go main package pkg for wasip1 into dir.
func buildWasip1(tb testing.TB, dir, name, pkg string) string {
	tb.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		tb.Fatalf("no go toolchain to build the wasip1 %s: %v", name, err)
	}
	out := filepath.Join(dir, name+".wasm")
	build := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s", "-o", out, pkg)
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", pkg, err, msg)
	}
	return out
}

// fsumJudgeSetup is a fuel-counting executor, fsumjudge, and a work
// directory whose a/ and b/ are two honest replicas' outputs of
// internal/compare/testdata/fsum (seeds 101 and 102, 20,000 terms: what
// TestFloatJobJudgedByProgram judges), or, with large, two trees of 1M
// float64 values in .f64 and 100,000 numbers as text that differ in the low
// bits.
func fsumJudgeSetup(tb testing.TB, large bool) (ex *wasm.Executor, judge, work string) {
	tb.Helper()
	dir := tb.TempDir()
	ex, err := wasm.New(filepath.Join(dir, "cache"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ex.Close() })
	if !ex.MetersFuel() {
		tb.Fatalf("the wasm executor's engine %s counts no fuel: this build lacks wasmtime (cgo)", wasm.DefaultEngine)
	}
	judge = buildWasip1(tb, dir, "fsumjudge", "../../examples/judges/fsumjudge")
	work = filepath.Join(dir, "work")
	if large {
		for i, side := range []string{"a", "b"} {
			out := filepath.Join(work, side, "out")
			if err := os.MkdirAll(out, 0o755); err != nil {
				tb.Fatal(err)
			}
			f64 := make([]byte, 8<<20)
			var txt strings.Builder
			for k := range 1 << 20 {
				v := 1/float64(k+1) + float64(i)*1e-12/float64(k+1)
				binary.LittleEndian.PutUint64(f64[8*k:], math.Float64bits(v))
				if k < 100_000 {
					txt.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
					txt.WriteByte('\n')
				}
			}
			if err := os.WriteFile(filepath.Join(out, "sums.f64"), f64, 0o644); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "total.txt"), []byte(txt.String()), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		return ex, judge, work
	}
	fsum := buildWasip1(tb, dir, "fsum", "../compare/testdata/fsum")
	for i, side := range []string{"a", "b"} {
		jw := filepath.Join(dir, "run-"+side)
		if err := os.MkdirAll(jw, 0o755); err != nil {
			tb.Fatal(err)
		}
		res, err := ex.Run(tb.Context(), &sandbox.Job{
			ID: "fsum-" + side, Module: fsum, Args: []string{strconv.Itoa(101 + i), "20000"}, WorkDir: jw,
			Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: time.Minute, MemoryBytes: 256 << 20}, Deterministic: true,
		}, io.Discard)
		if err != nil || res.Failed {
			tb.Fatalf("fsum %s: %v %+v", side, err, res)
		}
		if err := os.MkdirAll(filepath.Join(work, side), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(filepath.Join(res.OutputDir, "out"), filepath.Join(work, side, "out")); err != nil {
			tb.Fatal(err)
		}
		os.RemoveAll(res.OutputDir)
	}
	return ex, judge, work
}

func fsumJudgeJob(judge, work string) *sandbox.Job {
	return &sandbox.Job{
		ID: "7/judge/0-1", Module: judge, Args: []string{"/a", "/b"}, WorkDir: work,
		Limits: sandbox.Limits{Timeout: time.Minute, MemoryBytes: judgeMemory, CPU: 1, DiskBytes: 1}, Deterministic: true,
	}
}

// TestFsumJudgeFuel: examples/judges/fsumjudge judges two honest fsum
// replicas the same with fuel, using the same fuel on every run and a
// small fraction of the default params.max_judge_fuel; and judges as it
// does without fuel.
func TestFsumJudgeFuel(t *testing.T) {
	ex, judge, work := fsumJudgeSetup(t, false)
	budget := ledger.DefaultParams().MaxJudgeFuel
	var used []uint64
	for range 2 {
		res, err := ex.RunJudge(t.Context(), fsumJudgeJob(judge, work), budget, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(res.OutputDir)
		t.Logf("fsumjudge with fuel: %s, %d fuel of %d (%.4f%%), metered %s", res.Reason, res.FuelUsed, budget, 100*float64(res.FuelUsed)/float64(budget), res.Metered)
		if res.ExitCode != 0 || res.Failed || res.OutOfFuel {
			t.Fatalf("fsumjudge on two honest replicas: %+v; want exit 0", res.Result)
		}
		used = append(used, res.FuelUsed)
	}
	if used[0] != used[1] || used[0] == 0 {
		t.Errorf("fuel used %v; want one nonzero count", used)
	}
	if used[0] > budget/100 {
		t.Errorf("fsumjudge used %d fuel, more than 1%% of the default max_judge_fuel %d", used[0], budget)
	}
	res, err := ex.RunReadOnly(t.Context(), fsumJudgeJob(judge, work), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(res.OutputDir)
	if res.ExitCode != 0 || res.Failed {
		t.Errorf("fsumjudge without fuel: %+v; want exit 0 as with fuel", res)
	}
}

// BenchmarkFsumJudgeFuel measures what fuel costs a judge:
// examples/judges/fsumjudge over two trees, with fuel (RunJudge) and
// without (RunReadOnly), in one run. metered-ns/op is the guest's own
// time (from its first instruction, without the sandbox process's start
// and module load); fuel/op the fuel it used.
func BenchmarkFsumJudgeFuel(b *testing.B) {
	for _, large := range []bool{false, true} {
		ex, judge, work := fsumJudgeSetup(b, large)
		size := "fsum"
		if large {
			size = "8MiB"
		}
		for _, fuel := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/fuel=%v", size, fuel), func(b *testing.B) {
				var metered time.Duration
				var used uint64
				for b.Loop() {
					var res *sandbox.Result
					if fuel {
						jr, err := ex.RunJudge(b.Context(), fsumJudgeJob(judge, work), 1<<40, io.Discard)
						if err != nil {
							b.Fatal(err)
						}
						res, used = jr.Result, jr.FuelUsed
					} else {
						var err error
						if res, err = ex.RunReadOnly(b.Context(), fsumJudgeJob(judge, work), io.Discard); err != nil {
							b.Fatal(err)
						}
					}
					os.RemoveAll(res.OutputDir)
					if res.ExitCode != 0 {
						b.Fatalf("fsumjudge: %+v", res)
					}
					metered += res.Metered
				}
				b.ReportMetric(float64(metered.Nanoseconds())/float64(b.N), "metered-ns/op")
				if fuel {
					b.ReportMetric(float64(used), "fuel/op")
				}
			})
		}
	}
}

// TestJudgeRefusal: an agent takes a job with a judge program only with a
// wasm executor whose engine counts fuel (through the metrics wrapper
// too); on wazero, or without a wasm executor, it says why and hands the
// job back. Jobs without a judge program are never refused.
func TestJudgeRefusal(t *testing.T) {
	judged := &ledger.Job{ID: 1, Spec: ledger.JobSpec{Compare: &ledger.CompareSpec{Program: "sha256:" + strings.Repeat("1", 64), Fuel: 1000}}}
	plain := &ledger.Job{ID: 2, Spec: ledger.JobSpec{Compare: &ledger.CompareSpec{RTolE18: 1}}}
	execs := map[string]sandbox.Executor{"none": nil}
	for _, name := range wasm.Engines() {
		ex, err := wasm.New(t.TempDir(), wasm.WithEngine(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ex.Close() })
		execs[name] = &countingExecutor{Executor: ex, name: "wasm"}
	}
	for name, ex := range execs {
		sb := map[string]sandbox.Executor{}
		if ex != nil {
			sb[ledger.ExecutorWASM] = ex
		}
		a := &Agent{o: Options{Sandboxes: sb}}
		why := a.judgeRefusal(judged)
		if wantRefused := name != wasm.EngineWasmtime; (why != "") != wantRefused {
			t.Errorf("%s: judgeRefusal = %q; want refused %v", name, why, wantRefused)
		}
		if why := a.judgeRefusal(plain); why != "" {
			t.Errorf("%s: a job without a judge program refused: %q", name, why)
		}
	}
}
