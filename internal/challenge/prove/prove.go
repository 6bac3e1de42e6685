// Package prove answers hardware challenges (package challenge) on a
// provider's device: it computes C = A·B for a challenge, commits to it,
// and opens the leaves the chain selects.
//
// Prover is the seam for devices. CPU is the pure-Go implementation; a
// CUDA prover implements the same two interfaces with the GEMM (int8
// tensor cores, int32 accumulation), the expansion of A and B and the
// leaf hashing on the device, keeping only what Open needs. Unlike package
// challenge, which validators run inside the ledger, this package uses
// goroutines and the clock freely.
package prove

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/int8gemm"
)

// Every challenge's product is exact in int8gemm's kernel: a compile
// error here if challenge.MaxK ever exceeded the kernel's bound.
const _ = uint(int8gemm.MaxK - challenge.MaxK)

// Prover computes and commits to a challenge's product on one device.
//
// Commit must return the root that challenge.Verify checks against, that
// is, of the exact int32 product of the matrices challenge.NewGenerator
// defines; it returns ctx's error if ctx ends first.
type Prover interface {
	Commit(ctx context.Context, c challenge.Challenge) (Commitment, error)
}

// Commitment is a computed challenge, held until the chain selects the
// entries to open.
type Commitment interface {
	// Root is the Merkle root of C, to publish as a challenge.Commit.
	Root() [32]byte
	// Open reveals the leaves that randomness selects
	// (challenge.Challenge.Select), in order, with their proofs.
	Open(ctx context.Context, randomness [32]byte) (*challenge.Opening, error)
	// Close releases what the commitment holds (device memory for a GPU
	// prover). Open fails after Close.
	Close() error
}

// CPU proves on the CPU with package int8gemm's pure-Go kernel, the one
// hwinfo's CPU benchmark times.
type CPU struct {
	// Workers is the number of goroutines; ≤ 0 means runtime.GOMAXPROCS(0).
	Workers int
	// RowBlock is the number of rows of C a goroutine computes and hashes
	// at a time; 0 means int8gemm.RowBlock (32), the block hwinfo's
	// benchmark times. It must be even or 1.
	RowBlock int
}

var _ Prover = (*CPU)(nil)

// Commit computes C one block of rows at a time (each worker expands its
// rows of A, multiplies them by the packed B and hashes the leaves), so it
// never holds A or C whole: memory is B packed (8/3·K·M bytes) and the
// tree (about N·M bytes).
func (p *CPU) Commit(ctx context.Context, c challenge.Challenge) (Commitment, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g, err := challenge.NewGenerator(c.Seed, c.Size)
	if err != nil {
		return nil, err
	}
	workers := p.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	rb := p.RowBlock
	if rb == 0 {
		rb = int8gemm.RowBlock
	}
	if rb < 0 || rb > 1 && rb%2 != 0 {
		return nil, fmt.Errorf("row block %d: want 1 or a positive even number", rb)
	}
	n, k, m := c.Size.N, c.Size.K, c.Size.M

	// Pack B panel by panel.
	packed := int8gemm.NewPackedB(k, m)
	if err := parallel(ctx, workers, packed.Panels(), func(cols []int8, p int) {
		cols = cols[:min(int8gemm.PanelCols, m-p*int8gemm.PanelCols)*k]
		g.FillColsB(cols, p*int8gemm.PanelCols)
		packed.SetPanel(p, cols)
	}, func() []int8 { return make([]int8, int8gemm.PanelCols*k) }); err != nil {
		return nil, err
	}

	// Multiply and hash by blocks of rows.
	perRow := m / challenge.LeafEntries
	leaves := make([][32]byte, n*perRow)
	blocks := (n + rb - 1) / rb
	type buf struct {
		a []int8
		c []int32
	}
	if err := parallel(ctx, workers, blocks, func(b buf, blk int) {
		i0 := blk * rb
		rows := min(rb, n-i0)
		a, cc := b.a[:rows*k], b.c[:rows*m]
		g.FillRowsA(a, i0)
		packed.MulRows(cc, a)
		for x := range rows * perRow {
			leaves[i0*perRow+x] = challenge.HashLeaf((*[challenge.LeafEntries]int32)(cc[x*challenge.LeafEntries:]))
		}
	}, func() buf { return buf{make([]int8, rb*k), make([]int32, rb*m)} }); err != nil {
		return nil, err
	}
	tree, err := challenge.NewTree(leaves)
	if err != nil {
		return nil, err
	}
	return &cpuCommitment{ch: c, gen: g, tree: tree}, nil
}

// parallel runs do(scratch, u) for u in [0, units) on workers goroutines,
// each with its own scratch from newScratch, and returns ctx's error if ctx
// ends first (checked between units).
func parallel[S any](ctx context.Context, workers, units int, do func(S, int), newScratch func() S) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, units) {
		wg.Go(func() {
			s := newScratch()
			for ctx.Err() == nil {
				u := int(next.Add(1) - 1)
				if u >= units {
					return
				}
				do(s, u)
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

type cpuCommitment struct {
	ch   challenge.Challenge
	gen  *challenge.Generator
	tree *challenge.Tree
}

func (c *cpuCommitment) Root() [32]byte { return c.tree.Root() }

// Open recomputes each selected leaf from its row of A and its 64 columns
// of B (64·K multiply-adds) rather than keeping C.
func (c *cpuCommitment) Open(ctx context.Context, randomness [32]byte) (*challenge.Opening, error) {
	if c.tree == nil {
		return nil, fmt.Errorf("open after close")
	}
	sel, err := c.ch.Select(c.tree.Root(), randomness)
	if err != nil {
		return nil, err
	}
	k := c.ch.Size.K
	cols := make([]int8, challenge.LeafEntries*k)
	o := &challenge.Opening{Leaves: make([]challenge.LeafOpening, len(sel))}
	for x, e := range sel {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lo := &o.Leaves[x]
		leaf := e.Leaf(c.ch.Size)
		lo.Leaf = uint32(leaf)
		row := c.gen.RowA(e.Row)
		c.gen.FillColsB(cols, e.Col/challenge.LeafEntries*challenge.LeafEntries)
		for t := range lo.Entries {
			lo.Entries[t] = challenge.DotInt8(row, cols[t*k:(t+1)*k])
		}
		if lo.Proof, err = c.tree.Proof(leaf); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func (c *cpuCommitment) Close() error {
	c.tree = nil
	return nil
}
