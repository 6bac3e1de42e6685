package fake_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
)

func newJob(t *testing.T, outputs ...string) *sandbox.Job {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	if err := os.MkdirAll(filepath.Join(work, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "in", "input.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &sandbox.Job{
		ID:      "job-1",
		Args:    []string{"/in/input.txt"},
		WorkDir: work,
		Outputs: outputs,
		Limits:  sandbox.Limits{Timeout: 5 * time.Second},
	}
}

func TestBehaviors(t *testing.T) {
	tests := []struct {
		name      string
		behavior  fake.Behavior
		outputs   []string
		timeout   time.Duration
		cancel    time.Duration // cancel the context after this long
		wantCode  int
		wantFail  bool
		reason    string
		wantFiles map[string]string // guest path → content
		wantLog   string
	}{
		{name: "echo", behavior: fake.Echo(), outputs: []string{"/out"}, reason: "exited 0",
			wantFiles: map[string]string{"/out/in/input.txt": "hello"}, wantLog: "echo: /in/input.txt (5 bytes)"},
		{name: "echo without outputs", behavior: fake.Echo(), reason: "exited 0", wantLog: `echo: args ["/in/input.txt"]`},
		{name: "write", behavior: fake.Write(map[string]string{"/out/r.txt": "result"}), outputs: []string{"/out"}, reason: "exited 0",
			wantFiles: map[string]string{"/out/r.txt": "result"}},
		{name: "fail with exit code", behavior: fake.Fail(3, ""), wantCode: 3, wantFail: true, reason: "exited 3", wantLog: "exited 3"},
		{name: "fail with reason", behavior: fake.Fail(-1, "trap: unreachable"), wantCode: -1, wantFail: true, reason: "trap: unreachable"},
		{name: "missing output", behavior: exit0, outputs: []string{"/out"}, wantFail: true, reason: "output /out missing"},
		{name: "block until timeout", behavior: fake.Block(), timeout: 50 * time.Millisecond, wantCode: -1, wantFail: true, reason: "timed out after 50ms", wantLog: "blocking"},
		{name: "block until cancelled", behavior: fake.Block(), cancel: 50 * time.Millisecond, wantCode: -1, wantFail: true, reason: "cancelled"},
		{name: "sleep then echo", behavior: fake.Sleep(10 * time.Millisecond), outputs: []string{"/out"}, reason: "exited 0",
			wantFiles: map[string]string{"/out/in/input.txt": "hello"}},
		{name: "sleep past timeout", behavior: fake.Sleep(time.Hour), timeout: 50 * time.Millisecond, wantCode: -1, wantFail: true, reason: "timed out after 50ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := fake.New(tc.behavior)
			job := newJob(t, tc.outputs...)
			if tc.timeout != 0 {
				job.Limits.Timeout = tc.timeout
			}
			ctx := t.Context()
			if tc.cancel != 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.cancel)
				defer cancel()
			}
			var logs strings.Builder
			start := time.Now()
			res, err := e.Run(ctx, job, &logs)
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(res.OutputDir)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %v", took)
			}
			if res.ExitCode != tc.wantCode || res.Failed != tc.wantFail || res.Reason != tc.reason {
				t.Errorf("got exit %d failed %v reason %q; want %d %v %q", res.ExitCode, res.Failed, res.Reason, tc.wantCode, tc.wantFail, tc.reason)
			}
			if res.OutputDir == "" || res.Started.IsZero() || res.Finished.Before(res.Started) {
				t.Errorf("result lacks the real executors' shape: %+v", res)
			}
			for p, want := range tc.wantFiles {
				got, err := os.ReadFile(filepath.Join(res.OutputDir, filepath.FromSlash(p)))
				if err != nil || string(got) != want {
					t.Errorf("output %s = %q, %v; want %q", p, got, err, want)
				}
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("logs %q lack %q", logs.String(), tc.wantLog)
			}
			if jobs := e.Jobs(); len(jobs) != 1 || jobs[0].ID != job.ID {
				t.Errorf("Jobs() = %+v", jobs)
			}
		})
	}
}

func TestRecordsCopies(t *testing.T) {
	e := fake.New(fake.Echo()).WithName("wasm")
	if e.Name() != "wasm" {
		t.Errorf("Name() = %q", e.Name())
	}
	job := newJob(t)
	job.Env = map[string]string{"A": "1"}
	res, err := e.Run(t.Context(), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(res.OutputDir)
	job.Args[0], job.Env["A"], job.ID = "changed", "changed", "changed"
	got := e.Jobs()[0]
	if got.ID != "job-1" || got.Args[0] != "/in/input.txt" || got.Env["A"] != "1" {
		t.Errorf("recorded job changed with the caller's: %+v", got)
	}
}

func TestErrors(t *testing.T) {
	boom := errors.New("disk on fire")
	e := fake.New(func(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
		return nil, boom
	})
	if _, err := e.Run(t.Context(), newJob(t), nil); !errors.Is(err, boom) {
		t.Errorf("provider error: got %v, want %v", err, boom)
	}
	job := newJob(t)
	job.Limits.Timeout = 0
	if _, err := e.Run(t.Context(), job, nil); !errors.Is(err, sandbox.ErrInvalidJob) {
		t.Errorf("invalid job: got %v", err)
	}
	if n := len(e.Jobs()); n != 1 {
		t.Errorf("recorded %d jobs, want 1 (invalid jobs are not run)", n)
	}
}

func TestConcurrent(t *testing.T) {
	e := fake.New(fake.Sleep(time.Millisecond))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			res, err := e.Run(t.Context(), newJob(t, "/out"), io.Discard)
			if err != nil {
				t.Error(err)
				return
			}
			os.RemoveAll(res.OutputDir)
		})
	}
	wg.Wait()
	if n := len(e.Jobs()); n != 8 {
		t.Errorf("recorded %d jobs, want 8", n)
	}
}

// exit0 exits 0 without writing anything.
func exit0(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
	return fake.Exit(0), nil
}
