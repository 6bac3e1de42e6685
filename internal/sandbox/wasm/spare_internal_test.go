package wasm

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// nopModule is a WASI command whose _start does nothing.
var nopModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type func() -> ()
	0x03, 0x02, 0x01, 0x00, // one function
	0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00, // export _start
	0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // body: nothing
}

func nopJob(t *testing.T) *sandbox.Job {
	t.Helper()
	dir := t.TempDir()
	mod := filepath.Join(dir, "nop.wasm")
	if err := os.WriteFile(mod, nopModule, 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	return &sandbox.Job{ID: "nop", Module: mod, WorkDir: work, Limits: sandbox.Limits{Timeout: 30 * time.Second}}
}

func runNop(t *testing.T, e *Executor, job *sandbox.Job) *sandbox.Result {
	t.Helper()
	res, err := e.Run(t.Context(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(res.OutputDir)
	if res.Failed {
		t.Fatalf("result %+v", res)
	}
	return res
}

// waitSpare waits for the executor to hold a spare process.
func waitSpare(t *testing.T, e *Executor) *child {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		e.mu.Lock()
		for _, c := range e.spares {
			e.mu.Unlock()
			return c
		}
		e.mu.Unlock()
	}
	t.Fatal("no spare process")
	return nil
}

// TestSpares checks the life of spare processes: one is started after a
// module's second run; a spare that died is replaced by a new process
// without the job noticing; Close ends the spares.
func TestSpares(t *testing.T) {
	e, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	job := nopJob(t)
	runNop(t, e, job)
	e.mu.Lock()
	n := len(e.spares)
	e.mu.Unlock()
	if n != 0 {
		t.Errorf("%d spares after a module's first run", n)
	}
	runNop(t, e, job)
	c := waitSpare(t, e)
	runNop(t, e, job) // on the spare
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the spare did not run the job")
	}

	// A spare killed behind the executor's back.
	c = waitSpare(t, e)
	c.kill()
	<-c.exited
	runNop(t, e, job)

	// A spare that dies after it was handed the job, before it starts it.
	if sh, err := exec.LookPath("sh"); err == nil {
		c = waitSpare(t, e)
		m, err := openModule(job.Module)
		if err != nil {
			t.Fatal(err)
		}
		path, args := e.path, e.args
		e.path, e.args = sh, []string{"-c", "sleep 0.3; exit 1"}
		dying, err := e.startChild(m, false)
		e.path, e.args = path, args
		m.f.Close()
		if err != nil {
			t.Fatal(err)
		}
		e.mu.Lock()
		c.idle.Stop()
		dying.idle = time.AfterFunc(time.Hour, func() {})
		e.spares[m.sum] = dying
		e.mu.Unlock()
		c.discard()
		runNop(t, e, job)
		if dying.waitErr == nil {
			t.Errorf("the dying spare exited %v", dying.waitErr)
		}
	}

	c = waitSpare(t, e)
	e.Close()
	select {
	case <-c.exited:
	default:
		t.Error("a spare outlived Close")
	}
}

// TestSpareTakenWhileLoading runs a job on a spare that is still loading
// its module: the job waits for it rather than failing.
func TestSpareTakenWhileLoading(t *testing.T) {
	e, err := New(t.TempDir(), WithSpares(1))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	job := nopJob(t)
	for range 5 {
		runNop(t, e, job) // from the third on, often on a spare just started
	}
}

// TestWithSparesZero checks that no spare is kept when disabled.
func TestWithSparesZero(t *testing.T) {
	e, err := New(t.TempDir(), WithSpares(0))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	job := nopJob(t)
	for range 3 {
		runNop(t, e, job)
	}
	time.Sleep(100 * time.Millisecond)
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.spares) != 0 {
		t.Errorf("%d spares with WithSpares(0)", len(e.spares))
	}
}
