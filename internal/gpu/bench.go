package gpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/hwinfo"
)

// Benchmarker measures one GPU (hwinfo.Benchmarker): each GEMM kernel the
// device runs is first checked against the CPU on a small product, then
// timed on growing square products (Figures.Kernels); the fastest correct
// one is the kernel the device's challenge prover uses (Figures.Kernel).
// The device's int8 figure (Figures.Int8TOPS), which the provider declares
// and challenges check, is then the whole proof's rate with that kernel:
// a challenge-shaped product with its matrices expanded from a seed and
// its Merkle leaves hashed, as the prover does it. A claim of the bare
// kernel's rate would leave no room for the expansion and the hashing, and
// an honest GPU would spend more than 60 s an hour on challenges.
// Memory bandwidth is a device-to-device copy (bytes read plus written).
type Benchmarker struct {
	Dev Backend
	// MaxSize bounds the side of the timed products; 0 is 16384. Tests
	// on the emulated device set it small.
	MaxSize int
}

var _ hwinfo.Benchmarker = (*Benchmarker)(nil)

// Device returns "gpu:<uuid>".
func (b *Benchmarker) Device() string { return "gpu:" + b.Dev.UUID() }

// Run spends about budget measuring.
func (b *Benchmarker) Run(ctx context.Context, budget time.Duration) (hwinfo.Figures, error) {
	start := time.Now()
	if budget <= 0 {
		return hwinfo.Figures{}, fmt.Errorf("benchmark budget %v: must be positive", budget)
	}
	deadline := start.Add(budget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	fig := hwinfo.Figures{Device: b.Device()}
	bw, err := b.bandwidth(start.Add(time.Until(deadline) / 8))
	if err != nil {
		return fig, fmt.Errorf("%s memory bandwidth: %w", b.Dev.Describe(), err)
	}
	fig.MemBandwidthGBs = bw
	kernels := b.Dev.GEMMKernels()
	var errs []error
	for i, k := range kernels {
		if err := ctx.Err(); err != nil {
			return fig, err
		}
		share := time.Until(deadline) / time.Duration(len(kernels)-i)
		kf := hwinfo.KernelFigure{Kernel: k}
		if err := b.check(k); err != nil {
			kf.Error = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		} else if tops, shape, err := b.time(ctx, k, time.Now().Add(share)); err != nil {
			kf.Error = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		} else {
			kf.Int8TOPS, kf.Shape = tops, shape
			if tops > fig.Int8TOPS {
				fig.Int8TOPS, fig.Kernel = tops, k
			}
		}
		fig.Kernels = append(fig.Kernels, kf)
	}
	if fig.Kernel == "" {
		fig.Duration = time.Since(start)
		return fig, fmt.Errorf("%s: no GEMM kernel gave a correct result: %w", b.Dev.Describe(), errors.Join(errs...))
	}
	proof, err := b.proofRate(ctx, fig.Kernel, fig.Int8TOPS, time.Until(deadline))
	if err != nil {
		return fig, fmt.Errorf("%s: a challenge-shaped proof with %s: %w", b.Dev.Describe(), fig.Kernel, err)
	}
	fig.Int8TOPS = min(fig.Int8TOPS, proof)
	fig.Duration = time.Since(start)
	return fig, nil
}

// proofRate proves a challenge sized for about a quarter of left (at
// least 100 ms, at most 2 s) at the kernel's rate, with the prover, and
// returns the rate it achieved in TOPS.
func (b *Benchmarker) proofRate(ctx context.Context, kernel string, kernelTOPS float64, left time.Duration) (float64, error) {
	ms := uint64(min(max(left/4, 100*time.Millisecond), 2*time.Second).Milliseconds())
	size := challenge.SizeFor(max(uint64(kernelTOPS*1000), 1), ms)
	ch := challenge.Challenge{Seed: [32]byte{'p', 'r', 'o', 'o', 'f'}, Size: size, Openings: 1}
	t0 := time.Now()
	cm, err := (&Prover{Dev: b.Dev, Kernel: kernel}).Commit(ctx, ch)
	if err != nil {
		return 0, err
	}
	dt := time.Since(t0)
	cm.Close()
	return float64(size.Ops()) / dt.Seconds() / 1e12, nil
}

// check runs kernel on a product whose edges are not multiples of the
// tiles and compares every entry with the CPU's.
func (b *Benchmarker) check(kernel string) error {
	const n, k, m = 200, 512, 136
	dev := b.Dev
	a, err := dev.Alloc(roundUp(n, RowAlign) * k)
	if err != nil {
		return err
	}
	defer dev.Free(a)
	bt, err := dev.Alloc(roundUp(m, ColAlign) * k)
	if err != nil {
		return err
	}
	defer dev.Free(bt)
	c, err := dev.Alloc(n * m * 4)
	if err != nil {
		return err
	}
	defer dev.Free(c)
	if err := dev.AESCTR(a, [32]byte{'A'}, 0, a.Size()/16); err != nil {
		return err
	}
	if err := dev.AESCTR(bt, [32]byte{'B'}, 0, bt.Size()/16); err != nil {
		return err
	}
	if err := dev.Memset(c, 0x5a); err != nil {
		return err
	}
	if err := dev.GEMM(kernel, c, a, bt, n, k, m, m); err != nil {
		return err
	}
	ha, hb, hc := make([]byte, n*k), make([]byte, m*k), make([]byte, n*m*4)
	for _, cp := range []struct {
		dst []byte
		src Buf
	}{{ha, a}, {hb, bt}, {hc, c}} {
		if err := dev.CopyOut(cp.dst, cp.src.Slice(0, uint64(len(cp.dst)))); err != nil {
			return err
		}
	}
	row, col := make([]int8, k), make([]int8, k)
	for i := range n {
		for x := range k {
			row[x] = int8(ha[i*k+x])
		}
		for j := range m {
			for x := range k {
				col[x] = int8(hb[j*k+x])
			}
			want := challenge.DotInt8(row, col)
			if got := int32(binary.LittleEndian.Uint32(hc[(i*m+j)*4:])); got != want {
				return fmt.Errorf("wrong result on a %d×%d×%d check: C[%d][%d] = %d, want %d", n, k, m, i, j, got, want)
			}
		}
	}
	return nil
}

// time runs square products of growing side until deadline and returns
// the best rate.
func (b *Benchmarker) time(ctx context.Context, kernel string, deadline time.Time) (float64, string, error) {
	maxSize := b.MaxSize
	if maxSize <= 0 {
		maxSize = 16384
	}
	dev := b.Dev
	best, shape := 0.0, ""
	for s := min(256, maxSize); s <= maxSize; s *= 2 {
		n := uint64(s)
		free, err := dev.FreeMemory()
		if err != nil {
			return 0, "", err
		}
		if need := 6*n*n + 256<<20; need > free && best > 0 {
			break
		}
		rate, perGEMM, err := b.timeSize(ctx, kernel, n, deadline)
		if err != nil {
			return 0, "", err
		}
		if rate > best {
			best, shape = rate, fmt.Sprintf("%d×%d×%d", n, n, n)
		}
		// The next size takes 8 times as long a product, and is run at
		// least twice.
		if time.Now().Add(16 * perGEMM).After(deadline) {
			break
		}
	}
	if best == 0 {
		return 0, "", fmt.Errorf("no product finished within the budget")
	}
	return best, shape, nil
}

// timeSize returns the best rate on n×n×n products and the time of one.
func (b *Benchmarker) timeSize(ctx context.Context, kernel string, n uint64, deadline time.Time) (float64, time.Duration, error) {
	dev := b.Dev
	a, err := dev.Alloc(roundUp(n, RowAlign) * n)
	if err != nil {
		return 0, 0, err
	}
	defer dev.Free(a)
	bt, err := dev.Alloc(roundUp(n, ColAlign) * n)
	if err != nil {
		return 0, 0, err
	}
	defer dev.Free(bt)
	c, err := dev.Alloc(n * n * 4)
	if err != nil {
		return 0, 0, err
	}
	defer dev.Free(c)
	if err := dev.AESCTR(a, [32]byte{'a'}, 0, a.Size()/16); err != nil {
		return 0, 0, err
	}
	if err := dev.AESCTR(bt, [32]byte{'b'}, 0, bt.Size()/16); err != nil {
		return 0, 0, err
	}
	// A warm-up launch, then doubling repetitions until one batch takes
	// long enough to time.
	if err := dev.GEMM(kernel, c, a, bt, uint32(n), uint32(n), uint32(n), uint32(n)); err != nil {
		return 0, 0, err
	}
	if err := dev.Sync(); err != nil {
		return 0, 0, err
	}
	best, per := 0.0, time.Duration(0)
	for reps := 1; ; reps *= 2 {
		if err := ctx.Err(); err != nil {
			return best, 0, err
		}
		t0 := time.Now()
		for range reps {
			if err := dev.GEMM(kernel, c, a, bt, uint32(n), uint32(n), uint32(n), uint32(n)); err != nil {
				return 0, 0, err
			}
		}
		if err := dev.Sync(); err != nil {
			return 0, 0, err
		}
		dt := time.Since(t0)
		if r := 2 * float64(n) * float64(n) * float64(n) * float64(reps) / dt.Seconds() / 1e12; r > best {
			best, per = r, dt/time.Duration(reps)
		}
		if dt > 50*time.Millisecond || time.Now().Add(2*dt).After(deadline) {
			return best, per, nil
		}
	}
}

// bandwidth copies a buffer on the device until deadline (at least
// twice) and returns the best rate in GB/s.
func (b *Benchmarker) bandwidth(deadline time.Time) (float64, error) {
	dev := b.Dev
	free, err := dev.FreeMemory()
	if err != nil {
		return 0, err
	}
	size := min(uint64(1<<30), free/4)
	src, err := dev.Alloc(size)
	if err != nil {
		return 0, err
	}
	defer dev.Free(src)
	dst, err := dev.Alloc(size)
	if err != nil {
		return 0, err
	}
	defer dev.Free(dst)
	best := 0.0
	for i := 0; ; i++ {
		t0 := time.Now()
		if err := dev.Copy(dst, src); err != nil {
			return 0, err
		}
		if err := dev.Sync(); err != nil {
			return 0, err
		}
		dt := time.Since(t0)
		if i > 0 { // the first copy maps the pages
			best = max(best, 2*float64(size)/dt.Seconds()/1e9)
		}
		if i > 0 && time.Now().Add(dt).After(deadline) {
			return best, nil
		}
	}
}
