// Package examples holds gpunet's example jobs (wordcount, mandelbrot) and
// exposes their committed WebAssembly modules, inputs and job specs, so that
// the devnet and tests can run them without a Go toolchain. build.sh
// rebuilds the modules from their sources.
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
	// The same kernel in C, built by clang for wasm32-wasi
	// (mandelbrot/c/build.sh), and its source: the wasm benchmark's
	// LLVM-compiled guest.
	//go:embed mandelbrot/c/mandelbrot-c.wasm
	MandelbrotCWASM []byte
	//go:embed mandelbrot/c/mandelbrot.c
	MandelbrotCSource []byte
)
