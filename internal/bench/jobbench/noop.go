package jobbench

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpunet/gpunet/internal/jobspec"
)

// noopWASM is a WASI command that creates /out and exits 0: 127 bytes,
// hand-assembled, so that a job's time is the network's and not the
// guest's (a Go-built no-op is over a megabyte to seal, upload, fetch and
// compile).
//
//	(module
//	  (import "wasi_snapshot_preview1" "path_create_directory"
//	    (func $mkdir (param i32 i32 i32) (result i32)))
//	  (memory (export "memory") 1)
//	  (data (i32.const 0) "out")
//	  (func (export "_start")
//	    (drop (call $mkdir (i32.const 3) (i32.const 0) (i32.const 3)))))
func noopWASM() []byte {
	uleb := func(n int) []byte { // lengths here are all < 128
		return []byte{byte(n)}
	}
	section := func(id byte, body ...byte) []byte {
		return append(append([]byte{id}, uleb(len(body))...), body...)
	}
	name := func(s string) []byte { return append(uleb(len(s)), s...) }
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	m = append(m, section(1, 2, 0x60, 3, 0x7f, 0x7f, 0x7f, 1, 0x7f, 0x60, 0, 0)...) // types
	imp := append([]byte{1}, name("wasi_snapshot_preview1")...)
	imp = append(append(imp, name("path_create_directory")...), 0, 0)
	m = append(m, section(2, imp...)...)  // imports: func 0 of type 0
	m = append(m, section(3, 1, 1)...)    // functions: func 1 of type 1
	m = append(m, section(5, 1, 0, 1)...) // memory: 1 page
	exp := append([]byte{2}, name("memory")...)
	exp = append(append(exp, 2, 0), name("_start")...)
	m = append(m, section(7, append(exp, 0, 1)...)...) // exports
	body := []byte{0, 0x41, 3, 0x41, 0, 0x41, 3, 0x10, 0, 0x1a, 0x0b}
	m = append(m, section(10, append([]byte{1, byte(len(body))}, body...)...)...) // code
	m = append(m, section(11, 1, 0, 0x41, 0, 0x0b, 3, 'o', 'u', 't')...)          // data
	return m
}

// noopSpec is the job: the no-op module, one core, a small price ceiling.
func noopSpec(dir, verification string) (*jobspec.Spec, error) {
	if err := os.WriteFile(filepath.Join(dir, "noop.wasm"), noopWASM(), 0o644); err != nil {
		return nil, err
	}
	y := fmt.Sprintf(`name: noop
executor: wasm
module: ./noop.wasm
outputs: [/out]
resources:
  cpu: 1
  memory: 64MiB
  gpu: {count: 0}
max_price: 0.5
timeout: 1m
verification: %s
`, verification)
	return jobspec.Parse([]byte(y), dir)
}
