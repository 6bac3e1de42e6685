// Package torchrun is the PyTorch cluster example (issue 30): a gang whose
// members run train.py with PyTorch's own launcher, torchrun, over the
// gang's private network (gloo on CPU), in an image built from Debian's
// packages installed on this machine. It builds that image (Build) and
// writes the job specs that run it (Spec); the image command pushes it
// to a loopback registry:
//
//	apt-get install --no-install-recommends python3-torch
//	go run ./examples/torchrun/image -registry 127.0.0.1:5000 -out /tmp/torchrun
//	gpunet job run /tmp/torchrun/gang.yaml
//
// The image holds Debian's python3-torch with the Python packages it
// depends on, dash (for the spec's `sh -c`), every shared library the
// loader maps for them, and train.py at /job/train.py: 566 MB from 293
// packages here (208 MB as its zstd layer). Its bytes depend only on the
// installed packages' versions (listed in the image at
// debimage.ManifestPath).
package torchrun

import (
	"context"
	_ "embed"
	"fmt"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/gpunet/gpunet/examples/internal/debimage"
	"github.com/gpunet/gpunet/examples/internal/progimage"
)

// Program is train.py: the example's program.
//
//go:embed train.py
var Program []byte

// Repo is the repository the image is pushed to in a registry.
const Repo = "gpunet/torchrun"

// ProgramPath is where the image holds train.py.
const ProgramPath = "/job/train.py"

// Packages are the installed Debian packages the image is built from:
// PyTorch (with the Python packages it depends on) and a shell.
var Packages = []string{"python3-torch", "dash"}

// Supported says why this machine cannot build the image, or nil: it
// must be linux/amd64 with Debian's python3-torch installed.
func Supported() error {
	if err := progimage.Supported(); err != nil {
		return err
	}
	if err := debimage.Installed(Packages...); err != nil {
		return fmt.Errorf("%w (apt-get install --no-install-recommends python3-torch dash)", err)
	}
	return nil
}

// follow takes a dependency in whole when it is Python's: the interpreter,
// its standard library and the Python packages torch imports. Other
// dependencies (C libraries) come in as the loader needs them.
func follow(pkg string) bool {
	return strings.HasPrefix(pkg, "python3") || strings.HasPrefix(pkg, "libpython3")
}

// exclude drops what no run reads: documentation, manuals, translations,
// C headers, type stubs, the standard library's and packages' test suites,
// Python's IDE and Tk bindings, and torch's C++ test binaries.
func exclude(p string) bool {
	for _, pre := range []string{
		"/usr/share/doc/", "/usr/share/man/", "/usr/share/info/", "/usr/share/locale/", "/usr/share/lintian/",
		"/usr/include/", "/usr/lib/python3.11/test/", "/usr/lib/python3.11/idlelib/", "/usr/lib/python3.11/tkinter/",
		"/usr/lib/python3/dist-packages/torch/include/",
	} {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	if d, f := path.Split(p); d == "/usr/lib/python3/dist-packages/torch/bin/" && f != "torch_shm_manager" {
		return true // C++ tests; import torch runs torch_shm_manager
	}
	if strings.HasSuffix(p, ".h") || strings.HasSuffix(p, ".pyi") {
		return true
	}
	if strings.HasPrefix(p, "/usr/lib/python3/dist-packages/") {
		// numpy/core/tests, sympy/*/tests, …: packages' own test suites,
		// which nothing imports (torch.testing is no such directory).
		for _, part := range strings.Split(path.Dir(p), "/") {
			if part == "tests" {
				return true
			}
		}
	}
	return false
}

// Resolve finds the image's files on this machine.
func Resolve(ctx context.Context) (*debimage.Root, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	return debimage.Resolve(ctx, debimage.Spec{
		Packages: Packages,
		Follow:   follow,
		Exclude:  exclude,
		Files: map[string]debimage.File{
			strings.TrimPrefix(ProgramPath, "/"): {Data: Program},
			"etc/passwd":                         {Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")},
			"etc/group":                          {Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		},
	})
}

// Env is the image's environment. Python compiles its modules under /tmp
// (the root is read-only), where torchrun's worker finds what its agent
// compiled.
var Env = []string{
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"PYTHONPYCACHEPREFIX=/tmp/pycache",
	"PYTHONUNBUFFERED=1",
}

// Build resolves and makes the image; its entrypoint is python3 running
// train.py (a single job's `-local N` run needs only args).
func Build(ctx context.Context) (v1.Image, *debimage.Root, error) {
	root, err := Resolve(ctx)
	if err != nil {
		return nil, nil, err
	}
	img, err := root.Image(debimage.Config{Entrypoint: []string{"/usr/bin/python3", ProgramPath}, Env: Env})
	return img, root, err
}

// SpecOptions say what job a spec asks the image for.
type SpecOptions struct {
	// Nodes is the gang's members (2 or more), or 1 for the one-process
	// run (train.py --local Local).
	Nodes int
	// Local is the ranks the one-process run stands for (Nodes 1 only).
	Local int
	// Elems, Steps and Seed are train.py's --elems, --steps and --seed.
	Elems, Steps, Seed int
}

// Launch is the shell command a gang member runs: torchrun with the
// variables gpunet gives each member (docs/clusters.md), one process per
// member, gloo on the gang's interface (GLOO_SOCKET_IFNAME in the spec).
// --redirects and --tee name a stream because torch 1.13's defaults ("0")
// fail under Python 3.11 (Debian 12's): Std.from_str("0") is None there,
// since a 0-valued flag is no longer among an IntFlag's members. "0:2"
// tees local rank 0's stderr, so stdout and stderr both reach the log.
const Launch = `exec torchrun --nnodes "$NNODES" --node_rank "$NODE_RANK" --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" --nproc_per_node 1 --monitor_interval 1 --redirects 0:2 --tee 0:2`

// Spec is the job spec running the image at ref (by digest).
func Spec(ref string, o SpecOptions) (string, error) {
	switch {
	case o.Nodes < 1:
		return "", fmt.Errorf("nodes %d: want 1 (the one-process run) or more", o.Nodes)
	case o.Nodes == 1 && o.Local < 1:
		return "", fmt.Errorf("local %d: the one-process run stands for 1 or more ranks", o.Local)
	case o.Nodes > 1 && o.Local != 0:
		return "", fmt.Errorf("local %d: only the one-process run (nodes 1) takes it", o.Local)
	case o.Elems < 1 || o.Steps < 1:
		return "", fmt.Errorf("elems %d, steps %d: want 1 or more", o.Elems, o.Steps)
	}
	args := fmt.Sprintf("--out /out --elems %d --steps %d --seed %d", o.Elems, o.Steps, o.Seed)
	if o.Nodes == 1 {
		return fmt.Sprintf(`# The PyTorch example (examples/torchrun) as one process standing for
# %d ranks: what the gang of %d must give.
name: torchrun-local
executor: oci
image: %s
args: [--local, "%d", %s]
outputs: [/out]
resources: {cpu: 1, memory: 1GiB}
max_price: 1
timeout: 10m
verification: none
`, o.Local, o.Local, ref, o.Local, strings.ReplaceAll(args, " ", ", ")), nil
	}
	return fmt.Sprintf(`# The PyTorch example (examples/torchrun): a gang of %d, each member
# running torchrun with the variables gpunet sets (docs/clusters.md);
# gloo (CPU) over the gang's interface, gpunet0.
name: torchrun
executor: oci
image: %s
command: [/bin/sh, -c, '%s %s %s']
env: {GLOO_SOCKET_IFNAME: gpunet0, OMP_NUM_THREADS: "1"}
outputs: [/out]
resources: {nodes: %d, cpu: 1, memory: 2GiB, shm: 256MiB}
max_price: 1
timeout: 10m
`, o.Nodes, ref, Launch, ProgramPath, args, o.Nodes), nil
}
