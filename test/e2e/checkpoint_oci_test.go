package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// ociCounterSteps, ociCounterWork and ociCounterPause size the container
// counter (jobprog count): natively the hashing takes little time, so each
// step also pauses; about 40 s in all, long enough to be killed in the
// middle of on a loaded machine.
const (
	ociCounterSteps = 2000
	ociCounterWork  = 1000
	ociCounterPause = "20ms"
)

// TestCheckpointResumeOCI is TestCheckpointResume for a container job
// (executor oci, runc): the image's program (internal/sandbox/oci/testdata/
// jobprog, mode count) is the wasm counter's twin, keeping its state in the
// checkpoint directory that the provider mounts in the container. Its
// provider is killed with SIGKILL mid-run; the job resumes on the other
// one from the last committed checkpoint, its output equals an
// uninterrupted run's, and the owner pays the covered seconds and the new
// run's metered seconds.
func TestCheckpointResumeOCI(t *testing.T) {
	parallel(t, weightHeavy)
	_, err := oci.Probe(t.Context(), oci.Options{Dir: t.TempDir()})
	ocitest.RequireRunc(t, nil, err)

	prog := ocitest.BuildGo(t, "../../internal/sandbox/oci/testdata/jobprog")
	reg := ocitest.Registry(t, nil)
	ref := ocitest.Push(t, reg, "e2e/jobprog", ocitest.ProgramImage(t, prog, "hello"))
	spec := fmt.Sprintf(`name: counter
executor: oci
image: %s
command: [/job, count, "%d", "%d", "%s"]
outputs: [/out]
resources: {cpu: 1, memory: 128MiB}
max_price: 0.5
timeout: 5m
verification: none # one provider at a time; a spot audit would need a third
checkpoint: {path: /ckpt, interval: 1s}
`, ref, ociCounterSteps, ociCounterWork, ociCounterPause)
	home := t.TempDir()
	// The killed provider leaves its container running and its rootfs
	// mounted under home (its executor's lock is free): the next executor
	// on the same directory removes them, as the provider's would when it
	// is started again. This runs after the devnet's processes are
	// stopped and before home is removed.
	t.Cleanup(func() {
		ex, err := oci.New(context.Background(), oci.Options{Dir: filepath.Join(home, "provider", "oci")})
		if err != nil {
			t.Errorf("remove the killed provider's container: %v", err)
			return
		}
		ex.Close()
	})
	testCheckpointResume(t, home, "oci", t.TempDir(), spec, counterResult(ociCounterSteps, ociCounterWork))
}
