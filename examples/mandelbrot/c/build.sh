#!/usr/bin/env bash
# Builds the C kernel for wasm32-wasi (committed: mandelbrot-c.wasm, used by
# `gpunet bench wasm`) and natively. Needs Debian's clang, lld, wasi-libc and
# libclang-rt-dev-wasm32.
set -euo pipefail
cd "$(dirname "$0")"
flags=(-O2 -ffp-contract=off)
wasmflags=(-Wl,--strip-all)
clang --target=wasm32-wasi --sysroot=/usr "${flags[@]}" "${wasmflags[@]}" -o mandelbrot-c.wasm mandelbrot.c
clang "${flags[@]}" -o "${1:-mandelbrot-c}" mandelbrot.c
