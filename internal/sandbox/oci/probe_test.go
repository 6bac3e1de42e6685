package oci_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// TestProbeELF: the probe programs are well-formed static executables for
// their machine whose message sits where their code points; on this
// machine's architecture it runs and prints ProbeOutput.
func TestProbeELF(t *testing.T) {
	for goarch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		b, err := oci.ProbeELF(goarch)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", goarch, err)
		}
		if f.Machine != machine || f.Type != elf.ET_EXEC || len(f.Progs) != 1 || f.Progs[0].Type != elf.PT_LOAD || f.Progs[0].Filesz != uint64(len(b)) {
			t.Fatalf("%s: header %+v, progs %+v", goarch, f.FileHeader, f.Progs)
		}
		code := f.Entry - f.Progs[0].Vaddr
		msgAt := uint64(len(b) - len(oci.ProbeOutput))
		if string(b[msgAt:]) != oci.ProbeOutput {
			t.Fatalf("%s: message %q", goarch, b[msgAt:])
		}
		switch goarch {
		case "amd64": // lea rsi, [rip+disp32] at code+10, 7 bytes long
			disp := binary.LittleEndian.Uint32(b[code+13:])
			if code+17+uint64(disp) != msgAt {
				t.Errorf("amd64: lea points at %d, message at %d", code+17+uint64(disp), msgAt)
			}
		case "arm64": // adr x1, label at code+4
			w := binary.LittleEndian.Uint32(b[code+4:])
			imm := uint64((w>>29)&3 | ((w>>5)&0x7ffff)<<2)
			if w&0x9f00001f != 0x10000001 || code+4+imm != msgAt {
				t.Errorf("arm64: adr %#x points at %d, message at %d", w, code+4+imm, msgAt)
			}
		}
	}
	if _, err := oci.ProbeELF("mips"); err == nil {
		t.Error("a probe for mips")
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		return
	}
	dir := t.TempDir()
	if err := oci.WriteProbeRootfs(dir); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(dir, oci.ProbeProgram)).Output()
	if err != nil || string(out) != oci.ProbeOutput {
		t.Fatalf("running the probe: %q, %v", out, err)
	}
	st, _ := os.Stat(filepath.Join(dir, oci.ProbeProgram))
	t.Logf("probe program: %d bytes", st.Size())
}
