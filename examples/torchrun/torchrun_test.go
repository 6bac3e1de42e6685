package torchrun

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/jobspec"
)

const testRef = "127.0.0.1:5000/gpunet/torchrun@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestSpec: the specs the image command writes are valid job specs, a
// gang of Nodes members launching torchrun with gpunet's variables and
// gloo on gpunet0, and the one-process run; bad options are refused.
func TestSpec(t *testing.T) {
	text, err := Spec(testRef, SpecOptions{Nodes: 3, Elems: 10, Steps: 2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	s, err := jobspec.Parse([]byte(text), t.TempDir())
	if err != nil {
		t.Fatalf("the gang's spec: %v\n%s", err, text)
	}
	cmd := strings.Join(s.Command, " ")
	for _, want := range []string{`--nnodes "$NNODES"`, `--node_rank "$NODE_RANK"`, `--master_addr "$MASTER_ADDR"`, `--master_port "$MASTER_PORT"`, ProgramPath + " --out /out --elems 10 --steps 2 --seed 5"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("the gang's command %q has no %q", cmd, want)
		}
	}
	if s.Resources.Nodes != 3 || s.Image != testRef || s.Env["GLOO_SOCKET_IFNAME"] != "gpunet0" || s.Command[0] != "/bin/sh" {
		t.Errorf("the gang's spec: %+v", s)
	}
	text, err = Spec(testRef, SpecOptions{Nodes: 1, Local: 3, Elems: 10, Steps: 2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	s, err = jobspec.Parse([]byte(text), t.TempDir())
	if err != nil {
		t.Fatalf("the one-process spec: %v\n%s", err, text)
	}
	if got := strings.Join(s.Args, " "); s.Resources.Nodes > 1 || len(s.Command) != 0 || got != "--local 3 --out /out --elems 10 --steps 2 --seed 5" {
		t.Errorf("the one-process spec: args %q, %+v", got, s)
	}
	for _, o := range []SpecOptions{
		{Nodes: 0, Elems: 1, Steps: 1},
		{Nodes: 1, Elems: 1, Steps: 1},
		{Nodes: 2, Local: 2, Elems: 1, Steps: 1},
		{Nodes: 2, Elems: 0, Steps: 1},
	} {
		if _, err := Spec(testRef, o); err == nil {
			t.Errorf("Spec(%+v): no error", o)
		}
	}
}

// TestExclude: documentation, test suites and torch's C++ tests stay
// out; what import torch runs or reads stays in.
func TestExclude(t *testing.T) {
	for p, want := range map[string]bool{
		"/usr/share/doc/python3-torch/copyright":                         true,
		"/usr/lib/python3/dist-packages/numpy/core/tests/test_api.py":    true,
		"/usr/lib/python3/dist-packages/torch/bin/test_jit":              true,
		"/usr/lib/python3.11/test/test_os.py":                            true,
		"/usr/lib/python3/dist-packages/torch/_C/__init__.pyi":           true,
		"/usr/lib/python3/dist-packages/torch/bin/torch_shm_manager":     false,
		"/usr/lib/python3/dist-packages/torch/testing/_comparison.py":    false,
		"/usr/lib/python3/dist-packages/torch/distributed/run.py":        false,
		"/usr/lib/python3.11/unittest/__init__.py":                       false,
		"/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13":                 false,
		"/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.so": false,
	} {
		if got := exclude(p); got != want {
			t.Errorf("exclude(%s) = %v, want %v", p, got, want)
		}
	}
}

// TestImageReproducible: two builds of the image on this machine give
// the same root, byte for byte, holding what a run needs (Python,
// torchrun, torch's shared library and torch_shm_manager, the shell).
// The image runs in internal/provider's TestGangTorchrun.
func TestImageReproducible(t *testing.T) {
	if err := Supported(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	digest := func() (string, []string) {
		root, err := Resolve(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"usr/bin/python3", "usr/bin/torchrun", "usr/bin/dash", "usr/bin/sh", "job/train.py",
			"usr/lib/python3/dist-packages/torch/bin/torch_shm_manager", "usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13", "usr/lib64/ld-linux-x86-64.so.2"} {
			if !root.Has(p) {
				t.Errorf("the root has no %s", p)
			}
		}
		h := sha256.New()
		if err := root.WriteTar(h); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(h.Sum(nil)), root.Manifest
	}
	a, man := digest()
	b, _ := digest()
	if a != b {
		t.Errorf("two builds: roots with sha256 %s and %s", a, b)
	}
	if !strings.Contains(strings.Join(man, "\n"), "python3-torch 1.13") {
		t.Errorf("the manifest does not name python3-torch 1.13: %q", man)
	}
}
