// Package hwinfo detects a provider's hardware and measures it.
//
// Detection is a list of small Fingerprinters (NVML for GPUs, then CPU,
// memory, disk and OS), each filling in one part of an Inventory. A
// fingerprinter that cannot determine its part records a human-readable Note
// instead of failing the whole inventory, so a machine without an NVIDIA
// driver is reported as a CPU-only provider rather than an error.
//
// Measurement is a Benchmarker per device. Figures are measured, never taken
// from a datasheet: int8 GEMM throughput and memory bandwidth. The CPU's
// throughput is that of the kernel its hardware challenges run (package
// int8gemm), timed as the challenge prover runs it.
package hwinfo
