package wasm_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// TestRunReadOnly runs a guest that reads its tree and then tries every
// way of changing it: under RunReadOnly each change is refused, the host
// tree is left exactly as it was, and the guest still reads and prints.
// Under Run the same guest changes the tree (the test's control).
func TestRunReadOnly(t *testing.T) {
	for _, readOnly := range []bool{true, false} {
		job := newJob(t, guest(t), "readonly")
		put(t, job, "/in.txt", []byte("original\n"))
		var res *sandbox.Result
		var logs string
		if readOnly {
			var buf syncBuffer
			r, err := executor(t).RunReadOnly(t.Context(), job, &buf)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(r.OutputDir) })
			res, logs = r, buf.String()
		} else {
			res, logs = run(t, executor(t), job)
		}
		t.Logf("read-only %v: %+v\n%s", readOnly, res, logs)
		if res.ExitCode != 0 {
			t.Fatalf("read-only %v: the guest did not finish: %+v", readOnly, res)
		}
		if !strings.Contains(logs, `read /in.txt "original\n": ok`) || !strings.Contains(logs, "stdout works") {
			t.Errorf("read-only %v: the guest could not read its tree or print:\n%s", readOnly, logs)
		}
		changes := []string{"write /in.txt", "open /in.txt read-write", "create /new", "truncate /in.txt",
			"mkdir /d", "rename /in.txt", "link /in.txt", "remove /in.txt", "chtimes /in.txt"}
		var allowed []string
		for _, c := range changes {
			if strings.Contains(logs, c+": ok") {
				allowed = append(allowed, c)
			}
		}
		entries, _ := os.ReadDir(job.WorkDir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !readOnly {
			if len(allowed) == 0 {
				t.Errorf("a normal run could change nothing: the guest tests nothing")
			}
			continue
		}
		if len(allowed) > 0 {
			t.Errorf("a read-only run allowed %v", allowed)
		}
		if !strings.Contains(logs, "open /in.txt read-write: open /in.txt: Read-only file system") {
			t.Errorf("opening to write did not fail with EROFS:\n%s", logs)
		}
		if b, _ := os.ReadFile(filepath.Join(job.WorkDir, "in.txt")); string(b) != "original\n" {
			t.Errorf("the host file now holds %q", b)
		}
		if !slices.Equal(names, []string{"in.txt"}) {
			t.Errorf("the work dir holds %v; want only in.txt (no /tmp, nothing created)", names)
		}
	}
}

// TestRunReadOnlyRefusesOutputs: a read-only run writes nothing, so it
// has nothing to collect.
func TestRunReadOnlyRefusesOutputs(t *testing.T) {
	job := newJob(t, guest(t), "hello")
	job.Outputs = []string{"/out"}
	if _, err := executor(t).RunReadOnly(t.Context(), job, nil); !errors.Is(err, sandbox.ErrInvalidJob) {
		t.Errorf("RunReadOnly with outputs: %v, want ErrInvalidJob", err)
	}
}
