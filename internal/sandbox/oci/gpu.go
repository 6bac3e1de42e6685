package oci

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// GPU jobs get their devices through the Container Device Interface (CDI):
// when the executor starts, a CDIGenerator (NVCDI, NVIDIA's own generator
// of CDI specs, by default) describes this host's driver and GPUs as a CDI
// spec; gpuDevices prepares it once; and each GPU job's runtime spec gets
// the spec's common edits (/dev/nvidiactl, /dev/nvidia-uvm, the driver's
// libraries and binaries) plus the edits of its assigned devices only,
// applied by the CDI library (cdi.ContainerEdits.Apply).
//
// nvcdi's specs carry hooks that run nvidia-cdi-hook (create-symlinks,
// update-ldcache, disable-device-node-modification, enable-cuda-compat), a
// binary of the NVIDIA container toolkit that Debian does not package and
// whose code is internal to the toolkit's module. gpunet generates the
// spec without them and supplies their effect with what runc does on its
// own:
//   - create-symlinks (libcuda.so.1 -> libcuda.so.580.65.06, and the
//     development name libcuda.so): each driver library is bind-mounted a
//     second time under its SONAME, read from the ELF (DT_SONAME), and a
//     third time under its ".so" name;
//   - update-ldcache: LD_LIBRARY_PATH names the directories the libraries
//     are mounted in, after the job's own LD_LIBRARY_PATH (which the
//     toolkit's ld cache would also come after), so that dlopen("libcuda.so.1")
//     finds the driver in any glibc image;
//   - disable-device-node-modification and enable-cuda-compat are not
//     replaced: the job cannot create device nodes anyway (no capabilities,
//     the devices cgroup, a /dev owned by root), and a job that ships CUDA
//     forward-compatibility libraries names them in its own LD_LIBRARY_PATH,
//     which comes first.
//
// A spec that still carries hooks (one written by hand, or by a generator
// that ignored the request) has them removed when it is prepared: no job's
// runtime spec ever names a hook binary.

// ErrNoGPUs is wrapped by a CDIGenerator's error when the host has no GPU
// to give containers; the message says why ("no NVIDIA driver
// (libnvidia-ml.so.1 not found)").
var ErrNoGPUs = errors.New("no GPUs for containers")

// A CDIGenerator describes this host's GPUs as a CDI spec.
type CDIGenerator interface {
	// GenerateCDI returns the spec of the host's GPUs, each device named
	// as Job.GPUs names it (its index and its NVML UUID), or an error that
	// wraps ErrNoGPUs when the host has none.
	GenerateCDI(ctx context.Context) (*GPUSpec, error)
}

// GPUSpec is a CDI spec and where it came from.
type GPUSpec struct {
	Spec *cdispec.Spec
	// Generator names what made it ("nvcdi"), Driver the driver's version
	// ("580.65.06"; "" when unknown), for the capability line.
	Generator string
	Driver    string
}

// gpuDevices is a GPUSpec prepared for jobs: hooks removed, the libraries
// also mounted under their SONAMEs, LD_LIBRARY_PATH set, device nodes'
// numbers read from the host once. It is read-only after newGPUDevices, so
// jobs share it.
type gpuDevices struct {
	spec    *cdispec.Spec
	devices map[string]*cdispec.Device
	// gpus counts the devices that are GPUs, not their aliases.
	gpus int
	// dropped are the hooks removed, "createContainer nvidia-cdi-hook
	// create-symlinks", for the log.
	dropped []string
	libDirs []string
}

// envLibraryPath is the dynamic linker's search path.
const envLibraryPath = "LD_LIBRARY_PATH"

// newGPUDevices checks and prepares a CDI spec. It reads the host's device
// nodes and the libraries the spec mounts.
func newGPUDevices(gs *GPUSpec) (*gpuDevices, error) {
	if gs == nil || gs.Spec == nil {
		return nil, errors.New("no CDI spec")
	}
	// A deep copy: the generator's spec stays as it was.
	b, err := json.Marshal(gs.Spec)
	if err != nil {
		return nil, err
	}
	var s cdispec.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if len(s.Devices) == 0 {
		return nil, errors.New("the CDI spec names no device")
	}
	g := &gpuDevices{spec: &s, devices: map[string]*cdispec.Device{}}
	prep := func(what string, e *cdispec.ContainerEdits) error {
		for _, h := range e.Hooks {
			g.dropped = append(g.dropped, strings.TrimSpace(h.HookName+" "+path.Base(h.Path)+" "+strings.Join(hookArgs(h), " ")))
		}
		e.Hooks = nil
		if err := resolveDeviceNodes(e.DeviceNodes); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := (&cdi.ContainerEdits{ContainerEdits: e}).Validate(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	// Devices with the same nodes are one GPU under several names.
	seen := map[string]bool{}
	for i := range s.Devices {
		d := &s.Devices[i]
		if d.Name == "" || g.devices[d.Name] != nil {
			return nil, fmt.Errorf("the CDI spec has an empty or repeated device name %q", d.Name)
		}
		if err := prep("device "+d.Name, &d.ContainerEdits); err != nil {
			return nil, err
		}
		g.devices[d.Name] = d
		var nodes []string
		for _, n := range d.ContainerEdits.DeviceNodes {
			nodes = append(nodes, n.Path)
		}
		sort.Strings(nodes)
		if k := strings.Join(nodes, " "); !seen[k] {
			seen[k] = true
			g.gpus++
		}
	}
	if err := prep("common edits", &s.ContainerEdits); err != nil {
		return nil, err
	}
	mounts, dirs, err := libraryAliases(s.ContainerEdits.Mounts, deviceMounts(s.Devices))
	if err != nil {
		return nil, err
	}
	s.ContainerEdits.Mounts = append(s.ContainerEdits.Mounts, mounts...)
	g.libDirs = dirs
	if len(dirs) > 0 {
		s.ContainerEdits.Env = slices.DeleteFunc(s.ContainerEdits.Env, func(kv string) bool { return strings.HasPrefix(kv, envLibraryPath+"=") })
		s.ContainerEdits.Env = append(s.ContainerEdits.Env, envLibraryPath+"="+strings.Join(dirs, ":"))
	}
	return g, nil
}

func hookArgs(h *cdispec.Hook) []string {
	if len(h.Args) > 1 {
		return h.Args[1:]
	}
	return nil
}

// deviceMounts are the container paths the devices mount, which the
// common edits' aliases must not cover.
func deviceMounts(devs []cdispec.Device) map[string]bool {
	m := map[string]bool{}
	for _, d := range devs {
		for _, mt := range d.ContainerEdits.Mounts {
			m[path.Clean(mt.ContainerPath)] = true
		}
	}
	return m
}

// resolveDeviceNodes fills in each node's type, numbers and mode from the
// host, once, so that applying the edits to a job reads nothing and
// writes nothing to the shared spec.
func resolveDeviceNodes(nodes []*cdispec.DeviceNode) error {
	for _, n := range nodes {
		if n.HostPath == "" {
			n.HostPath = n.Path
		}
		var st unix.Stat_t
		if err := unix.Stat(n.HostPath, &st); err != nil {
			return fmt.Errorf("device node %s: %w", n.HostPath, err)
		}
		var typ string
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			typ = "c"
		case unix.S_IFBLK:
			typ = "b"
		default:
			return fmt.Errorf("device node %s is not a device", n.HostPath)
		}
		if n.Type != "" && n.Type != typ && !(n.Type == "u" && typ == "c") {
			return fmt.Errorf("device node %s: the spec says type %q, the host has %q", n.HostPath, n.Type, typ)
		}
		n.Type = typ
		n.Major, n.Minor = int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev)))
		if n.FileMode == nil {
			m := os.FileMode(st.Mode & 0o777)
			n.FileMode = &m
		}
	}
	return nil
}

// sonameRE is a library's SONAME with a version ("libcuda.so.1"), whose
// development name is the part before the version ("libcuda.so").
var sonameRE = regexp.MustCompile(`^([A-Za-z0-9_+.-]+\.so)\.[0-9]+$`)

// libraryAliases returns, for each mount of a shared library (an ELF
// shared object with a SONAME other than its file name), bind mounts of
// the same host file under its SONAME and its development name in the
// same directory: what nvidia-cdi-hook's create-symlinks would link. It
// also returns the directories the libraries are mounted in, in the order
// the spec first names them. Paths already mounted are left alone.
func libraryAliases(mounts []*cdispec.Mount, taken map[string]bool) ([]*cdispec.Mount, []string, error) {
	for _, m := range mounts {
		taken[path.Clean(m.ContainerPath)] = true
	}
	var out []*cdispec.Mount
	var dirs []string
	for _, m := range mounts {
		if !strings.Contains(path.Base(m.ContainerPath), ".so") {
			continue
		}
		soname, err := readSONAME(m.HostPath)
		if err != nil {
			return nil, nil, fmt.Errorf("library %s: %w", m.HostPath, err)
		}
		if soname == "" {
			continue
		}
		dir := path.Dir(path.Clean(m.ContainerPath))
		if !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
		names := []string{soname}
		if sm := sonameRE.FindStringSubmatch(soname); sm != nil {
			names = append(names, sm[1])
		}
		for _, n := range names {
			p := path.Join(dir, n)
			if taken[p] {
				continue
			}
			taken[p] = true
			out = append(out, &cdispec.Mount{
				HostPath: m.HostPath, ContainerPath: p,
				Options: []string{"ro", "nosuid", "nodev", "bind"},
			})
		}
	}
	return out, dirs, nil
}

// readSONAME returns the SONAME of the shared library at p, "" when p is
// not an ELF shared object (a binary, a firmware blob, a config file) or
// has none, or its SONAME is not a plain file name.
func readSONAME(p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", nil
	}
	f, err := elf.Open(p)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			return "", nil
		}
		return "", err
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return "", nil
	}
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 {
		return "", nil
	}
	n := names[0]
	if n == "" || n == path.Base(p) || strings.ContainsAny(n, "/\x00") || n == "." || n == ".." {
		return "", nil
	}
	return n, nil
}

// names lists the spec's device names, sorted.
func (g *gpuDevices) names() []string {
	out := make([]string, 0, len(g.devices))
	for n := range g.devices {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// edits returns what a job given the devices ids gets: the common edits
// and those of each of its devices, copied so the caller may change them.
// An id the spec does not name is an error that names the ones it does.
func (g *gpuDevices) edits(ids []string) (*cdispec.ContainerEdits, error) {
	e := copyEdits(&g.spec.ContainerEdits)
	for _, id := range ids {
		d := g.devices[id]
		if d == nil {
			return nil, fmt.Errorf("GPU %q is not one of this provider's (%s)", id, strings.Join(g.names(), ", "))
		}
		de := copyEdits(&d.ContainerEdits)
		e.DeviceNodes = append(e.DeviceNodes, de.DeviceNodes...)
		e.Mounts = append(e.Mounts, de.Mounts...)
		e.Env = append(e.Env, de.Env...)
		e.AdditionalGIDs = append(e.AdditionalGIDs, de.AdditionalGIDs...)
	}
	return e, nil
}

// copyEdits copies the parts of e that applying them may change (the
// device nodes, which cdi fills in; slices that are appended to).
func copyEdits(e *cdispec.ContainerEdits) *cdispec.ContainerEdits {
	out := &cdispec.ContainerEdits{
		Env:            slices.Clone(e.Env),
		AdditionalGIDs: slices.Clone(e.AdditionalGIDs),
	}
	for _, n := range e.DeviceNodes {
		c := *n
		out.DeviceNodes = append(out.DeviceNodes, &c)
	}
	for _, m := range e.Mounts {
		c := *m
		c.Options = slices.Clone(m.Options)
		out.Mounts = append(out.Mounts, &c)
	}
	return out
}

// yaml is the prepared spec as CDI's YAML, for the executor's directory.
func (g *gpuDevices) yaml(gs *GPUSpec) ([]byte, error) {
	b, err := json.Marshal(g.spec)
	if err != nil {
		return nil, err
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("# The CDI spec GPU jobs get, generated by %s", gs.Generator)
	if gs.Driver != "" {
		head += " for driver " + gs.Driver
	}
	head += " when the executor started.\n# No hooks (gpunet ships no nvidia-cdi-hook): driver libraries are also mounted under their SONAMEs and development names, and LD_LIBRARY_PATH names their directories.\n"
	for _, h := range g.dropped {
		head += "# removed hook: " + h + "\n"
	}
	return append([]byte(head), y...), nil
}

// applyGPUEdits applies a job's GPU edits to its runtime spec with the
// CDI library, then holds the result to what the executor allows: no
// hooks, no ID-mapped mounts (runc 1.1 has none, and read-only driver
// files need none), no device cgroup rules where the runtime cannot write
// them (rootless), and the job's own LD_LIBRARY_PATH ahead of the
// driver's.
func applyGPUEdits(s *specs.Spec, e *cdispec.ContainerEdits, rootless bool) error {
	if len(e.Hooks) > 0 {
		return fmt.Errorf("GPU edits carry %d hooks; gpunet runs none", len(e.Hooks))
	}
	prior := envValue(s.Process.Env, envLibraryPath)
	if err := (&cdi.ContainerEdits{ContainerEdits: e}).Apply(s); err != nil {
		return fmt.Errorf("apply the CDI edits: %w", err)
	}
	if now := envValue(s.Process.Env, envLibraryPath); prior != "" && now != prior {
		setEnv(s, envLibraryPath, prior+":"+now)
	}
	for i := range s.Mounts {
		s.Mounts[i].Options = slices.DeleteFunc(s.Mounts[i].Options, func(o string) bool { return o == "idmap" || o == "ridmap" })
	}
	if rootless {
		s.Linux.Resources.Devices = nil
	}
	s.Hooks = nil
	return nil
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func setEnv(s *specs.Spec, key, val string) {
	for i, kv := range s.Process.Env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			s.Process.Env[i] = key + "=" + val
			return
		}
	}
	s.Process.Env = append(s.Process.Env, key+"="+val)
}
