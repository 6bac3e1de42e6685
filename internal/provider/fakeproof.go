package provider

import (
	"context"
	"fmt"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
)

// fakeProver is the FakeChallenges fault: the cheat of a provider that
// claims more than it has and cannot compute a challenge in time. It
// answers at once with a Merkle tree over a product of zeros, and opens it
// consistently (every proof checks against its root), so only the chain's
// recomputation of the opened entries can catch it.
type fakeProver struct{}

func (fakeProver) Commit(ctx context.Context, c challenge.Challenge) (prove.Commitment, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var zero [challenge.LeafEntries]int32
	leaf := challenge.HashLeaf(&zero)
	leaves := make([][32]byte, c.Size.N*(c.Size.M/challenge.LeafEntries))
	for i := range leaves {
		leaves[i] = leaf
	}
	tree, err := challenge.NewTree(leaves)
	if err != nil {
		return nil, err
	}
	return &fakeCommitment{ch: c, tree: tree}, ctx.Err()
}

type fakeCommitment struct {
	ch   challenge.Challenge
	tree *challenge.Tree
}

func (f *fakeCommitment) Root() [32]byte { return f.tree.Root() }

func (f *fakeCommitment) Open(_ context.Context, randomness [32]byte) (*challenge.Opening, error) {
	if f.tree == nil {
		return nil, fmt.Errorf("open after close")
	}
	sel, err := f.ch.Select(f.tree.Root(), randomness)
	if err != nil {
		return nil, err
	}
	o := &challenge.Opening{Leaves: make([]challenge.LeafOpening, len(sel))}
	for x, e := range sel {
		leaf := e.Leaf(f.ch.Size)
		o.Leaves[x].Leaf = uint32(leaf)
		if o.Leaves[x].Proof, err = f.tree.Proof(leaf); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func (f *fakeCommitment) Close() error {
	f.tree = nil
	return nil
}
