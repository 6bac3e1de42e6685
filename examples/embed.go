// Package examples holds gpunet's example jobs (wordcount, mandelbrot, and
// the C kernels sha256 and matmul) and exposes their committed WebAssembly
// modules, inputs and job specs, so that the devnet and tests can run them
// without a Go toolchain. build.sh rebuilds the Go modules from their
// sources, c-build.sh the C ones.
package examples

import _ "embed"

// The wordcount example: a WASI module counting the words of /in/input.txt
// into /out/counts.txt, the input it ships with, and its job spec (whose
// module and input paths are relative to examples/wordcount/).
var (
	//go:embed wordcount/wordcount.wasm
	WordcountWASM []byte
	//go:embed wordcount/input.txt
	WordcountInput []byte
	//go:embed wordcount/job.yaml
	WordcountJob string
)

// The mandelbrot example: a CPU-heavy WASI module rendering the Mandelbrot
// set to /out/mandelbrot.pgm (args WIDTH HEIGHT MAXITER), and its job spec.
var (
	//go:embed mandelbrot/mandelbrot.wasm
	MandelbrotWASM []byte
	//go:embed mandelbrot/job.yaml
	MandelbrotJob string
	// The same kernel in C, built by clang for wasm32-wasi (c-build.sh),
	// and its source: one of the wasm benchmark's LLVM-compiled guests.
	//go:embed mandelbrot/c/mandelbrot-c.wasm
	MandelbrotCWASM []byte
	//go:embed mandelbrot/c/mandelbrot.c
	MandelbrotCSource []byte
)

// The other C kernels of the wasm benchmark's LLVM-compiled guests, each a
// WASI program built by clang for wasm32-wasi (c-build.sh) and its source,
// which the benchmark also builds natively:
//
//   - sha256 (args MIB ROUNDS): SHA-256 over a generated buffer, the hex
//     digest to /out/sha256.txt.
//   - matmul (args N REPS): a float32 N×N matrix product, written raw to
//     /out/matmul.bin.
//   - fileio (args FILES MIB [RECORD]): the I/O-heavy one; it reads every
//     file in /in and writes FILES files of MIB MiB each to /out, RECORD
//     bytes a write.
var (
	//go:embed sha256/sha256.wasm
	SHA256CWASM []byte
	//go:embed sha256/sha256.c
	SHA256CSource []byte
	//go:embed matmul/matmul.wasm
	MatmulCWASM []byte
	//go:embed matmul/matmul.c
	MatmulCSource []byte
	//go:embed fileio/fileio.wasm
	FileIOCWASM []byte
	//go:embed fileio/fileio.c
	FileIOCSource []byte
)
