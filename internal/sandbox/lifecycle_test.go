package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// TestLifecycle: Close cancels the run in flight and waits for it; a Run
// after Close fails with ErrClosed; Go's work is waited for too.
func TestLifecycle(t *testing.T) {
	var l sandbox.Lifecycle
	l.Name = "test"
	work := t.TempDir()
	job := &sandbox.Job{ID: "j", WorkDir: work, Limits: sandbox.Limits{Timeout: time.Second}}
	started := make(chan struct{})
	done := make(chan *sandbox.Result)
	go func() {
		res, err := l.Run(t.Context(), job, nil, func(ctx context.Context, logs *sandbox.LogWriter, res *sandbox.Result) error {
			close(started)
			<-ctx.Done()
			res.Failed, res.Reason = true, sandbox.ReasonCancelled
			return nil
		})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-started
	var background bool
	if !l.Go(func() { time.Sleep(50 * time.Millisecond); background = true }) {
		t.Fatal("Go refused before Close")
	}
	if !l.Close() {
		t.Fatal("first Close reported false")
	}
	if !background {
		t.Error("Close returned before Go's work ended")
	}
	res := <-done
	if res.Reason != sandbox.ReasonCancelled || res.ExitCode != -1 || res.OutputDir == "" {
		t.Errorf("run at Close: %+v", res)
	}
	os.RemoveAll(res.OutputDir)
	if l.Close() {
		t.Error("second Close reported true")
	}
	if _, err := l.Run(t.Context(), job, nil, nil); !errors.Is(err, sandbox.ErrClosed) || err.Error() != "test: executor closed" {
		t.Errorf("Run after Close: %v", err)
	}
	if l.Go(func() {}) {
		t.Error("Go ran after Close")
	}
	if _, err := os.Stat(filepath.Join(work)); err != nil {
		t.Fatal(err)
	}
}

func TestOutputDirs(t *testing.T) {
	got := sandbox.OutputDirs([]string{"/out/model", "/out/metrics.json", "/res", "/", "relative", "/a/b/c"})
	want := []string{"/out", "/res", "/a/b"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
