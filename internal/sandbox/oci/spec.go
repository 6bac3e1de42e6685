package oci

import (
	"fmt"
	"path"
	"runtime"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// SpecParams is everything a job's OCI runtime spec (config.json) is made
// from. Spec turns it into the spec; it reads no files, so that what a job
// gets is decided here, in one place, and unit-tested.
type SpecParams struct {
	// Rootfs is the host path of the container's root, mounted read-only.
	Rootfs string
	// Args is the whole argv, Env the whole environment (KEY=value), Cwd
	// the absolute working directory.
	Args []string
	Env  []string
	Cwd  string
	// UID and GID are the job's user; AdditionalGIDs its supplementary
	// groups.
	UID, GID       uint32
	AdditionalGIDs []uint32
	// Binds are the job's writable directories (its work dir's inputs and
	// outputs) at their guest paths.
	Binds []Bind
	// MemoryBytes, CPU (cores) and Pids are the limits; 0 means none.
	MemoryBytes uint64
	CPU         float64
	Pids        int64
	// TmpBytes sizes the job's /tmp (a tmpfs, counted in its memory).
	TmpBytes uint64
	// Enforce says how the host enforces the limits and what it supports.
	Enforce Enforcement
	// CgroupsPath is the container's cgroup (runc's cgroupfs driver), when
	// Enforce.Cgroups.
	CgroupsPath string
	// HostNetwork shares the host's network namespace (a job that asked
	// for network access, on a provider that allows it); otherwise the job
	// has a network namespace of its own with only loopback.
	HostNetwork bool
	// NetNS is the path of a network namespace the job joins instead of
	// one of its own (a gang member's, which holds its private network:
	// Executor.NewNetNS); "": a new one, or the host's with HostNetwork.
	NetNS string
	// ShmBytes sizes /dev/shm (a tmpfs, counted in the job's memory);
	// 0: TmpBytes.
	ShmBytes uint64
	// GPU are the CDI edits of the job's GPUs (their device nodes, the
	// driver's, the driver's files): what gpuDevices.edits returns for
	// the devices the job was assigned. nil: no GPU.
	GPU *cdispec.ContainerEdits
	// Hostname inside the container.
	Hostname string
}

// Bind is a host directory or file mounted read-write at a guest path.
type Bind struct {
	Host, Guest string
}

// Enforcement is what the host lets the executor enforce, as the probe
// found it.
type Enforcement struct {
	// Cgroups: memory, CPU and pids limits through cgroups. Without them
	// memory falls back to RLIMIT_DATA and pids to RLIMIT_NPROC, and CPU is
	// not limited.
	Cgroups bool
	// CgroupNS: the cgroup namespace is available.
	CgroupNS bool
	// Seccomp: runc can load a seccomp filter.
	Seccomp bool
	// Rootless: the executor is not root. The job then runs as root in a
	// user namespace that maps it to the provider's own user.
	Rootless bool
	// HostUID and HostGID are the provider's ids (rootless).
	HostUID, HostGID uint32
	// MaxNoFile caps the job's open files: the agent's own hard limit,
	// which a container cannot exceed (0: DefaultNoFile).
	MaxNoFile uint64
}

// DefaultNoFile is a job's open-file limit where the host allows it.
const DefaultNoFile = 65536

// envNVIDIADevices is the variable by which NVIDIA's runtime wrappers
// (nvidia-container-runtime, in legacy mode) pick the GPUs to inject.
const envNVIDIADevices = "NVIDIA_VISIBLE_DEVICES"

// Spec builds the runtime spec of a job.
//
// The job gets new pid, ipc, uts and mount namespaces, a network namespace
// of its own (loopback only) unless HostNetwork, and a cgroup namespace
// where available; a read-only rootfs with writable Binds, /tmp and
// /dev/shm; no capabilities, no-new-privileges, a non-root user, the
// seccomp profile of DefaultSeccomp where available, and the limits by
// cgroups or, failing that, rlimits. A job's GPUs are its GPU edits,
// applied with the CDI library: device nodes (allowed in the devices
// cgroup), read-only mounts of the driver's files, LD_LIBRARY_PATH after
// the job's own; never a hook. NVIDIA_VISIBLE_DEVICES is "void" whatever
// the image or the job say (CUDA images say "all"), so that even a runc
// that is really NVIDIA's runtime wrapper injects nothing more.
func Spec(p SpecParams) (*specs.Spec, error) {
	if p.Rootfs == "" || len(p.Args) == 0 || !path.IsAbs(p.Cwd) {
		return nil, fmt.Errorf("spec: rootfs, args and an absolute cwd are required")
	}
	env := withoutNVIDIADevices(p.Env)
	uid, gid := p.UID, p.GID
	if p.Enforce.Rootless {
		// Only the provider's own id is mapped, as root.
		uid, gid = 0, 0
	}
	s := &specs.Spec{
		// The version runc 1.1 (Debian 12) implements; newer runcs accept it.
		Version:  "1.0.2",
		Hostname: p.Hostname,
		Root:     &specs.Root{Path: p.Rootfs, Readonly: true},
		Process: &specs.Process{
			Terminal: false,
			User:     specs.User{UID: uid, GID: gid, AdditionalGids: p.AdditionalGIDs},
			Args:     p.Args,
			Env:      env,
			Cwd:      p.Cwd,
			// No capabilities at all: empty sets, not nil (nil would mean
			// "leave as is").
			Capabilities: &specs.LinuxCapabilities{
				Bounding: []string{}, Effective: []string{}, Permitted: []string{},
				Inheritable: []string{}, Ambient: []string{},
			},
			NoNewPrivileges: true,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: nofile(p.Enforce), Soft: nofile(p.Enforce)},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
			},
			// The kernel's OOM killer picks the job before the agent.
			OOMScoreAdj: ptr(500),
		},
		Mounts: baseMounts(p),
		Linux: &specs.Linux{
			Namespaces: namespaces(p),
			Resources: &specs.LinuxResources{
				Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
			},
			MaskedPaths: []string{
				"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
				"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
				"/sys/firmware", "/sys/devices/virtual/powercap",
			},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	if p.Enforce.Rootless {
		s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: p.Enforce.HostUID, Size: 1}}
		s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: p.Enforce.HostGID, Size: 1}}
		s.Process.User.AdditionalGids = nil
		// A rootless runtime cannot write device cgroup rules.
		s.Linux.Resources.Devices = nil
	}
	limits(s, p)
	if p.Enforce.Seccomp {
		s.Linux.Seccomp = DefaultSeccomp(runtime.GOARCH)
	}
	if p.GPU != nil {
		if err := applyGPUEdits(s, p.GPU, p.Enforce.Rootless); err != nil {
			return nil, fmt.Errorf("spec: %w", err)
		}
	}
	return s, nil
}

// withoutNVIDIADevices replaces NVIDIA_VISIBLE_DEVICES with "void".
func withoutNVIDIADevices(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != envNVIDIADevices {
			out = append(out, kv)
		}
	}
	return append(out, envNVIDIADevices+"=void")
}

func namespaces(p SpecParams) []specs.LinuxNamespace {
	ns := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace},
	}
	switch {
	case p.NetNS != "":
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: p.NetNS})
	case !p.HostNetwork:
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	if p.Enforce.CgroupNS {
		ns = append(ns, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}
	if p.Enforce.Rootless {
		ns = append(ns, specs.LinuxNamespace{Type: specs.UserNamespace})
	}
	return ns
}

func baseMounts(p SpecParams) []specs.Mount {
	devpts := []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}
	if !p.Enforce.Rootless {
		devpts = append(devpts, "gid=5")
	}
	tmp := p.TmpBytes
	if tmp == 0 {
		tmp = 64 << 20
	}
	shm := p.ShmBytes
	if shm == 0 {
		shm = tmp
	}
	ms := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: devpts},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", fmt.Sprintf("size=%d", shm)}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
	}
	if p.Enforce.Rootless && p.HostNetwork {
		// sysfs needs a network namespace of one's own when rootless.
		ms = append(ms, specs.Mount{Destination: "/sys", Type: "none", Source: "/sys", Options: []string{"rbind", "nosuid", "noexec", "nodev", "ro"}})
	} else {
		ms = append(ms, specs.Mount{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}})
	}
	hasTmp := false
	binds := append([]Bind(nil), p.Binds...)
	sort.Slice(binds, func(i, j int) bool { return binds[i].Guest < binds[j].Guest })
	for _, b := range binds {
		if b.Guest == "/tmp" {
			hasTmp = true
		}
		ms = append(ms, specs.Mount{Destination: b.Guest, Type: "none", Source: b.Host, Options: []string{"rbind", "rw", "nosuid", "nodev"}})
	}
	if !hasTmp {
		ms = append(ms, specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", tmp)}})
	}
	return ms
}

// cpuPeriod is the CFS period CPU quotas are expressed in.
const cpuPeriod = 100_000

func limits(s *specs.Spec, p SpecParams) {
	if p.Enforce.Cgroups {
		s.Linux.CgroupsPath = p.CgroupsPath
		r := s.Linux.Resources
		if p.MemoryBytes > 0 {
			m := int64(p.MemoryBytes)
			// Swap included: a job cannot page its way past its limit.
			r.Memory = &specs.LinuxMemory{Limit: &m, Swap: &m}
		}
		if p.CPU > 0 {
			q := int64(p.CPU * cpuPeriod)
			q = max(q, 1000) // the kernel's minimum quota is 1 ms
			r.CPU = &specs.LinuxCPU{Quota: &q, Period: ptr(uint64(cpuPeriod))}
		}
		if p.Pids > 0 {
			r.Pids = &specs.LinuxPids{Limit: &p.Pids}
		}
		return
	}
	// No cgroups: rlimits, which are per process (memory) or per user
	// (processes), so weaker; Probe says so. RLIMIT_DATA rather than
	// RLIMIT_AS: Go and CUDA programs reserve far more address space than
	// they use, and would not even start under an address-space cap.
	if p.MemoryBytes > 0 {
		s.Process.Rlimits = append(s.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_DATA", Hard: p.MemoryBytes, Soft: p.MemoryBytes})
	}
	if p.Pids > 0 {
		s.Process.Rlimits = append(s.Process.Rlimits, specs.POSIXRlimit{Type: "RLIMIT_NPROC", Hard: uint64(p.Pids), Soft: uint64(p.Pids)})
	}
}

func ptr[T any](v T) *T { return &v }

func nofile(e Enforcement) uint64 {
	if e.MaxNoFile == 0 {
		return DefaultNoFile
	}
	return min(e.MaxNoFile, DefaultNoFile)
}

// errnoEPERM and errnoENOSYS are the errors denied system calls return.
const (
	errnoEPERM  = 1
	errnoENOSYS = 38
)

// deniedSyscalls are the system calls DefaultSeccomp refuses with EPERM:
// those Docker's default profile keeps from unprivileged containers (kernel
// modules and keyrings, mounts and namespaces, clocks, swap, reboot, BPF,
// perf, ptrace and other processes' memory, io_uring, userfaultfd, the
// 32-bit vm86 and I/O port calls). Names a kernel or architecture lacks are
// ignored by runc.
var deniedSyscalls = []string{
	"_sysctl", "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module",
	"delete_module", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms",
	"init_module", "io_uring_enter", "io_uring_register", "io_uring_setup", "ioperm", "iopl",
	"kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr",
	"move_mount", "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree",
	"perf_event_open", "pivot_root", "process_vm_readv", "process_vm_writev", "ptrace",
	"query_module", "quotactl", "quotactl_fd", "reboot", "request_key", "setns", "settimeofday",
	"stime", "swapoff", "swapon", "sysfs", "syslog", "umount", "umount2", "unshare", "uselib",
	"userfaultfd", "ustat", "vm86", "vm86old",
}

// cloneNamespaceFlags are the clone(2) flags that make new namespaces.
var cloneNamespaceFlags = []uint64{
	0x00000080, // CLONE_NEWTIME
	0x00020000, // CLONE_NEWNS
	0x02000000, // CLONE_NEWCGROUP
	0x04000000, // CLONE_NEWUTS
	0x08000000, // CLONE_NEWIPC
	0x10000000, // CLONE_NEWUSER
	0x20000000, // CLONE_NEWPID
	0x40000000, // CLONE_NEWNET
}

// DefaultSeccomp is the seccomp profile of every job: everything allowed
// but deniedSyscalls (EPERM), clone with a namespace flag (EPERM), and
// clone3 (ENOSYS, whose flags a filter cannot read; C libraries then fall
// back to clone). It covers the architecture's 32-bit compatibility mode
// too, so a 32-bit binary cannot step around it.
func DefaultSeccomp(goarch string) *specs.LinuxSeccomp {
	var archs []specs.Arch
	switch goarch {
	case "amd64":
		archs = []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		archs = []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	case "ppc64le":
		archs = []specs.Arch{specs.ArchPPC64LE}
	case "s390x":
		archs = []specs.Arch{specs.ArchS390X, specs.ArchS390}
	case "riscv64":
		archs = []specs.Arch{specs.ArchRISCV64}
	}
	eperm, enosys := uint(errnoEPERM), uint(errnoENOSYS)
	sc := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: archs,
		Syscalls: []specs.LinuxSyscall{
			{Names: deniedSyscalls, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	// On s390x the flags are clone's second argument.
	idx := uint(0)
	if goarch == "s390x" {
		idx = 1
	}
	for _, f := range cloneNamespaceFlags {
		sc.Syscalls = append(sc.Syscalls, specs.LinuxSyscall{
			Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: idx, Value: f, ValueTwo: f, Op: specs.OpMaskedEqual}},
		})
	}
	return sc
}
