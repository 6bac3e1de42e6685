package challenge_test

import (
	"fmt"
	"testing"

	"github.com/gpunet/gpunet/internal/challenge"
)

// naive is a reference prover: the whole of C by dot products, the tree
// over it, and openings read from both. It shares only the generator,
// HashLeaf and NewTree with the code under test.
type naive struct {
	ch   challenge.Challenge
	c    []int32
	tree *challenge.Tree
}

func newNaive(t testing.TB, ch challenge.Challenge) *naive {
	t.Helper()
	g, err := challenge.NewGenerator(ch.Seed, ch.Size)
	if err != nil {
		t.Fatal(err)
	}
	s := ch.Size
	rows := make([][]int8, s.N)
	for i := range rows {
		rows[i] = g.RowA(i)
	}
	c := make([]int32, s.N*s.M)
	for j := range s.M {
		col := g.ColB(j)
		for i, r := range rows {
			c[i*s.M+j] = challenge.DotInt8(r, col)
		}
	}
	leaves := make([][32]byte, s.Leaves())
	for l := range leaves {
		leaves[l] = challenge.HashLeaf((*[challenge.LeafEntries]int32)(c[l*challenge.LeafEntries:]))
	}
	tree, err := challenge.NewTree(leaves)
	if err != nil {
		t.Fatal(err)
	}
	return &naive{ch: ch, c: c, tree: tree}
}

func (p *naive) root() [32]byte { return p.tree.Root() }

func (p *naive) open(t testing.TB, randomness [32]byte) *challenge.Opening {
	t.Helper()
	sel, err := p.ch.Select(p.root(), randomness)
	if err != nil {
		t.Fatal(err)
	}
	o := &challenge.Opening{}
	for _, e := range sel {
		l := e.Leaf(p.ch.Size)
		proof, err := p.tree.Proof(l)
		if err != nil {
			t.Fatal(err)
		}
		lo := challenge.LeafOpening{Leaf: uint32(l), Proof: proof}
		copy(lo.Entries[:], p.c[l*challenge.LeafEntries:])
		o.Leaves = append(o.Leaves, lo)
	}
	return o
}

func seedOf(s string) (b [32]byte) {
	copy(b[:], s)
	return b
}

func fmtAny(v any) string { return fmt.Sprintf("%v", v) }
