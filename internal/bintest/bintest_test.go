package bintest

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBuild: the program is built once and shared, whoever asks and however
// often; a different environment is a different program.
func TestBuild(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	var wg sync.WaitGroup
	paths := make([]string, 3)
	for i := range paths {
		wg.Go(func() {
			p, err := Build(t.Context(), "./testdata/hello")
			if err != nil {
				t.Error(err)
			}
			paths[i] = p
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if paths[0] != paths[1] || paths[1] != paths[2] {
		t.Fatalf("three builds at once gave %q", paths)
	}
	before, err := os.Stat(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(paths[0]).Output()
	if err != nil || strings.TrimSpace(string(out)) != "hello from bintest" {
		t.Fatalf("the program printed %q (%v)", out, err)
	}
	again, err := Build(t.Context(), "./testdata/hello")
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(again)
	if err != nil {
		t.Fatal(err)
	}
	if again != paths[0] || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("asked again: %s (modified %s), want the first build %s (%s) untouched", again, after.ModTime(), paths[0], before.ModTime())
	}
	other, err := Build(t.Context(), "./testdata/hello", "CGO_ENABLED=0", "GOFLAGS=-trimpath")
	if err != nil {
		t.Fatal(err)
	}
	if other == paths[0] {
		t.Errorf("built with other settings, got the same file %s", other)
	}
	if _, err := Build(t.Context(), "."); err == nil || !strings.Contains(err.Error(), "not a main package") {
		t.Errorf("Build of a library: %v, want 'not a main package'", err)
	}
}

// TestDumpStacks: a stuck program asked for its stacks exits, and the
// goroutine of ours that waits shows with its function.
func TestDumpStacks(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	bin, err := Build(t.Context(), "./testdata/stuck")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, len("waiting\n"))
	if _, err := io.ReadFull(out, line); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // into the wait
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	if !DumpStacks(cmd.Process, done, 10*time.Second) {
		cmd.Process.Kill()
		t.Fatal("the stuck program did not exit within 10 s of SIGQUIT")
	}
	st := OurStacks(stderr.String(), 1<<20)
	if !strings.Contains(st, "main.waitForever") || !strings.Contains(st, "chan receive") {
		t.Errorf("our stacks lack the waiting goroutine:\n%s\n(the whole stderr:\n%s)", st, stderr.String())
	}
	if OurStacks("no dump here\n", 100) != "" {
		t.Error("a stderr without a dump gave stacks")
	}
}
