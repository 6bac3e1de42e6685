package model

import (
	"fmt"
	"sync"

	"github.com/gpunet/gpunet/internal/int8gemm"
)

// A GEMM runs the int8 model's matrix products: int8 × int8 → int32, exact.
// Integer products summed in any order give the same int32, so every GEMM
// (any device, kernel, tiling or number of workers) gives the same
// results, and so the same completions. CPU is this package's; a GPU's is
// in examples/tinylm/devicegemm.
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
	if err := CheckShape(wt, out, in); err != nil {
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

// CheckShape checks that wt holds out rows of in entries, as
// GEMM.Weights takes them.
func CheckShape(wt []int8, out, in int) error {
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
