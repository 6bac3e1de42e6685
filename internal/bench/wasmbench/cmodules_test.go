package wasmbench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/examples"
)

// TestCModulesUpToDate rebuilds the committed C modules with
// examples/c-build.sh into a temporary directory and checks that they are
// the committed bytes, so that a change to a kernel's source or to the
// build flags cannot leave a stale module behind; and that the script's
// optimization flags are CFlags, which the native side is built with. It
// needs clang's wasm32-wasi target (Debian: clang, lld, wasi-libc,
// libclang-rt-14-dev-wasm32) and skips without it.
func TestCModulesUpToDate(t *testing.T) {
	script, err := os.ReadFile("../../../examples/c-build.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^flags=\((.*)\)$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("c-build.sh has no flags=(...) line")
	}
	if got, want := string(m[1]), strings.Join(CFlags, " "); got != want {
		t.Errorf("c-build.sh builds with %q, the native side (CFlags) with %q", got, want)
	}
	// Under CI=true a missing toolchain fails the test (.ci/run installs
	// it); elsewhere it skips.
	missing := t.Skip
	if os.Getenv("CI") == "true" {
		missing = t.Fatal
	}
	if _, err := exec.LookPath("clang"); err != nil {
		missing("no clang (apt-get install clang)")
	}
	if _, err := os.Stat("/usr/include/wasm32-wasi/stdio.h"); err != nil {
		missing("no wasi-libc (apt-get install wasi-libc lld libclang-rt-14-dev-wasm32)")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "c-build.sh")
	cmd.Dir = "../../../examples"
	cmd.Env = append(os.Environ(), "WASM_OUT_DIR="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("c-build.sh: %v\n%s", err, b)
	}
	for name, committed := range map[string][]byte{
		"mandelbrot": examples.MandelbrotCWASM,
		"sha256":     examples.SHA256CWASM,
		"matmul":     examples.MatmulCWASM,
		"fileio":     examples.FileIOCWASM,
	} {
		got, err := os.ReadFile(filepath.Join(out, name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, committed) {
			t.Errorf("%s: the committed module is not what c-build.sh builds from its source (%d bytes, built %d): run examples/c-build.sh", name, len(committed), len(got))
		}
	}
}
