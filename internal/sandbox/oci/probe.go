package oci

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is wrapped by New and Probe when this machine cannot run
// containers (no runc, or a runc that cannot start one).
var ErrUnavailable = errors.New("oci executor unavailable")

// Capabilities are what the executor can enforce on this machine, as Probe
// found it by looking at the host and starting a trial container. Each
// string field is a line a provider operator can read: the mechanism, or
// the fallback and why.
type Capabilities struct {
	Runc    string `json:"runc"`
	Version string `json:"version"`
	// Rootless is true when the agent is not root.
	Rootless bool   `json:"rootless"`
	Cgroups  string `json:"cgroups"` // "v1", "v2" or "none"
	Memory   string `json:"memory"`
	CPU      string `json:"cpu"`
	Pids     string `json:"pids"`
	Seccomp  string `json:"seccomp"`
	Rootfs   string `json:"rootfs"`
	User     string `json:"user"`
	Network  string `json:"network"`
	Disk     string `json:"disk"`
	GPU      string `json:"gpu"`
	// Pause is how the executor pauses its containers while the provider
	// proves a hardware challenge on the CPU (pause.go).
	Pause string `json:"pause"`

	// Enforce is what job specs are generated with.
	Enforce Enforcement `json:"-"`
	// Overlay: each job's rootfs is an overlay over the cached image.
	Overlay bool `json:"overlay"`
	// GPUSpec is the CDI spec GPU jobs get, as written for people to read
	// (Dir/cdi/nvidia.yaml); "" without GPUs.
	GPUSpec string `json:"gpu_spec,omitempty"`
	cg      cgroupHost
	// gpus are the GPUs jobs may be given; nil without, and noGPU says why.
	gpus  *gpuDevices
	noGPU string
}

// Lines are the capabilities as "what: how" lines, for the agent's log.
func (c *Capabilities) Lines() []string {
	return []string{
		"runtime: " + c.Version + " (" + c.Runc + ")",
		"memory limit: " + c.Memory,
		"cpu limit: " + c.CPU,
		"pids limit: " + c.Pids,
		"seccomp: " + c.Seccomp,
		"rootfs: " + c.Rootfs,
		"user: " + c.User,
		"network: " + c.Network,
		"disk: " + c.Disk,
		"gpu: " + c.GPU,
		"pause: " + c.Pause,
	}
}

// ProbeOptions are the parts of Options Probe uses.
type probeEnv struct {
	dir          string
	runcPath     string
	cdi          CDIGenerator
	allowNetwork bool
	log          *slog.Logger
}

// Probe finds runc and learns what this machine lets a container
// executor enforce: it looks at cgroups, seccomp support, overlayfs and the
// GPUs (a CDI spec from o.CDI, written to o.Dir/cdi/nvidia.yaml), then starts a trial container with everything on, and
// falls back step by step (no seccomp, no cgroups) until one starts,
// saying so in the result. It returns an error wrapping ErrUnavailable when
// runc is missing or no trial container starts. dir is a scratch directory
// it may write to.
func Probe(ctx context.Context, o Options) (*Capabilities, error) {
	gen := o.CDI
	if gen == nil {
		gen = NVCDI{Logger: o.Logger}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return probe(ctx, probeEnv{dir: o.Dir, runcPath: o.Runc, cdi: gen, allowNetwork: o.AllowNetwork, log: log})
}

func probe(ctx context.Context, pe probeEnv) (*Capabilities, error) {
	path, err := findRunc(pe.runcPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	rc := &runc{path: path, root: filepath.Join(pe.dir, "runc")}
	if err := os.MkdirAll(rc.root, 0o700); err != nil {
		return nil, err
	}
	c := &Capabilities{Runc: path, Disk: "checked when outputs are collected (no quota while the job runs)"}
	if c.Version, err = rc.version(ctx); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	feat := rc.features(ctx)
	c.Rootless = os.Geteuid() != 0
	c.Enforce.Rootless = c.Rootless
	c.Enforce.HostUID, c.Enforce.HostGID = uint32(os.Geteuid()), uint32(os.Getegid())
	var nf unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &nf) == nil && nf.Max != unix.RLIM_INFINITY {
		c.Enforce.MaxNoFile = nf.Max
	}
	c.cg = detectCgroups()
	c.Cgroups = c.cg.version()
	cgOK, cgWhy := c.cg.writable(), ""
	switch {
	case c.Rootless:
		cgOK, cgWhy = false, "the agent is not root"
	case c.Cgroups == "none":
		cgOK, cgWhy = false, "no cgroup file system mounted"
	case !cgOK:
		cgWhy = "the cgroup file system is not writable"
	}
	c.Enforce.Seccomp = true
	if feat != nil && feat.Linux.Seccomp != nil && feat.Linux.Seccomp.Enabled != nil && !*feat.Linux.Seccomp.Enabled {
		c.Enforce.Seccomp = false
	}
	c.Enforce.CgroupNS = feat == nil || contains(feat.Linux.Namespaces, "cgroup")
	if _, err := os.Stat("/proc/self/ns/cgroup"); err != nil {
		c.Enforce.CgroupNS = false
	}

	// The trial: everything on, then less, until a container starts.
	type attempt struct{ cgroups, seccomp bool }
	var firstErr error
	ok := false
	for _, a := range []attempt{{cgOK, c.Enforce.Seccomp}, {false, c.Enforce.Seccomp}, {cgOK, false}, {false, false}} {
		if (a.cgroups && !cgOK) || (a.seccomp && !c.Enforce.Seccomp) {
			continue
		}
		e := c.Enforce
		e.Cgroups, e.Seccomp = a.cgroups, a.seccomp
		err := trial(ctx, rc, pe.dir, e)
		if err == nil {
			if cgOK && !a.cgroups {
				cgWhy = "runc could not set cgroup limits: " + firstLine(firstErr)
			}
			if c.Enforce.Seccomp && !a.seccomp {
				c.Seccomp = "unavailable (runc could not load a filter: " + firstLine(firstErr) + ")"
			}
			c.Enforce.Cgroups, c.Enforce.Seccomp = a.cgroups, a.seccomp
			ok = true
			break
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s cannot start a trial container: %v", ErrUnavailable, c.Version, firstErr)
	}

	cgName := "cgroup " + c.Cgroups
	switch {
	case c.Enforce.Cgroups:
		c.Memory = cgName + " (memory+swap, OOM kills reported)"
		c.CPU = cgName + " (CFS quota)"
		c.Pids = cgName
		if !c.cg.has("memory") {
			c.Memory = "unavailable (no memory controller)"
		}
		if !c.cg.has("cpu") {
			c.CPU = "unavailable (no cpu controller)"
		}
		if !c.cg.has("pids") {
			c.Pids = "unavailable (no pids controller)"
		}
	default:
		c.Memory = "RLIMIT_DATA per process (private writable memory), falling back because " + cgWhy + " (an out-of-memory job fails as its program reports it)"
		c.CPU = "unavailable (" + cgWhy + "): jobs are not limited to their cores"
		c.Pids = "RLIMIT_NPROC, falling back because " + cgWhy + " (counted per user, over all jobs)"
	}
	switch {
	case c.Enforce.Cgroups && c.cg.has("freezer"):
		c.Pause = cgName + " freezer (runc pause) while the provider proves a hardware challenge on the CPU"
	case c.Enforce.Cgroups:
		c.Pause = "unavailable (no freezer controller): containers keep running while the provider proves a hardware challenge"
	default:
		c.Pause = "unavailable (" + cgWhy + "): containers keep running while the provider proves a hardware challenge"
	}
	if c.Seccomp == "" {
		if c.Enforce.Seccomp {
			c.Seccomp = fmt.Sprintf("default profile (%d system calls and namespace-creating clone refused)", len(deniedSyscalls)+1)
		} else {
			c.Seccomp = "unavailable (runc built without seccomp)"
		}
	}
	if c.Rootless {
		c.User = fmt.Sprintf("root inside a user namespace, mapped to the agent's uid %d (rootless: no other id can be mapped)", os.Geteuid())
	} else {
		c.User = fmt.Sprintf("uid %d (nobody) unless the image names another non-root user; no capabilities, no-new-privileges", NobodyID)
	}
	c.Network = "none: a network namespace of its own with loopback only"
	if pe.allowNetwork {
		c.Network += "; the host's network for jobs that ask for it (--allow-network)"
	}
	if err := overlayWorks(pe.dir); err != nil {
		c.Rootfs = "the cached image read-only, shared by jobs (overlayfs unavailable: " + firstLine(err) + ")"
	} else {
		c.Overlay = true
		c.Rootfs = "read-only overlay per job over the cached image; writable: the job's inputs and outputs, /tmp, /dev/shm"
	}
	c.gpus, c.GPUSpec, c.GPU, c.noGPU = setupGPUs(ctx, pe)
	return c, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func firstLine(err error) string {
	if err == nil {
		return "unknown error"
	}
	s, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	return clip(s)
}

// NobodyID is the uid and gid jobs run as when their image names no
// other non-root user.
const NobodyID = 65534

// setupGPUs generates the CDI spec of the host's GPUs, prepares it for
// jobs and writes it to dir/cdi/nvidia.yaml, replacing what an earlier run
// left there (never read back). It returns the GPUs, the file, the
// capability line, and, without GPUs, the reason GPU jobs fail with.
func setupGPUs(ctx context.Context, pe probeEnv) (*gpuDevices, string, string, string) {
	dir := filepath.Join(pe.dir, "cdi")
	file := filepath.Join(dir, "nvidia.yaml")
	os.Remove(file)
	none := func(why string) (*gpuDevices, string, string, string) {
		return nil, "", "unavailable: " + why + "; oci jobs that ask for GPUs fail", why
	}
	gs, err := pe.cdi.GenerateCDI(ctx)
	if err != nil {
		return none(strings.TrimPrefix(err.Error(), ErrNoGPUs.Error()+": "))
	}
	from := gs.Generator
	if gs.Driver != "" {
		from += " for driver " + gs.Driver
	}
	g, err := newGPUDevices(gs)
	if err != nil {
		return none("the CDI spec generated by " + from + " cannot be used: " + err.Error())
	}
	y, err := g.yaml(gs)
	if err == nil {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			err = os.WriteFile(file, y, 0o644)
		}
	}
	if err != nil {
		pe.log.Warn("oci: cannot write the CDI spec for people to read", "file", file, "err", err)
		file = ""
	}
	for _, h := range g.dropped {
		pe.log.Debug("oci: CDI hook removed (its effect is supplied by mounts and LD_LIBRARY_PATH)", "hook", h)
	}
	line := fmt.Sprintf("CDI spec generated by %s: %d GPUs (%d device names)", from, g.gpus, len(g.devices))
	if file != "" {
		line += ", in " + file
	}
	line += "; each job sees only its assigned GPUs and the driver's device nodes and files; " +
		"no NVIDIA hook runs: each driver library is also mounted under its SONAME (libcuda.so.1) and LD_LIBRARY_PATH names their directories"
	return g, file, line, ""
}

// overlayWorks mounts and unmounts a scratch overlay under dir.
func overlayWorks(dir string) error {
	if os.Geteuid() != 0 {
		return errors.New("the agent is not root")
	}
	d, err := os.MkdirTemp(dir, "overlay-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(d)
	for _, s := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(d, s), 0o700); err != nil {
			return err
		}
	}
	if err := mountOverlay(filepath.Join(d, "lower"), filepath.Join(d, "upper"), filepath.Join(d, "work"), filepath.Join(d, "merged")); err != nil {
		return err
	}
	return unix.Unmount(filepath.Join(d, "merged"), unix.MNT_DETACH)
}

func mountOverlay(lower, upper, work, target string) error {
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", target, "overlay", unix.MS_NODEV|unix.MS_NOSUID, opts); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	return nil
}

// trial starts the probe program in a container configured with e and
// checks it ran.
func trial(ctx context.Context, rc *runc, dir string, e Enforcement) error {
	bundle, err := os.MkdirTemp(dir, "trial-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bundle)
	rootfs := filepath.Join(bundle, "rootfs")
	if err := WriteProbeRootfs(rootfs); err != nil {
		return err
	}
	id := "gpunet-probe-" + newID(12)
	p := SpecParams{
		Rootfs: rootfs, Args: []string{"/" + ProbeProgram}, Cwd: "/",
		Env: []string{"PATH=/"}, UID: NobodyID, GID: NobodyID, Hostname: "probe",
		MemoryBytes: 64 << 20, CPU: 0.5, Pids: 16, Enforce: e, CgroupsPath: "/gpunet/" + id,
	}
	s, err := Spec(p)
	if err != nil {
		return err
	}
	if err := writeSpec(bundle, s); err != nil {
		return err
	}
	var out bytes.Buffer
	o, err := rc.run(ctx, id, bundle, &out)
	rc.remove(context.WithoutCancel(ctx), id)
	switch {
	case err != nil:
		return err
	case o.StartError != "":
		return errors.New(o.StartError)
	case o.ExitCode != 0:
		return fmt.Errorf("the trial container exited %d: %s", o.ExitCode, clip(out.String()))
	case !strings.Contains(out.String(), ProbeOutput):
		return fmt.Errorf("the trial container printed %q, want %q", clip(out.String()), ProbeOutput)
	}
	return nil
}

func writeSpec(bundle string, s any) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600)
}

// ProbeProgram is the file name of the probe program in its rootfs, and
// ProbeOutput what it writes to stdout before exiting 0.
const (
	ProbeProgram = "probe"
	ProbeOutput  = "gpunet-probe\n"
)

// WriteProbeRootfs writes a rootfs holding only the probe program, a
// static Linux executable of a few hundred bytes (ProbeELF) for this
// machine's architecture.
func WriteProbeRootfs(dir string) error {
	elf, err := ProbeELF(runtime.GOARCH)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ProbeProgram), elf, 0o755)
}

// ProbeELF returns a minimal static Linux executable that writes
// ProbeOutput to stdout and exits 0: write(1, msg, len); exit_group(0).
// It is assembled here so that probing needs no image, no compiler and no
// network. amd64 and arm64 only.
func ProbeELF(goarch string) ([]byte, error) {
	msg := []byte(ProbeOutput)
	var code []byte
	var machine uint16
	switch goarch {
	case "amd64":
		machine = 62 // EM_X86_64
		code = []byte{
			0xb8, 0x01, 0x00, 0x00, 0x00, // mov eax, 1 (write)
			0xbf, 0x01, 0x00, 0x00, 0x00, // mov edi, 1
			0x48, 0x8d, 0x35, 0x10, 0x00, 0x00, 0x00, // lea rsi, [rip+16] (msg)
			0xba, byte(len(msg)), 0x00, 0x00, 0x00, // mov edx, len
			0x0f, 0x05, // syscall
			0xb8, 0xe7, 0x00, 0x00, 0x00, // mov eax, 231 (exit_group)
			0x31, 0xff, // xor edi, edi
			0x0f, 0x05, // syscall
		}
	case "arm64":
		machine = 183 // EM_AARCH64
		words := []uint32{
			0xd2800020,                       // mov x0, #1
			0x100000e1,                       // adr x1, msg (+28)
			0xd2800002 | uint32(len(msg))<<5, // mov x2, #len
			0xd2800808,                       // mov x8, #64 (write)
			0xd4000001,                       // svc #0
			0xd2800000,                       // mov x0, #0
			0xd2800bc8,                       // mov x8, #94 (exit_group)
			0xd4000001,                       // svc #0
		}
		for _, w := range words {
			code = binary.LittleEndian.AppendUint32(code, w)
		}
	default:
		return nil, fmt.Errorf("no probe program for %s (amd64 and arm64 only)", goarch)
	}
	const base = 0x400000
	const hdr = 64 + 56 // ELF header and one program header
	body := append(code, msg...)
	total := uint64(hdr + len(body))
	b := make([]byte, 0, total)
	le := binary.LittleEndian
	b = append(b, 0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little-endian */, 1 /* version */, 0 /* System V */)
	b = append(b, make([]byte, 8)...)
	b = le.AppendUint16(b, 2) // ET_EXEC
	b = le.AppendUint16(b, machine)
	b = le.AppendUint32(b, 1)        // EV_CURRENT
	b = le.AppendUint64(b, base+hdr) // entry
	b = le.AppendUint64(b, 64)       // program headers' offset
	b = le.AppendUint64(b, 0)        // no section headers
	b = le.AppendUint32(b, 0)        // flags
	b = le.AppendUint16(b, 64)       // ELF header size
	b = le.AppendUint16(b, 56)       // program header size
	b = le.AppendUint16(b, 1)        // one program header
	b = le.AppendUint16(b, 64)       // section header size
	b = le.AppendUint16(b, 0)        // no sections
	b = le.AppendUint16(b, 0)        // no section names
	b = le.AppendUint32(b, 1)        // PT_LOAD
	b = le.AppendUint32(b, 5)        // PF_R|PF_X
	b = le.AppendUint64(b, 0)        // offset
	b = le.AppendUint64(b, base)     // vaddr
	b = le.AppendUint64(b, base)     // paddr
	b = le.AppendUint64(b, total)    // file size
	b = le.AppendUint64(b, total)    // memory size
	b = le.AppendUint64(b, 0x1000)   // alignment
	return append(b, body...), nil
}
