package gpu

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/gpu/kernels"
)

// Emulated is a Backend that runs each kernel's semantics in Go on the
// CPU, with the same operand rules as the CUDA kernels. Tests use it to run
// the prover, the benchmark and the example end to end on machines without
// a GPU; it is far too slow for real challenges. Kernels lists the GEMM
// kernels it claims (default: those of a compute capability 8.0 device).
type Emulated struct {
	Name    string
	ID      string
	Kernels []string
	Memory  uint64 // reported free memory; 0: 1 GiB

	mu     sync.Mutex
	next   uint64
	allocs map[uint64][]byte
	// Launches counts kernel launches by name.
	Launches map[string]int
}

func (e *Emulated) Describe() string { return e.Name + " (emulated)" }
func (e *Emulated) UUID() string     { return e.ID }

func (e *Emulated) GEMMKernels() []string {
	if e.Kernels == nil {
		var names []string
		for _, k := range kernels.GEMMKernels {
			names = append(names, k.Name)
		}
		return names
	}
	return e.Kernels
}

func (e *Emulated) FreeMemory() (uint64, error) {
	if e.Memory == 0 {
		return 1 << 30, nil
	}
	return e.Memory, nil
}

func (e *Emulated) Alloc(n uint64) (Buf, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.allocs == nil {
		e.allocs, e.next = map[uint64][]byte{}, 1<<40
	}
	base := e.next
	e.next += roundUp(max(n, 1), 1<<20) + 1<<20
	e.allocs[base] = make([]byte, n)
	return Buf{base: base, size: n}, nil
}

func (e *Emulated) Free(b Buf) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.allocs, b.base)
}

func (e *Emulated) mem(b Buf) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	m, ok := e.allocs[b.base]
	if !ok {
		panic(fmt.Sprintf("gpu: emulated access to freed memory %#x", b.base))
	}
	return m[b.off : b.off+b.size]
}

func (e *Emulated) count(k string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.Launches == nil {
		e.Launches = map[string]int{}
	}
	e.Launches[k]++
}

// LaunchCount returns how many times kernel was launched; safe while the
// device is in use.
func (e *Emulated) LaunchCount(kernel string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.Launches[kernel]
}

func (e *Emulated) CopyIn(dst Buf, src []byte) error {
	if uint64(len(src)) > dst.size {
		return fmt.Errorf("copy of %d bytes into a %d-byte buffer", len(src), dst.size)
	}
	copy(e.mem(dst), src)
	return nil
}

func (e *Emulated) CopyOut(dst []byte, src Buf) error {
	if uint64(len(dst)) > src.size {
		return fmt.Errorf("copy of %d bytes out of a %d-byte buffer", len(dst), src.size)
	}
	copy(dst, e.mem(src))
	return nil
}

func (e *Emulated) Copy(dst, src Buf) error {
	if dst.size < src.size {
		return fmt.Errorf("copy of %d bytes into a %d-byte buffer", src.size, dst.size)
	}
	copy(e.mem(dst), e.mem(src))
	return nil
}

func (e *Emulated) Memset(b Buf, v byte) error {
	m := e.mem(b)
	for i := range m {
		m[i] = v
	}
	return nil
}

func (e *Emulated) AESCTR(dst Buf, key [32]byte, first, blocks uint64) error {
	if blocks*16 > dst.size {
		return fmt.Errorf("AES-CTR: %d blocks into a %d-byte buffer", blocks, dst.size)
	}
	e.count("aes256_ctr")
	blk, _ := aes.NewCipher(key[:])
	var iv [16]byte
	binary.BigEndian.PutUint64(iv[8:], first)
	out := e.mem(dst)[:blocks*16]
	clear(out)
	cipher.NewCTR(blk, iv[:]).XORKeyStream(out, out)
	return nil
}

func (e *Emulated) GEMM(kernel string, c, a, bt Buf, n, k, m, ldc uint32) error {
	ok := false
	for _, g := range e.GEMMKernels() {
		ok = ok || g == kernel
	}
	if !ok {
		return fmt.Errorf("GEMM kernel %q is not available on %s", kernel, e.Name)
	}
	if err := checkGEMM(c, a, bt, n, k, m, ldc); err != nil {
		return err
	}
	e.count(kernel)
	am, bm, cm := e.mem(a), e.mem(bt), e.mem(c)
	asInt8 := func(b []byte) []int8 { return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b)) }
	bt8 := asInt8(bm[:uint64(m)*uint64(k)])
	for i := range uint64(n) {
		row := asInt8(am[i*uint64(k) : (i+1)*uint64(k)])
		for j := range uint64(m) {
			v := challenge.DotInt8(row, bt8[j*uint64(k):(j+1)*uint64(k)])
			binary.LittleEndian.PutUint32(cm[(i*uint64(ldc)+j)*4:], uint32(v))
		}
	}
	return nil
}

func (e *Emulated) HashLeaves(dst, c Buf, leaves uint64) error {
	if dst.size < 32*leaves || c.size < 256*leaves {
		return fmt.Errorf("hash %d leaves: buffers of %d and %d bytes", leaves, c.size, dst.size)
	}
	e.count("hash_leaves")
	cm, dm := e.mem(c), e.mem(dst)
	var entries [challenge.LeafEntries]int32
	for x := range leaves {
		for t := range entries {
			entries[t] = int32(binary.LittleEndian.Uint32(cm[x*256+uint64(t)*4:]))
		}
		h := challenge.HashLeaf(&entries)
		copy(dm[x*32:], h[:])
	}
	return nil
}

func (e *Emulated) HashNodes(dst, src Buf, width uint64) error {
	if src.size < 32*width || dst.size < 32*((width+1)/2) {
		return fmt.Errorf("hash the level above %d nodes: buffers of %d and %d bytes", width, src.size, dst.size)
	}
	e.count("hash_nodes")
	sm, dm := e.mem(src), e.mem(dst)
	for x := range (width + 1) / 2 {
		var l, r [32]byte
		copy(l[:], sm[2*x*32:])
		if 2*x+1 < width {
			copy(r[:], sm[(2*x+1)*32:])
		}
		h := challenge.HashNode(l, r)
		copy(dm[x*32:], h[:])
	}
	return nil
}

func (e *Emulated) Sync() error { return nil }
func (e *Emulated) Close()      {}

var _ Backend = (*Emulated)(nil)
