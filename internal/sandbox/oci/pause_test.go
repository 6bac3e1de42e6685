package oci_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// requirePause skips (fails with CI=true, where runc runs as root with
// cgroups) when the executor cannot freeze containers here.
func requirePause(t *testing.T, ex *oci.Executor) {
	t.Helper()
	if p := ex.Capabilities().Pause; strings.HasPrefix(p, "unavailable") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("containers cannot be paused: %s", p)
		}
		t.Skipf("containers cannot be paused: %s", p)
	}
}

// runningContainer waits for the one container of the shared executor that
// runs and returns its ID.
func runningContainer(t *testing.T) string {
	t.Helper()
	root := filepath.Join(shared.dir, "runc")
	deadline := time.Now().Add(20 * time.Second)
	for {
		var running []string
		for _, c := range ocitest.Containers(t, root) {
			if c.Status == "running" {
				running = append(running, c.ID)
			}
		}
		if len(running) == 1 {
			return running[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("running containers: %v, want one", running)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cpuAdvances reports whether container id uses CPU time within a few
// seconds (at once, unless the machine is very busy).
func cpuAdvances(t *testing.T, root, id string) bool {
	t.Helper()
	u0, _ := ocitest.CPUUsage(t, root, id)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if u, _ := ocitest.CPUUsage(t, root, id); u > u0 {
			return true
		}
	}
	return false
}

type runResult struct {
	res *sandbox.Result
	err error
	at  time.Time
}

// startJob runs j in the background and returns the channel its end comes
// on, and its logs.
func startJob(t *testing.T, ctx context.Context, ex *oci.Executor, ref, id string, args []string, timeout time.Duration) (<-chan runResult, *syncBuffer) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{b: &bytes.Buffer{}}
	done := make(chan runResult, 1)
	go func() {
		res, err := ex.Run(ctx, &sandbox.Job{ID: id, Image: ref, Args: args, WorkDir: work, Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: timeout}}, logs)
		if res != nil {
			t.Cleanup(func() { os.RemoveAll(res.OutputDir) })
		}
		done <- runResult{res, err, time.Now()}
	}()
	return done, logs
}

func waitLog(t *testing.T, logs *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the job's log:\n%s", want, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPauseFreezesContainers: Pause freezes a job's container that burns
// the CPU on two threads: runc shows it paused and its cgroup counts no CPU
// time while it is, then resume lets it go on. A job due to start during
// the pause starts after it. The paused time is not billed and does not
// count against the timeout.
func TestPauseFreezesContainers(t *testing.T) {
	ex, ref := setup(t)
	requirePause(t, ex)
	root := filepath.Join(shared.dir, "runc")
	const timeout = 5 * time.Second
	t0 := time.Now()
	hog, hogLogs := startJob(t, t.Context(), ex, ref, "hog", []string{"spin", "2"}, timeout)
	waitLog(t, hogLogs, "spinning on 2 threads")
	id := runningContainer(t)
	if !cpuAdvances(t, root, id) {
		t.Fatal("the hog used no CPU before the pause: the check below would prove nothing")
	}

	resume, paused, err := ex.Pause(t.Context())
	t.Cleanup(func() { resume() }) // the executor is the other tests' too
	if err != nil || paused != 1 {
		t.Fatalf("Pause: paused %d, %v; want 1, nil", paused, err)
	}
	pausedAt := time.Now()
	// A job due to start now waits for the pause to end.
	later, laterLogs := startJob(t, t.Context(), ex, ref, "later", []string{"hello"}, 30*time.Second)
	u2, st := ocitest.CPUUsage(t, root, id)
	if st != "paused" {
		t.Errorf("the hog's container is %q while paused", st)
	}
	time.Sleep(1500 * time.Millisecond)
	u3, st := ocitest.CPUUsage(t, root, id)
	if u3 != u2 || st != "paused" {
		t.Errorf("while paused the hog's cgroup went from %s to %s of CPU time (status %q); want no change", u2, u3, st)
	}
	select {
	case r := <-later:
		t.Fatalf("a job started during the pause and ended: %+v, %v\n%s", r.res, r.err, laterLogs.String())
	default:
	}
	if l := laterLogs.String(); strings.Contains(l, "hello from a container") {
		t.Errorf("a job ran during the pause:\n%s", l)
	}
	if err := resume(); err != nil {
		t.Fatalf("resume: %v", err)
	}
	pause := time.Since(pausedAt)
	if err := resume(); err != nil {
		t.Errorf("a second resume: %v", err)
	}

	if r := <-later; r.err != nil || r.res.Failed || !strings.Contains(laterLogs.String(), "hello from a container") {
		t.Errorf("the job held back by the pause: %+v, %v\n%s", r.res, r.err, laterLogs.String())
	}
	if _, st := ocitest.CPUUsage(t, root, id); st != "running" || !cpuAdvances(t, root, id) {
		t.Errorf("after resume the hog is %q and uses no CPU; want it running again", st)
	}

	r := <-hog
	if r.err != nil || r.res.Reason != sandbox.TimeoutReason(timeout) {
		t.Fatalf("the hog: %+v, %v", r.res, r.err)
	}
	wall := r.at.Sub(t0)
	t.Logf("hog: paused %s, ran %s in all, metered %s", pause, wall, r.res.Metered)
	if wall < timeout+pause-200*time.Millisecond {
		t.Errorf("the hog timed out after %s of wall time, paused %s: the pause counted against its %s timeout", wall, pause, timeout)
	}
	if r.res.Metered < timeout-100*time.Millisecond || r.res.Metered > timeout+time.Second {
		t.Errorf("metered %s for a job that ran %s of its %s timeout, paused %s: want the pause left out", r.res.Metered, wall, timeout, pause)
	}
	assertNoContainers(t)
}

// TestCancelPausedJob: a paused job can still be cancelled, and the resume
// after it is gone is no error.
func TestCancelPausedJob(t *testing.T) {
	ex, ref := setup(t)
	requirePause(t, ex)
	ctx, cancel := context.WithCancel(t.Context())
	done, logs := startJob(t, ctx, ex, ref, "cancel-paused", []string{"spin", "1"}, time.Minute)
	waitLog(t, logs, "spinning")
	runningContainer(t)
	resume, paused, err := ex.Pause(t.Context())
	t.Cleanup(func() { resume() }) // the executor is the other tests' too
	if err != nil || paused != 1 {
		t.Fatalf("Pause: paused %d, %v; want 1, nil", paused, err)
	}
	cancel()
	select {
	case r := <-done:
		if r.err != nil || r.res.Reason != sandbox.ReasonCancelled {
			t.Errorf("cancelled while paused: %+v, %v", r.res, r.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after cancel while paused")
	}
	if err := resume(); err != nil {
		t.Errorf("resume after the job is gone: %v", err)
	}
	assertNoJobProcesses(t)
	assertNoContainers(t)
}

// TestPauseFreezesService: a paused service answers nothing (the
// connection opens, in the kernel, but no reply comes), and answers again
// once resumed.
func TestPauseFreezesService(t *testing.T) {
	h, logs := startService(t, "serve", "127.0.0.1:18081")
	ex, _ := setup(t)
	requirePause(t, ex)
	get := func(timeout time.Duration) (string, error) {
		client := &http.Client{Timeout: timeout, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx, 18081) },
		}}
		resp, err := client.Get("http://service/hi")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := get(time.Second); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the service never answered: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resume, paused, err := ex.Pause(t.Context())
	t.Cleanup(func() { resume() }) // the executor is the other tests' too
	if err != nil || paused != 1 {
		t.Fatalf("Pause: paused %d, %v; want 1, nil", paused, err)
	}
	if body, err := get(time.Second); err == nil {
		t.Errorf("a paused service answered %q", body)
	}
	if err := resume(); err != nil {
		t.Fatal(err)
	}
	if body, err := get(5 * time.Second); err != nil || !strings.Contains(body, "hello from a service /hi") {
		t.Errorf("after resume: %q, %v", body, err)
	}
}
