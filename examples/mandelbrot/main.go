// Command mandelbrot is gpunet's CPU-heavy example WASI job: it renders the
// Mandelbrot set to /out/mandelbrot.pgm and prints the image's SHA-256.
// Arguments: [WIDTH [HEIGHT [MAXITER]]] (default 640 480 1000). The output
// is bit-for-bit the same on every machine, so replicas can be compared by
// hash, and the kernel runs natively too:
//
//	GOOS=wasip1 GOARCH=wasm go build -o mandelbrot.wasm .   # the job's module
//	go run . -out m.pgm 1024 768 1000                       # the same, natively
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpunet/gpunet/examples/mandelbrot/kernel"
)

func main() {
	out := flag.String("out", "/out/mandelbrot.pgm", "where to write the image")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: mandelbrot [-out FILE] [WIDTH [HEIGHT [MAXITER]]]")
		flag.PrintDefaults()
	}
	flag.Parse()
	w, h, iter, err := kernel.ParseArgs(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "mandelbrot:", err)
		os.Exit(2)
	}
	img := kernel.PGM(w, h, kernel.Render(kernel.Whole, w, h, iter))
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "mandelbrot:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, img, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "mandelbrot:", err)
		os.Exit(1)
	}
	fmt.Printf("mandelbrot: %dx%d, %d iterations, sha256 %s\n", w, h, iter, kernel.Checksum(img))
}
