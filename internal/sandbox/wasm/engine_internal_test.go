package wasm

import (
	"os"
	"strings"
	"testing"
)

// TestEngineVersions checks the versions Engine reports against go.mod:
// a module upgrade that forgot the constants would let replicas on
// different engine versions look alike, and reuse cached code across
// versions.
func TestEngineVersions(t *testing.T) {
	mod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"github.com/tetratelabs/wazero":               "v" + wazeroVersion,
		"github.com/bytecodealliance/wasmtime-go/v39": "v" + wasmtimeVersion,
	}
	for _, line := range strings.Split(string(mod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			if v, ok := want[f[0]]; ok {
				if f[1] != v {
					t.Errorf("go.mod has %s %s, the constant says %s", f[0], f[1], v)
				}
				delete(want, f[0])
			}
		}
	}
	for p := range want {
		t.Errorf("%s is not in go.mod", p)
	}
}

// TestEngineName: Engine carries the engine, its version, the platform,
// the settings and the WASI version.
func TestEngineName(t *testing.T) {
	for _, name := range Engines() {
		e, err := New(t.TempDir(), WithEngine(name), WithSpares(0))
		if err != nil {
			t.Fatal(err)
		}
		got := e.Engine()
		e.Close()
		if !strings.HasPrefix(got, name+"-") || !strings.HasSuffix(got, "/wasi-gpunet-1") || !strings.Contains(got, "/") {
			t.Errorf("Engine() = %q", got)
		}
		t.Log(got)
	}
	if _, err := New(t.TempDir(), WithEngine("v8")); err == nil {
		t.Error("New accepted an unknown engine")
	}
}
