#!/bin/sh
# Regenerates the committed PTX from kernels.cu with Debian's clang-14
# (apt-get install clang-14). No CUDA toolkit: the kernels use no CUDA
# header. TestPTXUpToDate runs this into a temporary directory and compares.
#
#   internal/gpu/kernels/gen.sh [OUTDIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
cc=${CLANG:-clang-14}
for arch in sm_61 sm_80; do
	"$cc" -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=$arch \
		-O3 -ffp-contract=off -S -o "$out/kernels_$arch.ptx" "$here/kernels.cu"
done
