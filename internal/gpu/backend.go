package gpu

import "fmt"

// Buf is a range of device memory.
type Buf struct {
	base, off, size uint64
}

// Size is the range's length in bytes.
func (b Buf) Size() uint64 { return b.size }

// Slice returns n bytes of b from off.
func (b Buf) Slice(off, n uint64) Buf {
	if off+n > b.size || off+n < off {
		panic(fmt.Sprintf("gpu: slice [%d, %d) of a %d-byte buffer", off, off+n, b.size))
	}
	return Buf{base: b.base, off: b.off + off, size: n}
}

func (b Buf) addr() uint64 { return b.base + b.off }

// Backend is one device as the engine uses it: memory and the kernels of
// package kernels. CUDA is the real one; Emulated runs the same operations
// in Go, so that everything above the launch is tested on machines
// without a GPU.
//
// Operations may run asynchronously; CopyOut and Sync wait for what came
// before and report the first error.
type Backend interface {
	// Describe names the device, e.g. "NVIDIA H200 (GPU-…, compute capability 9.0)".
	Describe() string
	// UUID is the device's UUID in NVML's form, "" if it has none.
	UUID() string
	// GEMMKernels lists the GEMM kernels this device runs, fastest
	// expected first.
	GEMMKernels() []string
	// FreeMemory is the device memory available for allocation.
	FreeMemory() (uint64, error)
	Alloc(n uint64) (Buf, error)
	Free(b Buf)
	CopyIn(dst Buf, src []byte) error
	CopyOut(dst []byte, src Buf) error
	// Copy copies src to dst (at least as large) on the device.
	Copy(dst, src Buf) error
	// Memset sets every byte of b to v.
	Memset(b Buf, v byte) error
	// AESCTR writes keystream blocks first … first+blocks-1 of AES-256-CTR
	// under key (the counter block is the 128-bit big-endian block
	// number), 16 bytes each, to dst.
	AESCTR(dst Buf, key [32]byte, first, blocks uint64) error
	// GEMM computes C = A·B with kernel: a is row-major with K bytes a row
	// and at least roundUp(n, RowAlign) rows, bt is B transposed (row j is
	// column j of B) with at least roundUp(m, ColAlign) rows; it writes rows
	// < n, columns < m of c, ldc int32 entries a row.
	GEMM(kernel string, c, a, bt Buf, n, k, m, ldc uint32) error
	// HashLeaves writes the Merkle leaf hash of each 64 consecutive int32
	// of c, leaves of them, to dst (32 bytes each).
	HashLeaves(dst, c Buf, leaves uint64) error
	// HashNodes writes the level above width node hashes of src to dst.
	HashNodes(dst, src Buf, width uint64) error
	Sync() error
	Close()
}

// Operand alignment of the GEMM kernels: tiles are read whole.
const (
	RowAlign = 256
	ColAlign = 256
)

func roundUp(v, a uint64) uint64 { return (v + a - 1) / a * a }
