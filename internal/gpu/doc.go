// Package gpu puts a provider's NVIDIA GPUs in the loop: it measures each
// GPU on itself and proves hardware challenges on it.
//
// Backend is one device: memory and the kernels of package kernels (AES-256-CTR
// expansion of a challenge's matrices, int8 GEMMs with exact int32 results,
// SHA-256 Merkle leaves and nodes). CUDA is the real backend: the NVIDIA
// driver loaded at run time (package cuda), the committed PTX compiled by the
// driver for the GPU at hand; nothing of the CUDA toolkit is needed to build
// or to run. Emulated runs the same operations in Go, so that everything
// above the launch is tested on machines without a GPU.
//
// Benchmarker (a hwinfo.Benchmarker) checks each GEMM kernel against the CPU,
// times it, and measures a whole challenge proof with the fastest: that
// rate is the figure the provider declares for the GPU. Prover (a
// prove.Prover) answers the ledger's challenges for the GPU with that kernel.
// Report is `gpunet bench gpu`.
package gpu
