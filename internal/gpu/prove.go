package gpu

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
)

// Prover answers hardware challenges on one GPU (prove.Prover): A and B
// are expanded from the seed by the AES kernel, C = A·B by the GEMM
// kernel, and C's Merkle leaves and the tree's lower levels are hashed on
// the device. C and A are never whole anywhere: rows go through the device
// a block at a time, and only the tree's nodes at storedLevel (a node for
// every 256 leaves) and above come back to the host. Open recomputes, for
// each selected leaf, the block of rows under its stored node and takes
// the proof's lower siblings from it.
//
// Memory on the device: Bᵀ (K × M rounded up to 256 columns, at most
// 1 GiB) and one block of rows (A, C and two levels of hashes); on the
// host: 1/4 byte per leaf of C for the stored levels.
type Prover struct {
	Dev    Backend
	Kernel string // GEMM kernel; "" is the device's first
	// BlockBytes bounds the device memory of one block of rows; 0 is
	// 1 GiB, less when the device has less free.
	BlockBytes uint64
}

var _ prove.Prover = (*Prover)(nil)

// storedLevel is the tree level kept on the host: each node there covers
// 2⁸ leaves. Blocks of rows are whole multiples of 2⁸ rows, so each starts
// on such a node.
const storedLevel = 8

const blockAlign = 1 << storedLevel // rows

// Commit computes and commits to c on the device.
func (p *Prover) Commit(ctx context.Context, c challenge.Challenge) (prove.Commitment, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g, err := challenge.NewGenerator(c.Seed, c.Size)
	if err != nil {
		return nil, err
	}
	kernel := p.Kernel
	if kernel == "" {
		if ks := p.Dev.GEMMKernels(); len(ks) > 0 {
			kernel = ks[0]
		}
	}
	cm := &commitment{ch: c, dev: p.Dev, kernel: kernel}
	cm.keyA, cm.keyB = g.Keys()
	if err := cm.plan(p.BlockBytes); err != nil {
		return nil, err
	}
	if err := cm.compute(ctx); err != nil {
		cm.Close()
		return nil, err
	}
	return cm, nil
}

type commitment struct {
	ch         challenge.Challenge
	dev        Backend
	kernel     string
	keyA, keyB [32]byte

	leaves uint64 // of the whole tree
	depth  int
	stored int    // level kept on the host: min(storedLevel, depth)
	rows   uint64 // per block

	bt, a, c, h0, h1 Buf
	upper            [][][32]byte // levels stored … depth
}

// perRow is the device memory one row of a block needs: a row of A, a row
// of C, and its leaves' hashes at two levels.
func (cm *commitment) perRow() uint64 {
	s := cm.ch.Size
	return uint64(s.K) + 4*uint64(s.M) + uint64(s.M)/challenge.LeafEntries*32*2
}

func (cm *commitment) plan(blockBytes uint64) error {
	s := cm.ch.Size
	cm.leaves = s.Leaves()
	cm.depth = s.Depth()
	cm.stored = min(storedLevel, cm.depth)
	btBytes := roundUp(uint64(s.M), ColAlign) * uint64(s.K)
	free, err := cm.dev.FreeMemory()
	if err != nil {
		return err
	}
	if blockBytes == 0 {
		blockBytes = 1 << 30
	}
	const reserve = 256 << 20 // the driver's and the kernels' own needs
	if free < btBytes+reserve {
		return fmt.Errorf("challenge %s needs %d MiB of device memory for B, %s has %d MiB free", s, btBytes>>20, cm.dev.Describe(), free>>20)
	}
	blockBytes = min(blockBytes, (free-btBytes-reserve)/2)
	rows := blockBytes / cm.perRow() / blockAlign * blockAlign
	if rows == 0 {
		return fmt.Errorf("challenge %s: a block of %d rows needs %d MiB of device memory, %s has %d MiB free beside B", s, blockAlign, blockAlign*cm.perRow()>>20, cm.dev.Describe(), (free-btBytes)>>20)
	}
	cm.rows = min(rows, roundUp(uint64(s.N), blockAlign))

	if cm.bt, err = cm.dev.Alloc(btBytes); err != nil {
		return err
	}
	leavesPerBlock := cm.rows * uint64(s.M) / challenge.LeafEntries
	for _, x := range []struct {
		buf *Buf
		n   uint64
	}{
		{&cm.a, cm.rows * uint64(s.K)},
		{&cm.c, cm.rows * uint64(s.M) * 4},
		{&cm.h0, leavesPerBlock * 32},
		{&cm.h1, (leavesPerBlock + 1) / 2 * 32},
	} {
		if *x.buf, err = cm.dev.Alloc(x.n); err != nil {
			cm.Close()
			return err
		}
	}
	return nil
}

// block computes rows first … first+rows-1 of C on the device and hashes
// their leaves: h0 holds the leaf hashes; after levels more levels, the
// returned buffer holds that level's nodes, width of them.
func (cm *commitment) block(first, rows uint64, levels int) (Buf, uint64, error) {
	s := cm.ch.Size
	k, m := uint64(s.K), uint64(s.M)
	genRows := roundUp(rows, RowAlign)
	if err := cm.dev.AESCTR(cm.a, cm.keyA, first*k/16, genRows*k/16); err != nil {
		return Buf{}, 0, err
	}
	if err := cm.dev.GEMM(cm.kernel, cm.c, cm.a, cm.bt, uint32(rows), uint32(k), uint32(m), uint32(m)); err != nil {
		return Buf{}, 0, err
	}
	width := rows * m / challenge.LeafEntries
	if err := cm.dev.HashLeaves(cm.h0, cm.c, width); err != nil {
		return Buf{}, 0, err
	}
	src, dst := cm.h0, cm.h1
	for range levels {
		if err := cm.dev.HashNodes(dst, src, width); err != nil {
			return Buf{}, 0, err
		}
		width = (width + 1) / 2
		src, dst = dst, src
	}
	return src, width, nil
}

func (cm *commitment) compute(ctx context.Context) error {
	s := cm.ch.Size
	// Bᵀ: columns 0 … of B, rounded up to the kernels' tile; the extra
	// columns are the stream's continuation and never reach C.
	bcols := cm.bt.Size() / uint64(s.K)
	if err := cm.dev.AESCTR(cm.bt, cm.keyB, 0, bcols*uint64(s.K)/16); err != nil {
		return err
	}
	n := uint64(s.N)
	nodes := make([][32]byte, 0, (cm.leaves+(1<<cm.stored)-1)>>cm.stored)
	var buf []byte
	for first := uint64(0); first < n; first += cm.rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		rows := min(cm.rows, n-first)
		out, width, err := cm.block(first, rows, cm.stored)
		if err != nil {
			return err
		}
		buf = buf[:0]
		buf = append(buf, make([]byte, width*32)...)
		if err := cm.dev.CopyOut(buf, out.Slice(0, width*32)); err != nil {
			return err
		}
		for x := range width {
			nodes = append(nodes, [32]byte(buf[x*32:]))
		}
	}
	if err := cm.dev.Sync(); err != nil {
		return err
	}
	cm.upper = buildLevels(nodes)
	if got := len(cm.upper) - 1 + cm.stored; got != cm.depth {
		return fmt.Errorf("internal error: tree of %d levels above level %d, want depth %d", len(cm.upper)-1, cm.stored, cm.depth)
	}
	return nil
}

// buildLevels returns level 0 = nodes and every level above it to the
// root, by challenge's rule (an absent right child is the empty hash).
func buildLevels(nodes [][32]byte) [][][32]byte {
	levels := [][][32]byte{nodes}
	for cur := nodes; len(cur) > 1; {
		next := make([][32]byte, (len(cur)+1)/2)
		for x := range next {
			var right [32]byte
			if 2*x+1 < len(cur) {
				right = cur[2*x+1]
			}
			next[x] = challenge.HashNode(cur[2*x], right)
		}
		levels = append(levels, next)
		cur = next
	}
	return levels
}

func (cm *commitment) Root() [32]byte { return cm.upper[len(cm.upper)-1][0] }

// Open recomputes, for each selected leaf, the rows under its stored node
// and reads the leaf's entries and the proof's lower siblings from them.
func (cm *commitment) Open(ctx context.Context, randomness [32]byte) (*challenge.Opening, error) {
	if cm.upper == nil {
		return nil, fmt.Errorf("open after close")
	}
	sel, err := cm.ch.Select(cm.Root(), randomness)
	if err != nil {
		return nil, err
	}
	s := cm.ch.Size
	perRow := uint64(s.M) / challenge.LeafEntries
	o := &challenge.Opening{Leaves: make([]challenge.LeafOpening, len(sel))}
	for x, e := range sel {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		leaf := e.Leaf(s)
		group := leaf >> cm.stored
		lo, hi := group<<cm.stored, min((group+1)<<cm.stored, cm.leaves)
		r0, r1 := lo/perRow, (hi-1)/perRow
		rows := r1 - r0 + 1
		if _, _, err := cm.block(r0, rows, 0); err != nil {
			return nil, err
		}
		// The group's leaf hashes, and the selected leaf's entries.
		off := lo - r0*perRow
		hashes := make([]byte, (hi-lo)*32)
		if err := cm.dev.CopyOut(hashes, cm.h0.Slice(off*32, uint64(len(hashes)))); err != nil {
			return nil, err
		}
		entries := make([]byte, 4*challenge.LeafEntries)
		if err := cm.dev.CopyOut(entries, cm.c.Slice((leaf-r0*perRow)*256, 256)); err != nil {
			return nil, err
		}
		group0 := make([][32]byte, hi-lo)
		for i := range group0 {
			group0[i] = [32]byte(hashes[i*32:])
		}
		op := &o.Leaves[x]
		op.Leaf = uint32(leaf)
		for t := range op.Entries {
			op.Entries[t] = int32(binary.LittleEndian.Uint32(entries[4*t:]))
		}
		op.Proof = append(siblings(buildLevels(group0), leaf-lo, cm.stored), siblings(cm.upper, group, cm.depth-cm.stored)...)
	}
	return o, nil
}

// siblings returns the first n siblings on the path of node idx of
// levels[0] (the empty hash where a level has no sibling).
func siblings(levels [][][32]byte, idx uint64, n int) [][32]byte {
	out := make([][32]byte, n)
	for l := range n {
		if l < len(levels) {
			if s := idx ^ 1; s < uint64(len(levels[l])) {
				out[l] = levels[l][s]
			}
		}
		idx >>= 1
	}
	return out
}

func (cm *commitment) Close() error {
	for _, b := range []*Buf{&cm.bt, &cm.a, &cm.c, &cm.h0, &cm.h1} {
		if b.size > 0 || b.base != 0 {
			cm.dev.Free(*b)
			*b = Buf{}
		}
	}
	cm.upper = nil
	return nil
}
