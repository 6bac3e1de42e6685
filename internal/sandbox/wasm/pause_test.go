//go:build linux

package wasm_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// sandboxProcs returns this test binary's sandbox processes (its children
// started with sandbox-exec): their state letter (R, S, T for stopped) and
// the CPU time they used, in clock ticks, by pid.
func sandboxProcs(t *testing.T) map[int]struct {
	state string
	ticks uint64
} {
	t.Helper()
	out := map[int]struct {
		state string
		ticks uint64
	}{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte("sandbox-exec")) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime(14) stime(15): after the ")".
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		u, _ := strconv.ParseUint(f[11], 10, 64)
		s, _ := strconv.ParseUint(f[12], 10, 64)
		out[pid] = struct {
			state string
			ticks uint64
		}{f[0], u + s}
	}
	return out
}

func sandboxTicks(t *testing.T) uint64 {
	var n uint64
	for _, p := range sandboxProcs(t) {
		n += p.ticks
	}
	return n
}

// ticksAdvance reports whether the sandbox processes use CPU time within
// a few seconds (at once, unless the machine is very busy).
func ticksAdvance(t *testing.T) bool {
	c0 := sandboxTicks(t)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if sandboxTicks(t) > c0 {
			return true
		}
	}
	return false
}

// TestPauseStopsSandboxProcess: Pause stops the sandbox process of a job
// spinning in a loop (the kernel shows it stopped, and it uses no CPU
// while it is), resume lets it go on; the paused time is neither billed
// nor counted against the job's timeout.
func TestPauseStopsSandboxProcess(t *testing.T) {
	e := executor(t)
	const timeout = 4 * time.Second
	job := newJob(t, guest(t), "spin")
	job.Limits.Timeout = timeout
	logs := &syncBuffer{}
	type ret struct {
		res *sandbox.Result
		at  time.Time
	}
	done := make(chan ret, 1)
	t0 := time.Now()
	go func() {
		res, err := e.Run(t.Context(), job, logs)
		if err != nil {
			t.Error(err)
			res = &sandbox.Result{}
		}
		os.RemoveAll(res.OutputDir)
		done <- ret{res, time.Now()}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("the guest never started:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !ticksAdvance(t) {
		t.Fatal("the spinning guest used no CPU: the check below would prove nothing")
	}

	resume, paused, err := e.Pause(t.Context())
	t.Cleanup(func() { resume() }) // the executor is the other tests' too
	if err != nil || paused != 1 {
		t.Fatalf("Pause: paused %d, %v; want 1, nil", paused, err)
	}
	pausedAt := time.Now()
	// SIGSTOP is delivered asynchronously: the process stops at once, but
	// not before Pause returns.
	for {
		stopped := 0
		for _, p := range sandboxProcs(t) {
			if p.state == "T" {
				stopped++
			}
		}
		if stopped == 1 {
			break
		}
		if time.Since(pausedAt) > time.Second {
			t.Fatalf("%d sandbox processes stopped while paused, want 1: %v", stopped, sandboxProcs(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
	c2 := sandboxTicks(t)
	time.Sleep(1500 * time.Millisecond)
	if c3 := sandboxTicks(t); c3 != c2 {
		t.Errorf("while paused the sandbox processes used %d ticks of CPU; want none", c3-c2)
	}
	if err := resume(); err != nil {
		t.Fatal(err)
	}
	pause := time.Since(pausedAt)
	if !ticksAdvance(t) {
		t.Error("after resume the guest uses no CPU; want it spinning again")
	}

	r := <-done
	wall := r.at.Sub(t0)
	t.Logf("paused %s, ran %s in all, metered %s", pause, wall, r.res.Metered)
	if r.res.Reason != sandbox.TimeoutReason(timeout) {
		t.Fatalf("result %+v", r.res)
	}
	if wall < timeout+pause-200*time.Millisecond {
		t.Errorf("the job timed out after %s of wall time, paused %s: the pause counted against its %s timeout", wall, pause, timeout)
	}
	if r.res.Metered < timeout-100*time.Millisecond || r.res.Metered > timeout+time.Second {
		t.Errorf("metered %s for a job that ran %s, paused %s: want its %s timeout, the pause left out", r.res.Metered, wall, pause, timeout)
	}
}
