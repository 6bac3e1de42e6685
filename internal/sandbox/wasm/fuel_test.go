package wasm_test

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// fuelExecutor is the shared executor when its engine counts fuel. The
// build has wasmtime wherever cgo is on (linux and darwin, amd64 and
// arm64); elsewhere the test is skipped, and fails under CI=true.
func fuelExecutor(t *testing.T) *wasm.Executor {
	t.Helper()
	e := executor(t)
	if !e.MetersFuel() {
		if os.Getenv("CI") == "true" {
			t.Fatalf("engine %s counts no fuel: this build lacks wasmtime (cgo)", wasm.DefaultEngine)
		}
		t.Skipf("engine %s counts no fuel: this build lacks wasmtime (cgo)", wasm.DefaultEngine)
	}
	return e
}

// runJudge runs module with args under RunJudge with fuel and a wall-clock
// bound of timeout.
func runJudge(t *testing.T, e *wasm.Executor, fuel uint64, timeout time.Duration, module string, args ...string) (*wasm.JudgeResult, string) {
	t.Helper()
	job := newJob(t, module, args...)
	job.Limits.Timeout = timeout
	var logs syncBuffer
	res, err := e.RunJudge(t.Context(), job, fuel, &logs)
	if err != nil {
		t.Fatalf("RunJudge: %v", err)
	}
	os.RemoveAll(res.OutputDir)
	return res, logs.String()
}

// busy keeps n goroutines spinning until the test ends: a loaded machine.
func busy(t *testing.T, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			x := 0
			for ctx.Err() == nil {
				for i := range 1 << 16 {
					x += i
				}
			}
			_ = x
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// TestJudgeEndsByFuel: a judge that loops forever ends when its fuel is
// spent, long before its wall-clock bound, with the same verdict and the
// same fuel count on every run: alone, and in a sandbox process limited
// to one thread (GOMAXPROCS=1) while every CPU of the machine is busy.
// Without fuel it would run to its wall-clock bound and end "timed out",
// at a point that depends on the machine.
func TestJudgeEndsByFuel(t *testing.T) {
	e := fuelExecutor(t)
	const fuel = 200_000_000
	const bound = 2 * time.Minute
	spin := guest(t)
	type run struct {
		res  *wasm.JudgeResult
		took time.Duration
	}
	var runs []run
	for i, loaded := range []bool{false, true, false} {
		if loaded {
			// The sandbox process inherits GOMAXPROCS (childEnviron).
			t.Setenv("GOMAXPROCS", "1")
			busy(t, 2*runtime.NumCPU())
		}
		t0 := time.Now()
		res, logs := runJudge(t, e, fuel, bound, spin, "spin")
		took := time.Since(t0)
		t.Logf("run %d (loaded %v): %s in %s, fuel used %d, timed out %v\n%s", i, loaded, res.Reason, took.Round(time.Millisecond), res.FuelUsed, res.TimedOut, logs)
		if !res.OutOfFuel || res.TimedOut || !res.Failed || res.Reason != wasm.OutOfFuelReason(fuel) || res.ExitCode != -1 {
			t.Fatalf("run %d: %+v; want out of fuel (%q), not timed out", i, res, wasm.OutOfFuelReason(fuel))
		}
		if res.FuelUsed < fuel-1000 || res.FuelUsed > fuel {
			t.Errorf("run %d: fuel used %d; want about the budget %d", i, res.FuelUsed, fuel)
		}
		runs = append(runs, run{res, took})
	}
	for i, r := range runs[1:] {
		if r.res.FuelUsed != runs[0].res.FuelUsed || r.res.Reason != runs[0].res.Reason {
			t.Errorf("run %d used %d fuel (%s), run 0 %d (%s): not deterministic", i+1, r.res.FuelUsed, r.res.Reason, runs[0].res.FuelUsed, runs[0].res.Reason)
		}
	}
}

// TestJudgeFuelCount: a judge that ends by itself reports the same fuel
// on every run, and its verdict (the exit code) is as without fuel; a
// budget below what it needs stops it, at the same count each time.
func TestJudgeFuelCount(t *testing.T) {
	e := fuelExecutor(t)
	g := guest(t)
	a, _ := runJudge(t, e, 1<<40, time.Minute, g, "exit", "3")
	b, _ := runJudge(t, e, 1<<40, time.Minute, g, "exit", "3")
	t.Logf("exit 3: %s, fuel used %d and %d", a.Reason, a.FuelUsed, b.FuelUsed)
	if a.ExitCode != 3 || b.ExitCode != 3 || a.OutOfFuel || a.TimedOut {
		t.Fatalf("results %+v, %+v; want exit 3 twice", a, b)
	}
	if a.FuelUsed == 0 || a.FuelUsed != b.FuelUsed {
		t.Errorf("fuel used %d then %d; want the same, not 0", a.FuelUsed, b.FuelUsed)
	}
	short := a.FuelUsed / 2
	c, _ := runJudge(t, e, short, time.Minute, g, "exit", "3")
	d, _ := runJudge(t, e, short, time.Minute, g, "exit", "3")
	if !c.OutOfFuel || !d.OutOfFuel || c.FuelUsed != d.FuelUsed || c.ExitCode != -1 {
		t.Errorf("with half the fuel it needs: %+v (fuel %d), %+v (fuel %d); want out of fuel twice at one count", c.Result, c.FuelUsed, d.Result, d.FuelUsed)
	}

	// The same module still runs as a job, without fuel: its compiled
	// code is cached apart from the judge's.
	res, _ := run(t, e, newJob(t, g, "exit", "3"))
	if res.ExitCode != 3 {
		t.Errorf("as a job after the judge runs: %+v, want exit 3", res)
	}
}

// TestJudgeTimedOutIsNoVerdict: a judge stopped by the wall-clock bound
// before its fuel is spent says so (TimedOut), apart from running out of
// fuel, so that the caller need not take it for a verdict.
func TestJudgeTimedOutIsNoVerdict(t *testing.T) {
	e := fuelExecutor(t)
	res, _ := runJudge(t, e, 1<<50, 500*time.Millisecond, guest(t), "spin")
	if !res.TimedOut || res.OutOfFuel || !res.Failed {
		t.Errorf("%+v, timed out %v, out of fuel %v; want timed out", res.Result, res.TimedOut, res.OutOfFuel)
	}
}

// TestRunJudgeRefused: RunJudge refuses a budget of 0 and outputs, and an
// engine without fuel (wazero) runs no judge.
func TestRunJudgeRefused(t *testing.T) {
	if slices.Contains(wasm.Engines(), wasm.EngineWazero) {
		z := engineExecutor(t, wasm.EngineWazero)
		if z.MetersFuel() {
			t.Error("wazero claims to count fuel")
		}
		_, err := z.RunJudge(t.Context(), newJob(t, guest(t), "exit", "0"), 1000, io.Discard)
		if !errors.Is(err, wasm.ErrNoFuel) {
			t.Errorf("RunJudge on wazero: %v, want ErrNoFuel", err)
		}
	}
	e := fuelExecutor(t)
	if _, err := e.RunJudge(t.Context(), newJob(t, guest(t), "exit", "0"), 0, io.Discard); !errors.Is(err, sandbox.ErrInvalidJob) {
		t.Errorf("RunJudge with no fuel: %v, want ErrInvalidJob", err)
	}
	job := newJob(t, guest(t), "exit", "0")
	job.Outputs = []string{"/out"}
	if _, err := e.RunJudge(t.Context(), job, 1000, io.Discard); !errors.Is(err, sandbox.ErrInvalidJob) {
		t.Errorf("RunJudge with outputs: %v, want ErrInvalidJob", err)
	}
}
