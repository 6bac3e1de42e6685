package prove

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/gpunet/gpunet/internal/challenge"
)

// referenceRoot is the root of C computed entry by entry with
// challenge.DotInt8, sharing nothing with the CPU prover's kernel.
func referenceRoot(t *testing.T, ch challenge.Challenge) [32]byte {
	t.Helper()
	g, err := challenge.NewGenerator(ch.Seed, ch.Size)
	if err != nil {
		t.Fatal(err)
	}
	s := ch.Size
	cols := make([][]int8, s.M)
	for j := range cols {
		cols[j] = g.ColB(j)
	}
	leaves := make([][32]byte, 0, s.Leaves())
	var leaf [challenge.LeafEntries]int32
	for i := range s.N {
		row := g.RowA(i)
		for j := range s.M {
			leaf[j%challenge.LeafEntries] = challenge.DotInt8(row, cols[j])
			if j%challenge.LeafEntries == challenge.LeafEntries-1 {
				leaves = append(leaves, challenge.HashLeaf(&leaf))
			}
		}
	}
	tree, err := challenge.NewTree(leaves)
	if err != nil {
		t.Fatal(err)
	}
	return tree.Root()
}

func TestCPUMatchesReference(t *testing.T) {
	for _, tt := range []struct {
		size              challenge.Size
		workers, rowBlock int
	}{
		{challenge.Size{N: 64, K: 64, M: 64}, 1, 0},
		{challenge.Size{N: 64, K: 128, M: 192}, 2, 2},
		{challenge.Size{N: 192, K: 64, M: 320}, 3, 1},    // one row at a time: the 1×4 kernel
		{challenge.Size{N: 128, K: 256, M: 128}, 4, 128}, // one block
		{challenge.Size{N: 320, K: 192, M: 64}, 2, 96},   // the last block is short
	} {
		ch := challenge.Challenge{Seed: seedOf(tt.size.String()), Size: tt.size, Openings: challenge.DefaultOpenings}
		c, err := (&CPU{Workers: tt.workers, RowBlock: tt.rowBlock}).Commit(t.Context(), ch)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Root(), referenceRoot(t, ch); got != want {
			t.Errorf("%s, %d workers, row block %d: root %x, reference %x", tt.size, tt.workers, tt.rowBlock, got, want)
		}
	}
}

// TestCPUGolden: the prover gives the root package challenge pins (and
// testdata/reference.py computes).
func TestCPUGolden(t *testing.T) {
	ch := challenge.Challenge{Seed: seedOf("gpunet golden"), Size: challenge.Size{N: 64, K: 128, M: 192}, Openings: challenge.DefaultOpenings}
	c, err := (&CPU{}).Commit(t.Context(), ch)
	if err != nil {
		t.Fatal(err)
	}
	root := c.Root()
	if got, want := hex.EncodeToString(root[:]), "3fbe8c753fa5514da302008bc176b55d106e4088eb273df285db7dd6ca9fc233"; got != want {
		t.Fatalf("root %s, want %s", got, want)
	}
}

func TestCPURoundTrip(t *testing.T) {
	for _, size := range []challenge.Size{
		{N: 64, K: 64, M: 64},
		{N: 256, K: 512, M: 384},
		{N: 640, K: 1024, M: 576},
	} {
		t.Run(size.String(), func(t *testing.T) {
			ch := challenge.Challenge{Seed: seedOf("round trip"), Size: size, Openings: challenge.DefaultOpenings}
			c, err := (&CPU{}).Commit(t.Context(), ch)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cb, _ := challenge.Commit{Root: c.Root()}.MarshalBinary()
			commit, err := challenge.DecodeCommit(cb)
			if err != nil {
				t.Fatal(err)
			}
			r := sha256.Sum256([]byte("later block"))
			o, err := c.Open(t.Context(), r)
			if err != nil {
				t.Fatal(err)
			}
			ob, err := o.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if len(ob) != challenge.OpeningBytes(size, ch.Openings) {
				t.Errorf("opening of %d bytes, OpeningBytes %d", len(ob), challenge.OpeningBytes(size, ch.Openings))
			}
			opening, err := challenge.DecodeOpening(ob)
			if err != nil {
				t.Fatal(err)
			}
			if err := challenge.Verify(ch.Seed, size, commit.Root, r, opening); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			// The same commitment opened for other randomness verifies for it only.
			r2 := sha256.Sum256([]byte("another block"))
			o2, err := c.Open(t.Context(), r2)
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.Verify(commit.Root, r2, o2); err != nil {
				t.Fatalf("Verify, second randomness: %v", err)
			}
			if err := ch.Verify(commit.Root, r, o2); !errors.Is(err, challenge.ErrLeaf) {
				t.Fatalf("opening for r2 checked against r: %v, want ErrLeaf", err)
			}
		})
	}
}

func TestCPUContextAndClose(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ch := challenge.Challenge{Seed: seedOf("cancel"), Size: challenge.Size{N: 256, K: 256, M: 256}, Openings: 8}
	if _, err := (&CPU{}).Commit(ctx, ch); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with a cancelled context: %v", err)
	}
	c, err := (&CPU{}).Commit(t.Context(), ch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(ctx, [32]byte{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a cancelled context: %v", err)
	}
	c.Close()
	if _, err := c.Open(t.Context(), [32]byte{}); err == nil {
		t.Fatal("Open after Close")
	}
	if _, err := (&CPU{RowBlock: 3}).Commit(t.Context(), ch); err == nil {
		t.Fatal("odd row block accepted")
	}
	if _, err := (&CPU{}).Commit(t.Context(), challenge.Challenge{Size: challenge.Size{N: 64, K: 64, M: 64}, Openings: 65}); !errors.Is(err, challenge.ErrSize) {
		t.Fatalf("65 openings of 64 leaves: %v", err)
	}
}

func seedOf(s string) (b [32]byte) {
	copy(b[:], s)
	return b
}
