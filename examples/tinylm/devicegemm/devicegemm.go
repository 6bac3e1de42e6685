// Package devicegemm runs tinylm's int8 network (model.Int8) on a GPU:
// Device is a model.GEMM on a package gpu Backend, CUDA's tensor-core or
// dp4a kernels, or the Emulated device. It is a package of its own because
// package gpu needs cgo (NVML), and tinylm's image is a static program
// built without it, which computes on the CPU.
package devicegemm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/internal/gpu"
)

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
func (d Device) Weights(wt []int8, out, in int) (model.Weights, error) {
	if err := model.CheckShape(wt, out, in); err != nil {
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
	if err := d.Dev.CopyIn(w.bt, bytesOf(wt)); err != nil {
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
		if err := w.dev.CopyIn(w.x, bytesOf(x[r*w.in:(r+rows)*w.in])); err != nil {
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

func bytesOf(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

func roundUp(v, a int) int { return (v + a - 1) / a * a }
