#!/usr/bin/env bash
# Builds the C examples used by `gpunet bench wasm` as LLVM-compiled guests:
# each NAME.c for wasm32-wasi (committed beside its source) and, when given
# an output directory, natively. Needs Debian's clang, lld, wasi-libc and
# libclang-rt-dev-wasm32. Both builds use the same optimization flags,
# wasmbench.CFlags in internal/bench/wasmbench; the wasm build adds 128-bit SIMD,
# the counterpart of x86-64's SSE2 baseline that the native build gets.
#
# clang runs binaryen's wasm-opt after linking when it is on PATH (and
# fails with -msimd128, not telling wasm-opt about SIMD); the committed
# modules are clang's and wasm-ld's output alone, so this refuses to run
# with wasm-opt on PATH.
#
#   examples/c-build.sh [NATIVE_OUT_DIR]
#
# With WASM_OUT_DIR set, the modules go there (NAME.wasm) instead, and the
# committed ones are left alone: the wasm benchmark's
# TestCModulesUpToDate builds them so and compares.
set -euo pipefail
cd "$(dirname "$0")"
if command -v wasm-opt >/dev/null; then
	echo "c-build.sh: wasm-opt is on PATH (binaryen); remove it from PATH first" >&2
	exit 1
fi
flags=(-O2 -ffp-contract=off)
wasmflags=(--target=wasm32-wasi --sysroot=/usr -msimd128 -Wl,--strip-all)
for src in mandelbrot/c/mandelbrot.c sha256/sha256.c matmul/matmul.c fileio/fileio.c; do
	name=$(basename "$src" .c)
	mod="$(dirname "$src")/$name.wasm"
	[ "$name" = mandelbrot ] && mod=mandelbrot/c/mandelbrot-c.wasm
	[ -n "${WASM_OUT_DIR:-}" ] && mod="$WASM_OUT_DIR/$name.wasm"
	clang "${wasmflags[@]}" "${flags[@]}" -o "$mod" "$src"
	echo "$mod: $(wc -c <"$mod") bytes"
	if [ $# -gt 0 ]; then
		clang "${flags[@]}" -o "$1/$name" "$src"
	fi
done
