package gpu

import (
	"fmt"
	"sync"

	"github.com/gpunet/gpunet/internal/gpu/cuda"
	"github.com/gpunet/gpunet/internal/gpu/kernels"
)

// CUDA is a Backend on an NVIDIA GPU through the driver API: it loads the
// committed PTX for the device's compute capability, which the driver
// compiles at load time.
type CUDA struct {
	dv     *cuda.Device
	module kernels.Module
	fns    map[string]*cuda.Function
	gemms  []string
	rk     cuda.Ptr // round keys of the last AESCTR

	mu    sync.Mutex
	alloc map[uint64]bool // live allocations, freed by Close
}

// gemmTile returns a GEMM kernel's tile.
func gemmTile(name string) (kernels.GEMMTile, bool) {
	for _, k := range kernels.GEMMKernels {
		if k.Name == name {
			return k.GEMMTile, true
		}
	}
	return kernels.GEMMTile{}, false
}

// OpenCUDA opens device ordinal of the driver and loads the kernels.
func OpenCUDA(dr *cuda.Driver, ordinal int) (*CUDA, error) {
	dv, err := dr.Open(ordinal)
	if err != nil {
		return nil, err
	}
	b := &CUDA{dv: dv, fns: map[string]*cuda.Function{}, alloc: map[uint64]bool{}}
	mod, ok := kernels.For(dv.Major, dv.Minor)
	if !ok {
		dv.Close()
		return nil, fmt.Errorf("%s has compute capability %s: gpunet's kernels need 6.1 or later (dp4a)", dv.Name, dv.CC())
	}
	b.module = mod
	err = dv.Do(func() error {
		m, err := dv.LoadPTX(mod.PTX)
		if err != nil {
			return fmt.Errorf("load the %s kernels: %w", mod.Target, err)
		}
		for name := range kernels.Signatures {
			f, err := m.Function(name)
			if err != nil {
				if mod.Target == "sm_61" {
					continue // no tensor-core kernels in this build
				}
				return err
			}
			if t, _ := gemmTile(name); t.SharedMemory > 48<<10 {
				sh := t.SharedMemory
				if int(sh) > dv.MaxSharedOptinBytes {
					continue
				}
				if err := f.SetMaxDynamicShared(int(sh)); err != nil {
					return err
				}
			}
			b.fns[name] = f
		}
		p, err := dv.Alloc(240)
		b.rk = p
		return err
	})
	if err != nil {
		dv.Close()
		return nil, err
	}
	for _, k := range kernels.GEMMKernels {
		if b.fns[k.Name] != nil {
			b.gemms = append(b.gemms, k.Name)
		}
	}
	return b, nil
}

// Device returns the driver's description of the device.
func (b *CUDA) Device() cuda.Info { return b.dv.Info }

func (b *CUDA) Describe() string {
	return fmt.Sprintf("%s (%s, compute capability %s, %d SMs, PTX %s)", b.dv.Name, b.dv.UUID, b.dv.CC(), b.dv.Multiprocessors, b.module.Target)
}

func (b *CUDA) UUID() string          { return b.dv.UUID }
func (b *CUDA) GEMMKernels() []string { return b.gemms }

func (b *CUDA) FreeMemory() (uint64, error) {
	var free uint64
	err := b.dv.Do(func() error {
		var err error
		free, _, err = b.dv.MemInfo()
		return err
	})
	return free, err
}

func (b *CUDA) Alloc(n uint64) (Buf, error) {
	var p cuda.Ptr
	err := b.dv.Do(func() error {
		var err error
		p, err = b.dv.Alloc(max(n, 1))
		return err
	})
	if err != nil {
		return Buf{}, err
	}
	b.mu.Lock()
	b.alloc[uint64(p)] = true
	b.mu.Unlock()
	return Buf{base: uint64(p), size: n}, nil
}

func (b *CUDA) Free(buf Buf) {
	b.mu.Lock()
	live := b.alloc[buf.base]
	delete(b.alloc, buf.base)
	b.mu.Unlock()
	if live {
		b.dv.Do(func() error { return b.dv.Free(cuda.Ptr(buf.base)) })
	}
}

func (b *CUDA) CopyIn(dst Buf, src []byte) error {
	if uint64(len(src)) > dst.size {
		return fmt.Errorf("copy of %d bytes into a %d-byte buffer", len(src), dst.size)
	}
	return b.dv.Do(func() error { return b.dv.CopyIn(cuda.Ptr(dst.addr()), src) })
}

func (b *CUDA) CopyOut(dst []byte, src Buf) error {
	if uint64(len(dst)) > src.size {
		return fmt.Errorf("copy of %d bytes out of a %d-byte buffer", len(dst), src.size)
	}
	return b.dv.Do(func() error { return b.dv.CopyOut(dst, cuda.Ptr(src.addr())) })
}

func (b *CUDA) Copy(dst, src Buf) error {
	if dst.size < src.size {
		return fmt.Errorf("copy of %d bytes into a %d-byte buffer", src.size, dst.size)
	}
	return b.dv.Do(func() error { return b.dv.CopyDevice(cuda.Ptr(dst.addr()), cuda.Ptr(src.addr()), src.size) })
}

func (b *CUDA) Memset(buf Buf, v byte) error {
	return b.dv.Do(func() error { return b.dv.Memset(cuda.Ptr(buf.addr()), v, buf.size) })
}

// grid1 sizes a grid-stride launch over n items: enough blocks of 256 to
// fill the device several times over.
func (b *CUDA) grid1(n uint64) cuda.Dim3 {
	blocks := min((n+255)/256, uint64(b.dv.Multiprocessors)*32)
	return cuda.Dim3{X: uint32(max(blocks, 1))}
}

func (b *CUDA) AESCTR(dst Buf, key [32]byte, first, blocks uint64) error {
	if blocks*16 > dst.size {
		return fmt.Errorf("AES-CTR: %d blocks into a %d-byte buffer", blocks, dst.size)
	}
	rk := roundKeyBytes(key)
	return b.dv.Do(func() error {
		// The copy waits for earlier work, so the previous key is no
		// longer in use.
		if err := b.dv.CopyIn(b.rk, rk); err != nil {
			return err
		}
		return b.fns["aes256_ctr"].Launch(b.grid1(blocks), cuda.Dim3{X: 256}, 0, cuda.Ptr(dst.addr()), b.rk, first, blocks)
	})
}

func (b *CUDA) GEMM(kernel string, c, a, bt Buf, n, k, m, ldc uint32) error {
	f := b.fns[kernel]
	if f == nil {
		return fmt.Errorf("GEMM kernel %q is not available on %s (have %v)", kernel, b.dv.Name, b.gemms)
	}
	if err := checkGEMM(c, a, bt, n, k, m, ldc); err != nil {
		return err
	}
	t, _ := gemmTile(kernel)
	grid := cuda.Dim3{X: (m + t.Cols - 1) / t.Cols, Y: (n + t.Rows - 1) / t.Rows}
	return b.dv.Do(func() error {
		return f.Launch(grid, cuda.Dim3{X: 256}, t.SharedMemory, cuda.Ptr(c.addr()), cuda.Ptr(a.addr()), cuda.Ptr(bt.addr()), n, k, m, ldc)
	})
}

// checkGEMM checks that the operands hold what the kernels read and write.
func checkGEMM(c, a, bt Buf, n, k, m, ldc uint32) error {
	switch {
	case k == 0 || k%64 != 0:
		return fmt.Errorf("GEMM: K = %d, want a positive multiple of 64", k)
	case n == 0 || m == 0 || ldc < m:
		return fmt.Errorf("GEMM: n = %d, m = %d, ldc = %d", n, m, ldc)
	case a.size < roundUp(uint64(n), RowAlign)*uint64(k):
		return fmt.Errorf("GEMM: A holds %d bytes, the kernels read %d rows of %d", a.size, roundUp(uint64(n), RowAlign), k)
	case bt.size < roundUp(uint64(m), ColAlign)*uint64(k):
		return fmt.Errorf("GEMM: Bᵀ holds %d bytes, the kernels read %d rows of %d", bt.size, roundUp(uint64(m), ColAlign), k)
	case c.size < (uint64(n-1)*uint64(ldc)+uint64(m))*4:
		return fmt.Errorf("GEMM: C holds %d bytes, short of %d rows of %d entries", c.size, n, ldc)
	}
	return nil
}

func (b *CUDA) HashLeaves(dst, c Buf, leaves uint64) error {
	if dst.size < 32*leaves || c.size < 256*leaves {
		return fmt.Errorf("hash %d leaves: buffers of %d and %d bytes", leaves, c.size, dst.size)
	}
	return b.dv.Do(func() error {
		return b.fns["hash_leaves"].Launch(b.grid1(leaves), cuda.Dim3{X: 256}, 0, cuda.Ptr(dst.addr()), cuda.Ptr(c.addr()), leaves)
	})
}

func (b *CUDA) HashNodes(dst, src Buf, width uint64) error {
	if src.size < 32*width || dst.size < 32*((width+1)/2) {
		return fmt.Errorf("hash the level above %d nodes: buffers of %d and %d bytes", width, src.size, dst.size)
	}
	return b.dv.Do(func() error {
		return b.fns["hash_nodes"].Launch(b.grid1((width+1)/2), cuda.Dim3{X: 256}, 0, cuda.Ptr(dst.addr()), cuda.Ptr(src.addr()), width)
	})
}

func (b *CUDA) Sync() error { return b.dv.Do(b.dv.Synchronize) }

// Close frees every allocation and releases the device.
func (b *CUDA) Close() {
	b.mu.Lock()
	live := b.alloc
	b.alloc = map[uint64]bool{}
	b.mu.Unlock()
	b.dv.Do(func() error {
		for p := range live {
			b.dv.Free(cuda.Ptr(p))
		}
		return b.dv.Free(b.rk)
	})
	b.dv.Close()
}

var _ Backend = (*CUDA)(nil)
