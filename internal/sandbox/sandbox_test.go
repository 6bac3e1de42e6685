package sandbox_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
)

func TestValidateJob(t *testing.T) {
	dir := t.TempDir()
	good := func() *sandbox.Job {
		return &sandbox.Job{
			ID:      "j1",
			WorkDir: dir,
			Args:    []string{"/in/x"},
			Env:     map[string]string{"LANG": "C"},
			Outputs: []string{"/out", "/result.txt"},
			Limits:  sandbox.Limits{Timeout: time.Minute, CPU: 1},
		}
	}
	tests := []struct {
		name   string
		change func(j *sandbox.Job)
		want   string // "" for valid, else a substring of the error
	}{
		{"valid", func(j *sandbox.Job) {}, ""},
		{"no ID", func(j *sandbox.Job) { j.ID = "" }, "ID is empty"},
		{"no work dir", func(j *sandbox.Job) { j.WorkDir = "" }, "WorkDir is empty"},
		{"missing work dir", func(j *sandbox.Job) { j.WorkDir = filepath.Join(dir, "nope") }, "WorkDir"},
		{"zero timeout", func(j *sandbox.Job) { j.Limits.Timeout = 0 }, "Limits.Timeout must be positive"},
		{"negative CPU", func(j *sandbox.Job) { j.Limits.CPU = -1 }, "Limits.CPU"},
		{"NaN CPU", func(j *sandbox.Job) { j.Limits.CPU = math.NaN() }, "Limits.CPU"},
		{"NUL in arg", func(j *sandbox.Job) { j.Args = []string{"a\x00b"} }, "Args[0]"},
		{"NUL in command", func(j *sandbox.Job) { j.Command = []string{"ok", "a\x00b"} }, "Command[1]"},
		{"GPUs", func(j *sandbox.Job) { j.GPUs = []string{"GPU-1", "0"} }, ""},
		{"empty GPU", func(j *sandbox.Job) { j.GPUs = []string{""} }, "GPUs[0]"},
		{"comma in GPU", func(j *sandbox.Job) { j.GPUs = []string{"0,1"} }, "GPUs[0]"},
		{"= in env name", func(j *sandbox.Job) { j.Env = map[string]string{"A=B": "c"} }, "Env name"},
		{"empty env name", func(j *sandbox.Job) { j.Env = map[string]string{"": "c"} }, "Env name"},
		{"NUL in env value", func(j *sandbox.Job) { j.Env = map[string]string{"A": "\x00"} }, "Env A"},
		{"relative output", func(j *sandbox.Job) { j.Outputs = []string{"out"} }, "not absolute"},
		{"escaping output", func(j *sandbox.Job) { j.Outputs = []string{"/out/../../etc"} }, `contains ".."`},
		{"nil", nil, "nil job"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var j *sandbox.Job
			if tc.change != nil {
				j = good()
				tc.change(j)
			}
			err := sandbox.ValidateJob(j)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			case err != nil && !errors.Is(err, sandbox.ErrInvalidJob):
				t.Errorf("%v does not wrap ErrInvalidJob", err)
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{256 << 20, "256 MiB"},
		{3 << 29, "1.5 GiB"},
		{math.MaxUint64, "16 EiB"},
	}
	for _, tc := range tests {
		if got := sandbox.FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestReasons(t *testing.T) {
	tests := []struct{ got, want string }{
		{sandbox.ExitReason(3), "exited 3"},
		{sandbox.TimeoutReason(10 * time.Second), "timed out after 10s"},
		{sandbox.OOMReason(256 << 20), "out of memory (limit 256 MiB)"},
		{sandbox.DiskReason(1 << 30), "disk limit exceeded (limit 1 GiB)"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

type failingWriter struct{ calls int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.calls++
	return 0, errors.New("broken pipe")
}

func TestLogWriter(t *testing.T) {
	t.Run("caps and notes once", func(t *testing.T) {
		var sb strings.Builder
		w := sandbox.NewLogWriter(&sb, 10)
		for _, s := range []string{"12345", "67890", "abc", "def"} {
			if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", s, n, err)
			}
		}
		want := "1234567890\n[gpunet: log output reached 10 B; the rest is dropped]\n"
		if sb.String() != want {
			t.Errorf("got %q, want %q", sb.String(), want)
		}
		if w.Dropped() != 6 {
			t.Errorf("Dropped = %d, want 6", w.Dropped())
		}
	})
	t.Run("split write", func(t *testing.T) {
		var sb strings.Builder
		w := sandbox.NewLogWriter(&sb, 4)
		w.Write([]byte("abcdef"))
		if !strings.HasPrefix(sb.String(), "abcd\n[gpunet:") || w.Dropped() != 2 {
			t.Errorf("got %q, dropped %d", sb.String(), w.Dropped())
		}
	})
	t.Run("broken destination", func(t *testing.T) {
		fw := &failingWriter{}
		w := sandbox.NewLogWriter(fw, 100)
		for range 3 {
			if n, err := w.Write([]byte("x")); n != 1 || err != nil {
				t.Fatalf("Write = %d, %v; the job must not see the caller's errors", n, err)
			}
		}
		if fw.calls != 1 {
			t.Errorf("wrote %d times to a broken writer, want 1", fw.calls)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var sb strings.Builder
		w := sandbox.NewLogWriter(&sb, 1<<20)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for range 100 {
					w.Write([]byte(fmt.Sprintf("%d\n", i)))
				}
			})
		}
		wg.Wait()
		if got := strings.Count(sb.String(), "\n"); got != 800 {
			t.Errorf("got %d lines, want 800", got)
		}
	})
	t.Run("nil destination", func(t *testing.T) {
		w := sandbox.NewLogWriter(nil, 10)
		w.Notef("x %d", 1)
	})
}
