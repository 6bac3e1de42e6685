package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/allreduce/ring"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// TestGangAcrossProcesses (issue 30): the cluster example (examples/
// allreduce, a ring all-reduce built from this repository into an oci
// image) runs as a 3-member gang with checkpoint: on four `gpunet provider
// start` processes, each member in its own network namespace under runc,
// the members talking over the gang's private network. After a complete
// checkpoint step of the gang, one member's provider process gets
// SIGKILL; the gang is placed again (on the fourth provider) and resumes
// from the last complete step, every rank restoring its own state; each
// rank's outputs (rank-N/) equal the one-process sum, and `job logs
// --rank N` shows each member's lines.
func TestGangAcrossProcesses(t *testing.T) {
	parallel(t, weightHeavy)
	caps, err := oci.Probe(t.Context(), oci.Options{Dir: t.TempDir()})
	ocitest.RequireRunc(t, nil, err)
	requireGangHost(t, caps)

	prog := ocitest.BuildGo(t, "../../examples/allreduce")
	reg := ocitest.Registry(t, nil)
	ref := ocitest.Push(t, reg, "e2e/allreduce", ocitest.ProgramImage(t, prog))
	const elems, seed, steps = 60_000, 11, 60
	wantDigest := ring.Digest(ring.Sum(seed, 3, elems))

	home := t.TempDir()
	// The killed provider leaves its container running and its rootfs
	// and network namespace pinned under home (its executor's lock is
	// free): the next executor on the same directory removes them. This
	// runs after the devnet's processes are stopped and before home is
	// removed.
	t.Cleanup(func() {
		ex, err := oci.New(context.Background(), oci.Options{Dir: filepath.Join(home, "provider", "oci")})
		if err != nil {
			t.Errorf("remove the killed provider's container: %v", err)
			return
		}
		ex.Close()
	})
	startDevnet(t, home, "--block-time", "100ms")
	provs := map[string]*proc{}
	names := map[string]string{}
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		p, addr := startProvider(t, home, name, "alice", "--gang-address", "127.0.0.1", "--allow-fetch-network", "127.0.0.1", "--executors", "oci")
		provs[name], names[addr] = p, name
	}
	waitOfferCount(t, 90*time.Second, home, "", "executor=oci", 4)

	dir := t.TempDir()
	spec := filepath.Join(dir, "job.yaml")
	os.WriteFile(spec, fmt.Appendf(nil, `name: allreduce
executor: oci
image: %s
command: [/job, -n, "%d", -seed, "%d", -steps, "%d", -pause, 250ms, -out, /out/sum, -timeout, 4m]
outputs: [/out]
resources: {nodes: 3, cpu: 1, memory: 256MiB}
max_price: 0.5
timeout: 5m
verification: none
checkpoint: {path: /ckpt, interval: 1s}
`, ref, elems, seed, steps), 0o644)
	var sub struct {
		ID uint64 `json:"id"`
	}
	gpunetJSON(t, &sub, "job", "submit", spec, "--from", "alice", "--home", home)
	id := fmt.Sprint(sub.ID)
	poll := func() ledger.Job { return ownerJob(t, home, "alice", id) } // grants the members the key when due

	var j ledger.Job
	t0 := time.Now()
	waitUntil(t, 3*time.Minute, "the gang running with a complete checkpoint step of its state", func() bool {
		j = poll()
		return j.Done() || j.State == ledger.JobRunning && gangStarted(&j) && gangCompleteStep(&j, 8*elems) > 0
	})
	if j.Done() {
		t.Fatalf("the gang ended before it could be interrupted (make it longer): %s %s", j.State, j.Reason)
	}
	step := gangCompleteStep(&j, 8*elems)
	var victim string
	for _, a := range j.Assignments {
		if a.Rank == 1 {
			victim = names[a.Provider.String()]
		}
	}
	provs[victim].kill()
	killed := time.Now()
	t.Logf("all 3 members running and step %d complete %s after submit; SIGKILL to %s (rank 1)", step, killed.Sub(t0).Round(100*time.Millisecond), victim)

	waitUntil(t, 3*time.Minute, "the gang done after the kill", func() bool {
		j = poll()
		return j.Done()
	})
	t.Logf("the gang ended %s after the kill: %s, %d placements, resumed from step %d", time.Since(killed).Round(100*time.Millisecond), j.State, j.Attempts, j.ResumeSeq)
	if j.State != ledger.JobSucceeded || j.Attempts < 2 || j.ResumeSeq < step {
		t.Fatalf("job %s %s (%s) after %d placements, resumed from step %d; want it to succeed placed again from step %d or later", id, j.State, j.Reason, j.Attempts, j.ResumeSeq, step)
	}
	for _, a := range j.Assignments {
		if names[a.Provider.String()] == victim {
			t.Fatalf("the killed provider %s is still a member: %+v", victim, j.Assignments)
		}
	}

	out := t.TempDir()
	if r := gpunet(t, "job", "get", id, "--from", "alice", "--home", home, "--out", out); r.code != 0 {
		t.Fatalf("%s", r)
	}
	for r := range 3 {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank-%d", r), "out", "sum"))
		if err != nil {
			t.Fatalf("rank %d's outputs: %v", r, err)
		}
		got := make([]int64, len(b)/8)
		for i := range got {
			got[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		if d := ring.Digest(got); len(b) != 8*elems || d != wantDigest {
			t.Errorf("rank %d's result: %d bytes, sha256 %s; the one-process sum's: %d bytes, sha256 %s", r, len(b), d, 8*elems, wantDigest)
		}
		log := gpunet(t, "job", "logs", id, "--rank", fmt.Sprint(r), "--from", "alice", "--home", home)
		for _, want := range []string{
			fmt.Sprintf("resuming from checkpoint %d", j.ResumeSeq),
			fmt.Sprintf("allreduce rank=%d resumed at step ", r),
			fmt.Sprintf("allreduce rank=%d world=3 ", r),
			"sha256=" + wantDigest,
		} {
			if !strings.Contains(log.stdout, want) {
				t.Errorf("job logs --rank %d (exit %d) has no %q:\n%s\nstderr: %s", r, log.code, want, log.stdout, log.stderr)
			}
		}
		for _, other := range []int{(r + 1) % 3, (r + 2) % 3} {
			if strings.Contains(log.stdout, fmt.Sprintf("allreduce rank=%d ", other)) {
				t.Errorf("job logs --rank %d shows rank %d's lines:\n%s", r, other, log.stdout)
			}
		}
	}
}

// requireGangHost fails (CI=true) or skips the test where a gang member's
// network cannot be made: it needs root, ip and /dev/net/tun (as
// internal/provider's gang tests and internal/clusternet's do).
func requireGangHost(t *testing.T, caps *oci.Capabilities) {
	t.Helper()
	var why string
	switch {
	case caps.Rootless:
		why = "the container executor is rootless; a gang member's network namespace needs root"
	case os.Geteuid() != 0:
		why = "not root: a gang member's network namespace needs root"
	default:
		if _, err := exec.LookPath("ip"); err != nil {
			why = "ip (iproute2) is missing"
		} else if _, err := os.Stat("/dev/net/tun"); err != nil {
			why = "/dev/net/tun is missing"
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// gangStarted says whether every member of j's gang has started.
func gangStarted(j *ledger.Job) bool {
	if uint64(len(j.Assignments)) < j.Spec.Nodes {
		return false
	}
	for _, a := range j.Assignments {
		if a.StartedAt == 0 {
			return false
		}
	}
	return true
}

// gangCompleteStep is the last checkpoint step of j that every current
// member has committed with at least size bytes (0: none): a checkpoint
// taken before the program kept its state is smaller.
func gangCompleteStep(j *ledger.Job, size uint64) uint64 {
	if uint64(len(j.Assignments)) != j.Spec.Nodes {
		return 0
	}
	var best uint64
	for _, c := range j.Checkpoints {
		all := true
		for _, a := range j.Assignments {
			found := false
			for _, d := range j.Checkpoints {
				found = found || d.Seq == c.Seq && d.Provider == a.Provider && d.Size >= size
			}
			all = all && found
		}
		if all && c.Seq > best {
			best = c.Seq
		}
	}
	return best
}
