package oci_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

func baseParams() oci.SpecParams {
	return oci.SpecParams{
		Rootfs: "/cache/rootfs", Args: []string{"/job", "run"}, Cwd: "/work",
		Env: []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=all"},
		UID: 65534, GID: 65534,
		Binds:       []oci.Bind{{Host: "/jobs/1/root/out", Guest: "/out"}, {Host: "/jobs/1/root/in", Guest: "/in"}},
		MemoryBytes: 256 << 20, CPU: 1.5, Pids: 100, CgroupsPath: "/gpunet/x",
		Enforce:  oci.Enforcement{Cgroups: true, Seccomp: true, CgroupNS: true, MaxNoFile: 20000},
		Hostname: "job",
	}
}

func envOf(s *specs.Spec, key string) []string {
	var out []string
	for _, kv := range s.Process.Env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			out = append(out, v)
		}
	}
	return out
}

func nsTypes(s *specs.Spec) []string {
	var out []string
	for _, n := range s.Linux.Namespaces {
		out = append(out, string(n.Type))
	}
	return out
}

// TestSpecConfinement: the spec of an ordinary job.
func TestSpecConfinement(t *testing.T) {
	s, err := oci.Spec(baseParams())
	if err != nil {
		t.Fatal(err)
	}
	if !s.Root.Readonly || s.Root.Path != "/cache/rootfs" {
		t.Errorf("root %+v, want read-only", s.Root)
	}
	if !s.Process.NoNewPrivileges || s.Process.User.UID != 65534 || s.Process.User.GID != 65534 || s.Process.Terminal {
		t.Errorf("process %+v", s.Process)
	}
	c := s.Process.Capabilities
	if c == nil || len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) != 0 || c.Bounding == nil {
		t.Errorf("capabilities %+v, want all empty (and not nil)", c)
	}
	if got, want := nsTypes(s), []string{"pid", "ipc", "uts", "mount", "network", "cgroup"}; !slices.Equal(got, want) {
		t.Errorf("namespaces %v, want %v", got, want)
	}
	r := s.Linux.Resources
	if r.Memory == nil || *r.Memory.Limit != 256<<20 || *r.Memory.Swap != 256<<20 {
		t.Errorf("memory %+v", r.Memory)
	}
	if r.CPU == nil || *r.CPU.Quota != 150_000 || *r.CPU.Period != 100_000 {
		t.Errorf("cpu %+v", r.CPU)
	}
	if r.Pids == nil || r.Pids.Limit == nil || *r.Pids.Limit != 100 || s.Linux.CgroupsPath != "/gpunet/x" {
		t.Errorf("pids %+v, cgroup %q", r.Pids, s.Linux.CgroupsPath)
	}
	if len(r.Devices) != 1 || r.Devices[0].Allow {
		t.Errorf("devices %+v, want deny all", r.Devices)
	}
	if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActAllow {
		t.Errorf("seccomp %+v", s.Linux.Seccomp)
	}
	for _, rl := range s.Process.Rlimits {
		if rl.Type == "RLIMIT_NOFILE" && rl.Hard != 20000 {
			t.Errorf("nofile %+v, want the host's 20000", rl)
		}
		if rl.Type == "RLIMIT_DATA" || rl.Type == "RLIMIT_NPROC" {
			t.Errorf("rlimit fallback %s with cgroups on", rl.Type)
		}
	}
	// No GPUs: the image's NVIDIA_VISIBLE_DEVICES is replaced, no device
	// is added, and no hook.
	if got := envOf(s, "NVIDIA_VISIBLE_DEVICES"); !slices.Equal(got, []string{"void"}) {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %v, want [void]", got)
	}
	if len(s.Linux.Devices) != 0 {
		t.Errorf("devices %+v for a job without GPUs", s.Linux.Devices)
	}
	if s.Hooks != nil {
		t.Errorf("hooks %+v for a job without GPUs", s.Hooks)
	}
	// Mounts: binds read-write, sorted, /tmp a tmpfs, /sys read-only.
	var binds []string
	for _, m := range s.Mounts {
		switch m.Destination {
		case "/in", "/out":
			if !slices.Contains(m.Options, "rbind") || !slices.Contains(m.Options, "rw") || !slices.Contains(m.Options, "nosuid") {
				t.Errorf("bind %+v", m)
			}
			binds = append(binds, m.Destination+"="+m.Source)
		case "/tmp":
			if m.Type != "tmpfs" {
				t.Errorf("/tmp %+v", m)
			}
		case "/sys":
			if !slices.Contains(m.Options, "ro") {
				t.Errorf("/sys %+v", m)
			}
		}
	}
	if want := []string{"/in=/jobs/1/root/in", "/out=/jobs/1/root/out"}; !slices.Equal(binds, want) {
		t.Errorf("binds %v, want %v", binds, want)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Fatal(err)
	}
}

// TestSpecGPUs: a job given GPU 1 of the two in a CDI spec shaped like
// nvcdi's gets that GPU's device node and the driver's (allowed in the
// devices cgroup), not GPU 0's; the driver's files mounted read-only, its
// libraries also under their SONAMEs and development names; the library
// directory on LD_LIBRARY_PATH after the job's own; and no hook, although
// the spec had three, all running a binary this host does not have.
func TestSpecGPUs(t *testing.T) {
	fx := oci.NewGPUFixture(t)
	for _, id := range []string{"1", oci.FixtureGPU1} {
		t.Run(id, func(t *testing.T) {
			e, dropped, err := oci.GPUEditsFor(t, fx.Spec, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(dropped) != 3 {
				t.Errorf("hooks removed %q, want the spec's 3", dropped)
			}
			p := baseParams()
			p.GPU = e
			p.Env = append(p.Env, "LD_LIBRARY_PATH=/opt/job/lib")
			s, err := oci.Spec(p)
			if err != nil {
				t.Fatal(err)
			}
			devs := map[string]specs.LinuxDevice{}
			for _, d := range s.Linux.Devices {
				devs[d.Path] = d
			}
			for _, want := range []string{"/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"} {
				d, ok := devs[want]
				if !ok || d.Type != "c" {
					t.Errorf("device %s: %+v, want a character device", want, d)
				}
				// The job's user owns its devices, as CDI does it.
				if d.UID == nil || *d.UID != 65534 {
					t.Errorf("device %s owner %v", want, d.UID)
				}
			}
			if _, ok := devs["/dev/nvidia0"]; ok || len(devs) != 3 {
				t.Errorf("devices %v, want nvidia1, nvidiactl and nvidia-uvm only", slices.Sorted(maps.Keys(devs)))
			}
			rules := s.Linux.Resources.Devices
			if len(rules) != 4 || rules[0].Allow {
				t.Errorf("device rules %+v, want deny all, then allow the 3 devices", rules)
			}
			for _, r := range rules[1:] {
				if !r.Allow || r.Type != "c" || r.Major == nil || r.Access != "rwm" {
					t.Errorf("device rule %+v", r)
				}
			}

			mounts := map[string]specs.Mount{}
			for _, m := range s.Mounts {
				mounts[m.Destination] = m
			}
			libcuda := fx.Root + "/usr/lib/x86_64-linux-gnu/nvidia/current/" + oci.FixtureLibcuda
			ptx := fx.Root + "/usr/lib/x86_64-linux-gnu/nvidia/current/" + oci.FixturePTXJIT
			for dst, src := range map[string]string{
				oci.FixtureLibDir + "/" + oci.FixtureLibcuda:         libcuda,
				oci.FixtureLibDir + "/libcuda.so.1":                  libcuda,
				oci.FixtureLibDir + "/libcuda.so":                    libcuda,
				oci.FixtureLibDir + "/" + oci.FixturePTXJIT:          ptx,
				oci.FixtureLibDir + "/libnvidia-ptxjitcompiler.so.1": ptx,
				oci.FixtureLibDir + "/libnvidia-ptxjitcompiler.so":   ptx,
				"/usr/bin/nvidia-smi":                                fx.Root + "/usr/bin/nvidia-smi",
				"/lib/firmware/nvidia/580.65.06/gsp_ga10x.bin":       fx.Root + "/lib/firmware/nvidia/580.65.06/gsp_ga10x.bin",
			} {
				m, ok := mounts[dst]
				if !ok || m.Source != src || !slices.Contains(m.Options, "ro") || !slices.Contains(m.Options, "nosuid") {
					t.Errorf("mount %s: %+v, want %s read-only", dst, m, src)
				}
			}
			for _, dst := range []string{"/usr/bin/libnvidia-smi.so", "/usr/bin/nvidia-smi.so"} {
				if _, ok := mounts[dst]; ok {
					t.Errorf("an alias %s for a file that is no library", dst)
				}
			}
			// The job's own mounts are still there, parents before children.
			if _, ok := mounts["/in"]; !ok {
				t.Error("the job's /in mount is gone")
			}
			seen := map[string]bool{}
			for _, m := range s.Mounts {
				for d := m.Destination; d != "/"; d = path.Dir(d) {
					if d != m.Destination && mounts[d].Destination != "" && !seen[d] {
						t.Errorf("%s is mounted before its parent %s", m.Destination, d)
					}
				}
				seen[m.Destination] = true
			}

			if got := envOf(s, "LD_LIBRARY_PATH"); !slices.Equal(got, []string{"/opt/job/lib:" + oci.FixtureLibDir}) {
				t.Errorf("LD_LIBRARY_PATH = %v, want the job's, then the driver's", got)
			}
			if got := envOf(s, "NVIDIA_VISIBLE_DEVICES"); !slices.Equal(got, []string{"void"}) {
				t.Errorf("NVIDIA_VISIBLE_DEVICES = %v, want [void]", got)
			}
			if s.Hooks != nil {
				t.Errorf("hooks %+v", s.Hooks)
			}
			b, _ := json.Marshal(s)
			if strings.Contains(string(b), "nvidia-cdi-hook") {
				t.Error("the runtime spec names nvidia-cdi-hook")
			}
		})
	}

	// Without a job LD_LIBRARY_PATH, the driver's alone.
	e, _, _ := oci.GPUEditsFor(t, fx.Spec, "0")
	p := baseParams()
	p.GPU = e
	s, err := oci.Spec(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := envOf(s, "LD_LIBRARY_PATH"); !slices.Equal(got, []string{oci.FixtureLibDir}) {
		t.Errorf("LD_LIBRARY_PATH = %v", got)
	}
	for _, d := range s.Linux.Devices {
		if d.Path == "/dev/nvidia1" {
			t.Error("GPU 0's job sees /dev/nvidia1")
		}
	}

	// Rootless: no device cgroup rules (the runtime cannot write them),
	// and no ID-mapped mounts, which CDI asks for in a user namespace.
	p.Enforce = oci.Enforcement{Rootless: true, HostUID: 1000, HostGID: 1000}
	s, err = oci.Spec(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.Linux.Resources.Devices != nil || len(s.Linux.Devices) != 3 {
		t.Errorf("rootless: rules %+v, devices %+v", s.Linux.Resources.Devices, s.Linux.Devices)
	}
	for _, m := range s.Mounts {
		if slices.Contains(m.Options, "idmap") || slices.Contains(m.Options, "ridmap") {
			t.Errorf("rootless: ID-mapped mount %+v", m)
		}
	}

	// A device the spec does not name is refused, naming those it does.
	if _, _, err := oci.GPUEditsFor(t, fx.Spec, "2"); err == nil || !strings.Contains(err.Error(), oci.FixtureGPU0) {
		t.Errorf("unknown GPU: %v", err)
	}
	// Edits with a hook in them are refused.
	e, _, _ = oci.GPUEditsFor(t, fx.Spec, "0")
	e.Hooks = append(e.Hooks, &cdispec.Hook{HookName: "createContainer", Path: "/usr/bin/nvidia-cdi-hook"})
	p.GPU = e
	if _, err := oci.Spec(p); err == nil {
		t.Error("a spec with a hook")
	}
}

// TestPreparedGPUSpec: the spec written for people to read says where it
// came from and which hooks were removed, parses as CDI, has no hook, and
// has the SONAME mounts and LD_LIBRARY_PATH.
func TestPreparedGPUSpec(t *testing.T) {
	fx := oci.NewGPUFixture(t)
	y := oci.PreparedSpecYAML(t, fx.Spec)
	for _, want := range []string{"generated by the test's spec for driver 580.65.06", "removed hook: createContainer nvidia-cdi-hook create-symlinks --link libcuda.so.1::"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("no %q in\n%s", want, y)
		}
	}
	raw, err := cdi.ParseSpec(y)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.ContainerEdits.Hooks) != 0 || len(raw.Devices) != 4 {
		t.Errorf("hooks %d, devices %d", len(raw.ContainerEdits.Hooks), len(raw.Devices))
	}
	if !slices.Contains(raw.ContainerEdits.Env, "LD_LIBRARY_PATH="+oci.FixtureLibDir) {
		t.Errorf("env %v", raw.ContainerEdits.Env)
	}
	// The generator's spec is left as it was.
	if len(fx.Spec.Spec.ContainerEdits.Hooks) != 3 {
		t.Error("preparing changed the generator's spec")
	}
}

// TestSpecFallbacks: without cgroups, memory and processes are limited by
// rlimits and no cgroup is named; without seccomp there is no filter.
func TestSpecFallbacks(t *testing.T) {
	p := baseParams()
	p.Enforce = oci.Enforcement{}
	s, err := oci.Spec(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.Linux.CgroupsPath != "" || s.Linux.Resources.Memory != nil || s.Linux.Resources.CPU != nil || s.Linux.Resources.Pids != nil {
		t.Errorf("cgroup limits without cgroups: %q %+v", s.Linux.CgroupsPath, s.Linux.Resources)
	}
	got := map[string]uint64{}
	for _, r := range s.Process.Rlimits {
		got[r.Type] = r.Hard
	}
	if got["RLIMIT_DATA"] != 256<<20 || got["RLIMIT_NPROC"] != 100 || got["RLIMIT_NOFILE"] != oci.DefaultNoFile {
		t.Errorf("rlimits %v", got)
	}
	if s.Linux.Seccomp != nil {
		t.Error("seccomp filter without seccomp support")
	}
	if slices.Contains(nsTypes(s), "cgroup") {
		t.Error("cgroup namespace where unavailable")
	}
}

// TestSpecRootless: an unprivileged agent maps its own uid to root in a
// user namespace; the job runs as that root.
func TestSpecRootless(t *testing.T) {
	p := baseParams()
	p.Enforce = oci.Enforcement{Rootless: true, HostUID: 1000, HostGID: 1000, Seccomp: true}
	s, err := oci.Spec(p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(nsTypes(s), "user") || len(s.Linux.UIDMappings) != 1 || s.Linux.UIDMappings[0].HostID != 1000 || s.Linux.UIDMappings[0].Size != 1 {
		t.Errorf("namespaces %v, uid mappings %+v", nsTypes(s), s.Linux.UIDMappings)
	}
	if s.Process.User.UID != 0 || s.Process.User.GID != 0 {
		t.Errorf("user %+v, want the one mapped id", s.Process.User)
	}
}

// TestSpecNetwork: a job granted network access shares the host's network
// namespace; otherwise it has one of its own.
func TestSpecNetwork(t *testing.T) {
	p := baseParams()
	p.HostNetwork = true
	s, _ := oci.Spec(p)
	if slices.Contains(nsTypes(s), "network") {
		t.Error("a network namespace for a job granted the host's network")
	}
}

// TestSpecJoinedNetwork: a gang member joins the network namespace its
// agent made (its path in the spec), and /dev/shm has the size asked.
func TestSpecJoinedNetwork(t *testing.T) {
	p := baseParams()
	p.NetNS = "/run/gpunet/netns-job-1"
	p.ShmBytes = 3 << 30
	s, err := oci.Spec(p)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, n := range s.Linux.Namespaces {
		if n.Type == "network" {
			paths = append(paths, n.Path)
		}
	}
	if !slices.Equal(paths, []string{p.NetNS}) {
		t.Errorf("network namespaces %q, want only %s", paths, p.NetNS)
	}
	for _, m := range s.Mounts {
		if m.Destination == "/dev/shm" && !slices.Contains(m.Options, fmt.Sprintf("size=%d", 3<<30)) {
			t.Errorf("/dev/shm options %v, want size=%d", m.Options, 3<<30)
		}
	}
}

// TestDefaultSeccomp: the profile refuses the dangerous calls, clone with
// namespace flags and clone3, for native and 32-bit code.
func TestDefaultSeccomp(t *testing.T) {
	sc := oci.DefaultSeccomp("amd64")
	if !slices.Equal(sc.Architectures, []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}) {
		t.Errorf("architectures %v", sc.Architectures)
	}
	denied := map[string]bool{}
	var cloneFlags uint64
	for _, r := range sc.Syscalls {
		if r.Action != specs.ActErrno {
			t.Errorf("rule %+v does not refuse", r)
		}
		for _, n := range r.Names {
			if n == "clone" {
				if len(r.Args) != 1 || r.Args[0].Op != specs.OpMaskedEqual || r.Args[0].Value != r.Args[0].ValueTwo {
					t.Errorf("clone rule %+v", r)
				}
				cloneFlags |= r.Args[0].Value
				continue
			}
			denied[n] = true
		}
	}
	for _, n := range []string{"mount", "unshare", "setns", "ptrace", "bpf", "keyctl", "init_module", "kexec_load", "perf_event_open", "clone3", "io_uring_setup", "userfaultfd", "reboot"} {
		if !denied[n] {
			t.Errorf("%s is not refused", n)
		}
	}
	const newUser, newNS, newNet = 0x10000000, 0x00020000, 0x40000000
	if cloneFlags&(newUser|newNS|newNet) != newUser|newNS|newNet {
		t.Errorf("clone flags refused %#x", cloneFlags)
	}
}
