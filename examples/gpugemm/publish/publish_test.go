package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/gpugemm/gemmimage"
	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// TestExampleImage builds the GPU example's image as publish does and
// runs it with runc: the program and the glibc it brings start in the
// container, compute the product on the CPU (-cpu) exactly as this process
// does, and without a GPU say so and fail; the spec publish writes is a
// valid one-GPU oci job. (The GPU path runs on a GPU machine:
// BENCHMARKS.md.)
func TestExampleImage(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the example image is linux/amd64")
	}
	ex, err := oci.New(t.Context(), oci.Options{Dir: t.TempDir()})
	ocitest.RequireRunc(t, nil, err)
	defer ex.Close()

	bin := filepath.Join(t.TempDir(), "gpugemm")
	if err := gemmimage.BuildProgram(t.Context(), "../../..", bin); err != nil {
		t.Fatal(err)
	}
	img, err := gemmimage.Build(bin)
	if err != nil {
		t.Fatal(err)
	}
	reg := ocitest.Registry(t, nil)
	ref := ocitest.Push(t, reg, "gpunet/gpugemm", img)

	spec, err := gemmimage.Spec(ref, gemmimage.SpecOptions{Size: "256 512 256", Seed: "test seed", Verification: "spot"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := jobspec.Parse([]byte(spec), t.TempDir())
	if err != nil {
		t.Fatalf("the published spec: %v\n%s", err, spec)
	}
	if s.Executor != "oci" || s.Resources.GPU.Count != 1 || !s.IsDeterministic() || !strings.Contains(s.Image, "@sha256:") {
		t.Fatalf("the published spec: %+v", s)
	}

	size := challenge.Size{N: 256, K: 512, M: 256}
	cm, err := (&prove.CPU{}).Commit(context.Background(), challenge.Challenge{Seed: sha256.Sum256([]byte("test seed")), Size: size, Openings: 1})
	if err != nil {
		t.Fatal(err)
	}
	root := cm.Root()
	cm.Close()
	want := fmt.Sprintf("int8 GEMM %s seed %q: C's Merkle root %x\n", size, "test seed", root)

	run := func(args ...string) (*sandbox.Result, string) {
		work := filepath.Join(t.TempDir(), "w")
		os.MkdirAll(work, 0o700)
		var logs bytes.Buffer
		res, err := ex.Run(t.Context(), &sandbox.Job{
			ID: t.Name(), Image: ref, Args: args, WorkDir: work, Outputs: []string{"/out"},
			Limits: sandbox.Limits{Timeout: time.Minute, MemoryBytes: 1 << 30},
		}, &logs)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(res.OutputDir) })
		return res, logs.String()
	}
	res, logs := run("-cpu", "-out", "/out", "256", "512", "256", "test seed")
	got, _ := os.ReadFile(filepath.Join(res.OutputDir, "out", "result.txt"))
	if res.Failed || string(got) != want {
		t.Fatalf("-cpu in the container: %+v, result %q, want %q\n%s", res, got, want, logs)
	}
	res, logs = run("-out", "/out", "256", "512", "256", "test seed")
	if !res.Failed || !strings.Contains(logs, "no GPU") {
		t.Fatalf("without a GPU: %+v\n%s", res, logs)
	}
}
