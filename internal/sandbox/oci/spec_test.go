package oci_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

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
	// No GPUs: the image's NVIDIA variables are replaced, and no hook.
	if got := envOf(s, "NVIDIA_VISIBLE_DEVICES"); !slices.Equal(got, []string{"void"}) {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %v, want [void]", got)
	}
	if got := envOf(s, "NVIDIA_DRIVER_CAPABILITIES"); got != nil {
		t.Errorf("NVIDIA_DRIVER_CAPABILITIES = %v, want unset", got)
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

// TestSpecGPUs: a job with GPUs gets the NVIDIA hook, and
// NVIDIA_VISIBLE_DEVICES names exactly its assigned devices, whatever the
// image said; the driver capabilities default to compute,utility unless
// the job's environment names its own.
func TestSpecGPUs(t *testing.T) {
	p := baseParams()
	p.GPUs = []string{"GPU-1111", "GPU-3333"}
	p.NVIDIAHook = "/usr/bin/nvidia-container-runtime-hook"
	p.Env = []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"}
	s, err := oci.Spec(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := envOf(s, "NVIDIA_VISIBLE_DEVICES"); !slices.Equal(got, []string{"GPU-1111,GPU-3333"}) {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %v", got)
	}
	if got := envOf(s, "NVIDIA_DRIVER_CAPABILITIES"); !slices.Equal(got, []string{"compute,utility"}) {
		t.Errorf("NVIDIA_DRIVER_CAPABILITIES = %v", got)
	}
	if s.Hooks == nil || len(s.Hooks.Prestart) != 1 {
		t.Fatalf("hooks %+v, want one prestart hook", s.Hooks)
	}
	h := s.Hooks.Prestart[0]
	if h.Path != "/usr/bin/nvidia-container-runtime-hook" || !slices.Equal(h.Args, []string{"nvidia-container-runtime-hook", "prestart"}) {
		t.Errorf("hook %+v", h)
	}
	// The devices cgroup still denies everything the hook does not add.
	if d := s.Linux.Resources.Devices; len(d) != 1 || d[0].Allow {
		t.Errorf("devices %+v", d)
	}

	p.Env = append(p.Env, "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video")
	s, _ = oci.Spec(p)
	if got := envOf(s, "NVIDIA_DRIVER_CAPABILITIES"); !slices.Equal(got, []string{"compute,utility,video"}) {
		t.Errorf("NVIDIA_DRIVER_CAPABILITIES = %v, want the job's", got)
	}

	p.NVIDIAHook = ""
	if _, err := oci.Spec(p); err == nil {
		t.Error("GPUs without a hook gave a spec")
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
