#!/bin/sh
# Rebuilds the example WebAssembly modules that are committed beside their
# sources (so that the devnet can embed them without a Go toolchain).
# Run from anywhere; needs Go. The wasm package's tests check that a fresh
# build behaves like the committed one.
set -eu
cd "$(dirname "$0")/.."
for ex in wordcount mandelbrot; do
	GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -trimpath -ldflags=-s \
		-o "examples/$ex/$ex.wasm" "./examples/$ex"
	echo "examples/$ex/$ex.wasm: $(wc -c <"examples/$ex/$ex.wasm") bytes"
done
