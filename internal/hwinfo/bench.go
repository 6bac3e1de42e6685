package hwinfo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpunet/gpunet/internal/int8gemm"
)

// Figures are one device's measured performance.
type Figures struct {
	Device string `json:"device"` // "cpu" or "gpu:<uuid>"
	// Int8TOPS is int8 GEMM throughput in tera-operations per second, counting
	// a multiply-add as two operations as GPU datasheets do: 2·n³ operations
	// per n×n×n product, divided by seconds, divided by 10¹².
	Int8TOPS float64 `json:"int8_tops"`
	// MemBandwidthGBs is memory bandwidth in GB/s (10⁹ bytes): bytes read plus
	// bytes written per second while copying a buffer larger than the caches
	// (STREAM's "Copy" convention).
	MemBandwidthGBs float64       `json:"mem_bandwidth_gbs"`
	Duration        time.Duration `json:"duration"` // wall time of the whole Run
	// Kernel is a GPU's fastest GEMM kernel, which its challenge prover
	// uses; Kernels what each kernel measured alone. A GPU's Int8TOPS is
	// the rate of a whole challenge proof with that kernel (expansion,
	// product and hashing; package gpu), which is what challenges check.
	Kernel  string         `json:"kernel,omitempty"`
	Kernels []KernelFigure `json:"kernels,omitempty"`
}

// KernelFigure is one GEMM kernel's measurement on a device.
type KernelFigure struct {
	Kernel   string  `json:"kernel"`
	Int8TOPS float64 `json:"int8_tops"`
	Shape    string  `json:"shape,omitempty"` // N×K×M of the best run
	// Error says why the kernel was not used (a wrong result on the check
	// before timing, a launch failure).
	Error string `json:"error,omitempty"`
}

// Benchmarker measures one device. GPU implementations (CUDA) slot in beside
// CPUBenchmarker.
//
// Run spends about budget (less if ctx has an earlier deadline) measuring and
// reports the best figures it saw. It returns ctx's error if ctx is done
// before it has a figure of each kind, and an error if budget is not positive.
type Benchmarker interface {
	Device() string
	Run(ctx context.Context, budget time.Duration) (Figures, error)
}

// CPUBenchmarker measures the CPU with pure-Go kernels: for throughput,
// package int8gemm's kernel as the CPU challenge prover runs it, so that
// the figure a provider declares is the rate its challenges achieve; for
// memory bandwidth, a parallel copy.
type CPUBenchmarker struct {
	Workers int // goroutines; ≤ 0: runtime.NumCPU()
	// BufferBytes is the memory moved per bandwidth pass (half read, half
	// written); 0: 256 MiB, at most RAM/8, and 64 MiB when budget is under a
	// second. A buffer that fits in the CPU's caches overstates bandwidth.
	BufferBytes int
	MaxN        int // largest GEMM size tried; 0: 4096
}

// NewCPUBenchmarker returns a CPU benchmarker using workers goroutines;
// workers ≤ 0 means runtime.NumCPU().
func NewCPUBenchmarker(workers int) Benchmarker {
	return &CPUBenchmarker{Workers: workers}
}

// Device returns "cpu".
func (*CPUBenchmarker) Device() string { return "cpu" }

// Run measures memory bandwidth for about a quarter of budget, then GEMM
// throughput for the rest, doubling the matrix size from 64 while a GEMM takes
// well under the remaining time.
func (c *CPUBenchmarker) Run(ctx context.Context, budget time.Duration) (Figures, error) {
	start := time.Now()
	if budget <= 0 {
		return Figures{}, fmt.Errorf("benchmark budget %v: must be positive", budget)
	}
	deadline := start.Add(budget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	workers := c.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	maxN := c.MaxN
	if maxN <= 0 {
		maxN = 4096
	}
	maxN = min(maxN, int8gemm.MaxK)

	bw, err := memBandwidth(ctx, workers, c.bufferBytes(budget), start.Add(deadline.Sub(start)/4))
	if err != nil {
		return Figures{}, fmt.Errorf("cpu memory bandwidth: %w", err)
	}
	tops, err := gemmTOPS(ctx, workers, maxN, deadline)
	if err != nil {
		return Figures{}, fmt.Errorf("cpu int8 GEMM: %w", err)
	}
	return Figures{Device: "cpu", Int8TOPS: tops, MemBandwidthGBs: bw, Duration: time.Since(start)}, nil
}

func (c *CPUBenchmarker) bufferBytes(budget time.Duration) int {
	if c.BufferBytes > 0 {
		return c.BufferBytes
	}
	size := 256 << 20
	if ram, err := meminfoTotal(os.DirFS("/")); err == nil && ram/8 < uint64(size) {
		size = int(ram / 8)
	}
	if budget < time.Second {
		size = min(size, 64<<20)
	}
	return size
}

// parallel calls f on workers contiguous, page-aligned slices of [0, n) and
// waits for them.
func parallel(workers, n int, f func(lo, hi int)) {
	const align = 4096
	var wg sync.WaitGroup
	for w := range workers {
		lo := n / workers * w / align * align
		hi := n / workers * (w + 1) / align * align
		if w == workers-1 {
			hi = n
		}
		if lo < hi {
			wg.Go(func() { f(lo, hi) })
		}
	}
	wg.Wait()
}

// memBandwidth copies a bufBytes/2 buffer into another across workers until
// deadline (at least once) and returns the best rate in GB/s.
func memBandwidth(ctx context.Context, workers, bufBytes int, deadline time.Time) (float64, error) {
	half := max(bufBytes/2, 1<<20)
	src, dst := make([]byte, half), make([]byte, half)
	// Touch every page first so page faults are not timed.
	parallel(workers, half, func(lo, hi int) {
		s := src[lo:hi]
		for i := range min(len(s), 4096) {
			s[i] = byte(i * 7)
		}
		for done := 4096; done < len(s); done *= 2 {
			copy(s[done:], s[:done])
		}
		copy(dst[lo:hi], s)
	})
	best := 0.0
	for {
		if err := ctx.Err(); err != nil {
			if best > 0 {
				return best, nil // ctx's deadline may be the budget's
			}
			return 0, err
		}
		t0 := time.Now()
		parallel(workers, half, func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
		dt := time.Since(t0)
		if dt > 0 {
			best = max(best, 2*float64(half)/dt.Seconds()/1e9)
		}
		if time.Now().Add(dt).After(deadline) {
			return best, nil
		}
	}
}

// gemmTOPS times int8gemm's kernel as the CPU prover runs it for a
// challenge (package challenge/prove) and returns the best rate in TOPS:
// B packed in panels, C computed int8gemm.RowBlock rows at a time, the
// blocks handed to workers as they come free. Products are n×n×n cubes,
// the shape challenge.SizeFor gives a CPU's claim, from n = 64, doubling
// while the next size should take at most half the remaining time; a run
// the deadline cuts short is not counted. The rate of a block hardly
// depends on n past a few hundred (on one core of a 2-core VM: best runs
// of 15.5–15.8 GOPS from n = 512 to 6144), so the sizes a short budget reaches give the rate of
// a challenge's larger ones. Packing B is not timed: it is O(n²), and,
// like the prover's expansion of A and B and hashing of C, it is what a
// challenge's slack is for.
func gemmTOPS(ctx context.Context, workers, maxN int, deadline time.Time) (float64, error) {
	n := min(64, maxN)
	g := newGEMMBench(n)
	best := 0.0
	for {
		// Only the first run may overrun: without it there is no figure.
		first := best == 0
		stop := func() bool { return ctx.Err() != nil || !first && time.Now().After(deadline) }
		t0 := time.Now()
		done := g.run(workers, stop)
		dt := time.Since(t0)
		if !done {
			if err := ctx.Err(); err != nil && best == 0 {
				return 0, err
			}
			return best, nil // ctx's deadline may be the budget's
		}
		if fn := float64(n); dt > 0 {
			best = max(best, 2*fn*fn*fn/dt.Seconds()/1e12)
		}

		remaining := time.Until(deadline)
		switch {
		case 2*n <= maxN && 2*8*dt <= remaining: // GEMM time grows with n³
			n *= 2
			g = newGEMMBench(n)
		case dt > remaining:
			return best, nil
		}
	}
}

// gemmBench is one n×n×n product to time: B packed, and one block of
// rows of A, which every block of C is computed from (the kernel's time
// does not depend on the values).
type gemmBench struct {
	n int
	b *int8gemm.PackedB
	a []int8
}

func newGEMMBench(n int) *gemmBench {
	r := rand.New(rand.NewPCG(uint64(n), 'B'))
	g := &gemmBench{n: n, b: int8gemm.NewPackedB(n, n), a: make([]int8, min(n, int8gemm.RowBlock)*n)}
	cols := make([]int8, int8gemm.PanelCols*n)
	for p := range g.b.Panels() {
		cols := cols[:min(int8gemm.PanelCols, n-p*int8gemm.PanelCols)*n]
		for i := range cols {
			cols[i] = int8(r.Uint32())
		}
		g.b.SetPanel(p, cols)
	}
	for i := range g.a {
		g.a[i] = int8(r.Uint32())
	}
	return g
}

// run computes the product's n/RowBlock blocks of C on workers
// goroutines, as the prover shares them out, polling stop before each
// block. It returns false if stop ended it early.
func (g *gemmBench) run(workers int, stop func() bool) bool {
	n, rb := g.n, int8gemm.RowBlock
	blocks := (n + rb - 1) / rb
	var next atomic.Int64
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for range min(workers, blocks) {
		wg.Go(func() {
			c := make([]int32, rb*n)
			for !stopped.Load() {
				blk := int(next.Add(1) - 1)
				if blk >= blocks {
					return
				}
				if stop() {
					stopped.Store(true)
					return
				}
				rows := min(rb, n-blk*rb)
				g.b.MulRows(c[:rows*n], g.a[:rows*n])
			}
		})
	}
	wg.Wait()
	return !stopped.Load()
}

var _ Benchmarker = (*CPUBenchmarker)(nil)
