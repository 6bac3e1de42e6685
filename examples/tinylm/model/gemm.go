package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/int8gemm"
)

// A GEMM runs the int8 model's matrix products: int8 × int8 → int32, exact.
// Integer products summed in any order give the same int32, so every GEMM
// (any device, kernel, tiling or number of workers) gives the same
// results, and so the same completions.
type GEMM interface {
	// Weights prepares a constant matrix W for products x·Wᵀ: wt holds its
	// rows (out of them, in entries each), one after another.
	Weights(wt []int8, out, in int) (Weights, error)
	// Describe names the GEMM, e.g. "cpu (4 workers)".
	Describe() string
}

// Weights is a matrix a GEMM prepared. It is safe for concurrent use.
type Weights interface {
	// Mul sets c to x·Wᵀ: x holds n rows of in entries, c receives n rows
	// of out entries.
	Mul(c []int32, x []int8, n int) error
}

// CPU is the CPU's GEMM: package int8gemm's kernel (the CPU prover's),
// its output columns split among Workers goroutines (0: one), each with
// its own packed block of W's rows.
type CPU struct {
	Workers int
}

// Describe says how many workers compute.
func (c CPU) Describe() string { return fmt.Sprintf("cpu (%d workers)", max(c.Workers, 1)) }

// Weights packs wt in column blocks, a worker's each.
func (c CPU) Weights(wt []int8, out, in int) (Weights, error) {
	if err := checkShape(wt, out, in); err != nil {
		return nil, err
	}
	workers := min(max(c.Workers, 1), out)
	w := &cpuWeights{out: out, in: in}
	for i := range workers {
		lo, hi := out*i/workers, out*(i+1)/workers
		b := int8gemm.NewPackedB(in, hi-lo)
		for p := range b.Panels() {
			first := lo + p*int8gemm.PanelCols
			last := min(hi, first+int8gemm.PanelCols)
			b.SetPanel(p, wt[first*in:last*in])
		}
		w.blocks = append(w.blocks, cpuBlock{lo: lo, b: b})
	}
	return w, nil
}

type cpuWeights struct {
	out, in int
	blocks  []cpuBlock
}

type cpuBlock struct {
	lo int // the block's first output column
	b  *int8gemm.PackedB
}

func (w *cpuWeights) Mul(c []int32, x []int8, n int) error {
	if len(x) != n*w.in || len(c) != n*w.out {
		return fmt.Errorf("a product of %d rows: %d entries of x and %d of c, want %d and %d", n, len(x), len(c), n*w.in, n*w.out)
	}
	if len(w.blocks) == 1 {
		w.blocks[0].b.MulRows(c, x)
		return nil
	}
	var wg sync.WaitGroup
	for _, blk := range w.blocks {
		wg.Go(func() {
			m := blk.b.M()
			part := make([]int32, n*m)
			blk.b.MulRows(part, x)
			for r := range n {
				copy(c[r*w.out+blk.lo:r*w.out+blk.lo+m], part[r*m:(r+1)*m])
			}
		})
	}
	wg.Wait()
	return nil
}

// Device is a GPU's GEMM (package gpu's Backend: CUDA's tensor-core or
// dp4a kernels, or the Emulated device): W stays in device memory, each
// product copies x in and c out.
type Device struct {
	Dev gpu.Backend
	// Kernel is the GEMM kernel; "" is the device's first (fastest
	// expected).
	Kernel string
}

// Describe names the device and the kernel.
func (d Device) Describe() string { return d.Dev.Describe() + ", kernel " + d.kernel() }

func (d Device) kernel() string {
	if d.Kernel != "" {
		return d.Kernel
	}
	if ks := d.Dev.GEMMKernels(); len(ks) > 0 {
		return ks[0]
	}
	return ""
}

// deviceRows is the most rows of x one launch takes: the kernels read
// whole tiles of gpu.RowAlign rows.
const deviceRows = gpu.RowAlign

// Weights copies wt to the device, padded to the kernels' alignment.
func (d Device) Weights(wt []int8, out, in int) (Weights, error) {
	if err := checkShape(wt, out, in); err != nil {
		return nil, err
	}
	if in%64 != 0 {
		return nil, fmt.Errorf("a device GEMM of inner dimension %d: want a multiple of 64", in)
	}
	if d.kernel() == "" {
		return nil, errors.New(d.Dev.Describe() + " runs no GEMM kernel")
	}
	w := &deviceWeights{dev: d.Dev, kernel: d.kernel(), out: out, in: in}
	bufs := []struct {
		p    *gpu.Buf
		size int
	}{
		{&w.bt, roundUp(out, gpu.ColAlign) * in},
		{&w.x, deviceRows * in},
		{&w.c, deviceRows * out * 4},
	}
	for _, b := range bufs {
		buf, err := d.Dev.Alloc(uint64(b.size))
		if err != nil {
			w.free()
			return nil, fmt.Errorf("%s: %w", d.Dev.Describe(), err)
		}
		*b.p = buf
		w.held = append(w.held, buf)
	}
	if err := d.Dev.Memset(w.bt, 0); err != nil {
		w.free()
		return nil, err
	}
	if err := d.Dev.CopyIn(w.bt, int8Bytes(wt)); err != nil {
		w.free()
		return nil, err
	}
	return w, nil
}

type deviceWeights struct {
	dev      gpu.Backend
	kernel   string
	out, in  int
	bt, x, c gpu.Buf
	held     []gpu.Buf

	mu  sync.Mutex // one product at a time in x and c
	raw []byte
}

func (w *deviceWeights) free() {
	for _, b := range w.held {
		w.dev.Free(b)
	}
	w.held = nil
}

func (w *deviceWeights) Mul(c []int32, x []int8, n int) error {
	if len(x) != n*w.in || len(c) != n*w.out {
		return fmt.Errorf("a product of %d rows: %d entries of x and %d of c, want %d and %d", n, len(x), len(c), n*w.in, n*w.out)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for r := 0; r < n; r += deviceRows {
		rows := min(deviceRows, n-r)
		if err := w.dev.CopyIn(w.x, int8Bytes(x[r*w.in:(r+rows)*w.in])); err != nil {
			return err
		}
		if err := w.dev.GEMM(w.kernel, w.c, w.x, w.bt, uint32(rows), uint32(w.in), uint32(w.out), uint32(w.out)); err != nil {
			return err
		}
		need := rows * w.out * 4
		if cap(w.raw) < need {
			w.raw = make([]byte, need)
		}
		raw := w.raw[:need]
		if err := w.dev.CopyOut(raw, w.c.Slice(0, uint64(need))); err != nil {
			return err
		}
		for i := range rows * w.out {
			c[r*w.out+i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	}
	return nil
}

func checkShape(wt []int8, out, in int) error {
	if out < 1 || in < 1 || in > int8gemm.MaxK || len(wt) != out*in {
		return fmt.Errorf("weights of %d entries as %d rows of %d", len(wt), out, in)
	}
	return nil
}

func int8Bytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

func roundUp(v, a int) int { return (v + a - 1) / a * a }
