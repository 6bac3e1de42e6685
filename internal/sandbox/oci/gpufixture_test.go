package oci

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// GPUFixture is a host with two fake NVIDIA GPUs for tests without one: a
// directory holding stand-ins for the driver's device nodes (character
// devices with /dev/null's numbers, or links to /dev/null where this
// process cannot make device nodes), its libraries (libcuda.so.580.65.06
// a real shared library of this machine whose SONAME is patched to
// libcuda.so.1; the PTX JIT compiler a minimal ELF with SONAME
// libnvidia-ptxjitcompiler.so.1), a binary and a firmware file, and the
// CDI spec testdata/cdi/nvidia.yaml describing them, hooks included.
type GPUFixture struct {
	Root string
	Spec *GPUSpec
	// LibDir is the libraries' directory in the container.
	LibDir string
}

// Fixture's device names, as Job.GPUs gives them.
const (
	FixtureGPU0     = "GPU-00000000-1111-2222-3333-444444444444"
	FixtureGPU1     = "GPU-11111111-1111-2222-3333-444444444444"
	FixtureLibDir   = "/usr/lib/x86_64-linux-gnu/nvidia/current"
	FixtureLibcuda  = "libcuda.so.580.65.06"
	FixturePTXJIT   = "libnvidia-ptxjitcompiler.so.580.65.06"
	fixtureTemplate = "testdata/cdi/nvidia.yaml"
)

func NewGPUFixture(t testing.TB) *GPUFixture {
	t.Helper()
	root := t.TempDir()
	// The container's device nodes must be reachable by runc as root; a
	// temp dir is.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	var null unix.Stat_t
	if err := unix.Stat("/dev/null", &null); err != nil {
		t.Fatal(err)
	}
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, n := range []string{"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"} {
		p := mk("dev/" + n)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(null.Rdev)); err != nil {
			if err := os.Symlink("/dev/null", p); err != nil {
				t.Fatal(err)
			}
		}
	}
	write := func(rel string, b []byte, mode os.FileMode) {
		if err := os.WriteFile(mk(rel), b, mode); err != nil {
			t.Fatal(err)
		}
	}
	lib := "usr/lib/x86_64-linux-gnu/nvidia/current/"
	write(lib+FixtureLibcuda, LibWithSONAME(t, "libcuda.so.1"), 0o755)
	write(lib+FixturePTXJIT, MinimalSharedObject("libnvidia-ptxjitcompiler.so.1"), 0o755)
	write("usr/bin/nvidia-smi", []byte("#!/bin/sh\necho fake nvidia-smi\n"), 0o755)
	write("lib/firmware/nvidia/580.65.06/gsp_ga10x.bin", []byte("firmware"), 0o644)

	tmpl, err := os.ReadFile(fixtureTemplate)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cdi.ParseSpec(bytes.ReplaceAll(tmpl, []byte("@ROOT@"), []byte(root)))
	if err != nil {
		t.Fatal(err)
	}
	return &GPUFixture{Root: root, LibDir: FixtureLibDir, Spec: &GPUSpec{Spec: raw, Generator: "the test's spec", Driver: "580.65.06"}}
}

// GenerateCDI returns the fixture's spec.
func (f *GPUFixture) GenerateCDI(context.Context) (*GPUSpec, error) { return f.Spec, nil }

// LibWithSONAME returns a copy of a real shared library of this machine
// whose SONAME is overwritten in place with soname (so one at least as
// long is picked; the smallest such): a library glibc loads, that answers
// to soname. It skips the test where there is none.
func LibWithSONAME(t testing.TB, soname string) []byte {
	t.Helper()
	var cands []string
	for _, g := range []string{"/lib/*-linux-gnu/*.so.*", "/usr/lib/*-linux-gnu/*.so.*", "/lib64/*.so.*", "/usr/lib64/*.so.*"} {
		m, _ := filepath.Glob(g)
		cands = append(cands, m...)
	}
	type lib struct {
		path string
		size int64
	}
	var libs []lib
	for _, c := range cands {
		st, err := os.Lstat(c)
		if err != nil || !st.Mode().IsRegular() || strings.Contains(filepath.Base(c), "ld-linux") {
			continue
		}
		libs = append(libs, lib{c, st.Size()})
	}
	sort.Slice(libs, func(i, j int) bool { return libs[i].size < libs[j].size })
	for _, l := range libs {
		b, err := os.ReadFile(l.path)
		if err != nil {
			continue
		}
		if out, ok := patchSONAME(b, soname); ok {
			return out
		}
	}
	t.Skipf("no shared library on this machine with a SONAME as long as %q to patch", soname)
	return nil
}

func patchSONAME(b []byte, soname string) ([]byte, bool) {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil || f.Type != elf.ET_DYN {
		return nil, false
	}
	dyn := f.SectionByType(elf.SHT_DYNAMIC)
	if dyn == nil || int(dyn.Link) >= len(f.Sections) {
		return nil, false
	}
	str := f.Sections[dyn.Link]
	d, err := dyn.Data()
	if err != nil || f.Class != elf.ELFCLASS64 {
		return nil, false
	}
	for i := 0; i+16 <= len(d); i += 16 {
		tag, val := f.ByteOrder.Uint64(d[i:]), f.ByteOrder.Uint64(d[i+8:])
		if elf.DynTag(tag) != elf.DT_SONAME {
			continue
		}
		off := int(str.Offset + val)
		end := bytes.IndexByte(b[off:], 0)
		if end < len(soname) {
			return nil, false
		}
		out := bytes.Clone(b)
		copy(out[off:off+end], append([]byte(soname), make([]byte, end-len(soname))...))
		return out, true
	}
	return nil, false
}

// MinimalSharedObject is the smallest ELF shared object debug/elf reads a
// SONAME from: .dynstr, .dynamic with DT_SONAME, and section names; no
// code, so no loader would map it.
func MinimalSharedObject(soname string) []byte {
	le := binary.LittleEndian
	dynstr := append(append([]byte{0}, soname...), 0)
	var dynamic []byte
	dynamic = le.AppendUint64(dynamic, uint64(elf.DT_SONAME))
	dynamic = le.AppendUint64(dynamic, 1)
	dynamic = le.AppendUint64(dynamic, uint64(elf.DT_NULL))
	dynamic = le.AppendUint64(dynamic, 0)
	shstr := []byte("\x00.dynstr\x00.dynamic\x00.shstrtab\x00")
	const ehsize, shentsize = 64, 64
	offDynstr := uint64(ehsize)
	offDynamic := offDynstr + uint64(len(dynstr))
	offShstr := offDynamic + uint64(len(dynamic))
	shoff := offShstr + uint64(len(shstr))
	b := []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0}
	b = append(b, make([]byte, 8)...)
	b = le.AppendUint16(b, uint16(elf.ET_DYN))
	b = le.AppendUint16(b, uint16(elf.EM_X86_64))
	b = le.AppendUint32(b, 1)
	b = le.AppendUint64(b, 0) // entry
	b = le.AppendUint64(b, 0) // no program headers
	b = le.AppendUint64(b, shoff)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, ehsize)
	b = le.AppendUint16(b, 56)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint16(b, shentsize)
	b = le.AppendUint16(b, 4) // null, .dynstr, .dynamic, .shstrtab
	b = le.AppendUint16(b, 3)
	b = append(b, dynstr...)
	b = append(b, dynamic...)
	b = append(b, shstr...)
	section := func(name uint32, typ elf.SectionType, off, size uint64, link uint32, entsize uint64) {
		b = le.AppendUint32(b, name)
		b = le.AppendUint32(b, uint32(typ))
		b = le.AppendUint64(b, 0) // flags
		b = le.AppendUint64(b, 0) // addr
		b = le.AppendUint64(b, off)
		b = le.AppendUint64(b, size)
		b = le.AppendUint32(b, link)
		b = le.AppendUint32(b, 0)
		b = le.AppendUint64(b, 1)
		b = le.AppendUint64(b, entsize)
	}
	section(0, elf.SHT_NULL, 0, 0, 0, 0)
	section(1, elf.SHT_STRTAB, offDynstr, uint64(len(dynstr)), 0, 0)
	section(9, elf.SHT_DYNAMIC, offDynamic, uint64(len(dynamic)), 1, 16)
	section(18, elf.SHT_STRTAB, offShstr, uint64(len(shstr)), 0, 0)
	return b
}

// GPUEditsFor is the edits a job given ids gets from the fixture's
// prepared spec, and the hooks the preparation removed.
func GPUEditsFor(t testing.TB, gs *GPUSpec, ids ...string) (*cdispec.ContainerEdits, []string, error) {
	t.Helper()
	g, err := newGPUDevices(gs)
	if err != nil {
		return nil, nil, err
	}
	e, err := g.edits(ids)
	return e, g.dropped, err
}

// PreparedSpecYAML is what the executor writes to Dir/cdi/nvidia.yaml.
func PreparedSpecYAML(t testing.TB, gs *GPUSpec) []byte {
	g, err := newGPUDevices(gs)
	if err != nil {
		t.Fatal(err)
	}
	y, err := g.yaml(gs)
	if err != nil {
		t.Fatal(err)
	}
	return y
}
