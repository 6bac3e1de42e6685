package hwinfo

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

// Figures are one device's measured performance.
type Figures struct {
	Device string `json:"device"` // "cpu" or "gpu:<uuid>"
	// Int8TOPS is int8 GEMM throughput in tera-operations per second, counting
	// a multiply-add as two operations as GPU datasheets do: 2·n³ operations
	// per n×n GEMM (GEMMInt8), divided by seconds, divided by 10¹².
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

// CPUBenchmarker measures the CPU with pure-Go kernels: GEMMInt8Parallel for
// throughput and a parallel copy for memory bandwidth.
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
	maxN = min(maxN, MaxGEMMSize)

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

// gemmTOPS times GEMMInt8Parallel until deadline and returns the best rate in
// TOPS. It starts at n = 64 and doubles n while the next size should take at
// most half the remaining time; a run the deadline cuts short is not counted.
func gemmTOPS(ctx context.Context, workers, maxN int, deadline time.Time) (float64, error) {
	seedA, seedB := [32]byte{'A'}, [32]byte{'B'}
	n := min(64, maxN)
	a, b, c := MatrixFromSeed(seedA, n), MatrixFromSeed(seedB, n), make([]int32, n*n)
	best := 0.0
	for {
		// Only the first run may overrun: without it there is no figure.
		first := best == 0
		stop := func() bool { return ctx.Err() != nil || !first && time.Now().After(deadline) }
		t0 := time.Now()
		done := gemmInt8(a, b, c, n, workers, stop)
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
			a, b, c = MatrixFromSeed(seedA, n), MatrixFromSeed(seedB, n), make([]int32, n*n)
		case dt > remaining:
			return best, nil
		}
	}
}

var _ Benchmarker = (*CPUBenchmarker)(nil)
