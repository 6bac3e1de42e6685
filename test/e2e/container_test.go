package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// TestContainerJobCLI is the container path as a user drives it: an image
// built from a static Go program is pushed to a registry on 127.0.0.1
// under a tag; `gpunet image digest` turns the tag into the reference a
// spec needs; `gpunet job run` runs the spec on a devnet provider (runc)
// and brings back its decrypted outputs; `gpunet provider status` shows
// what the container sandbox enforces.
func TestContainerJobCLI(t *testing.T) {
	parallel(t, weightHeavy)
	_, err := oci.Probe(t.Context(), oci.Options{Dir: t.TempDir()})
	ocitest.RequireRunc(t, nil, err)

	prog := ocitest.BuildGo(t, "../../internal/sandbox/oci/testdata/jobprog")
	reg := ocitest.Registry(t, nil)
	pushed := ocitest.Push(t, reg, "e2e/jobprog", ocitest.ProgramImage(t, prog, "hello"))

	var resolved struct {
		Ref    string `json:"ref"`
		Digest string `json:"digest"`
	}
	gpunetJSON(t, &resolved, "image", "digest", reg+"/e2e/jobprog:latest")
	if resolved.Ref != pushed {
		t.Fatalf("image digest = %+v, want %s", resolved, pushed)
	}
	wantFail(t, 2, []string{"not pinned by digest", "gpunet image digest"}, "image", "pull", reg+"/e2e/jobprog:latest", "--home", t.TempDir())

	home := t.TempDir()
	startDevnet(t, home, "--providers", "1", "--block-time", "100ms", "--allow-fetch-network", "127.0.0.1")
	waitOfferCount(t, 60*time.Second, home, "", "executor=oci", 1)

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("containers run on gpunet\n"), 0o644)
	spec := `name: e2e-container
executor: oci
image: ` + resolved.Ref + `
command: [/job, write, /out/upper]
inputs:
  - path: /in/notes.txt
    from: ./notes.txt
outputs: [/out/upper]
resources: {cpu: 1, memory: 128MiB}
max_price: 0.5
timeout: 2m
`
	specPath := filepath.Join(dir, "job.yaml")
	os.WriteFile(specPath, []byte(spec), 0o644)
	out := t.TempDir()
	r := gpunet(t, "job", "run", specPath, "--from", "alice", "--home", home, "--out", out)
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "upper", "notes.txt"))
	if err != nil || string(got) != "CONTAINERS RUN ON GPUNET\n" {
		t.Fatalf("output = %q, %v\n%s", got, err, r)
	}
	if !strings.Contains(r.stdout+r.stderr, "wrote 1 files") {
		t.Errorf("job run did not stream the job's log:\n%s", r)
	}

	st := gpunet(t, "provider", "status", "--from", "provider-1", "--home", home)
	if st.code != 0 || !strings.Contains(st.stdout, "sandbox:     oci: memory limit: ") || !strings.Contains(st.stdout, "sandbox:     oci: seccomp: ") {
		t.Errorf("provider status does not show the container sandbox:\n%s", st)
	}
}
