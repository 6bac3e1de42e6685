package challenge_test

import (
	"bytes"
	"crypto/aes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/challenge"
)

var testSizes = []challenge.Size{
	{N: 64, K: 64, M: 64},    // 64 leaves: the smallest tree
	{N: 64, K: 128, M: 192},  // 192 leaves, padded to 256
	{N: 128, K: 64, M: 320},  // 640 leaves
	{N: 192, K: 256, M: 128}, // 384 leaves
}

func TestRoundTrip(t *testing.T) {
	for _, size := range testSizes {
		t.Run(size.String(), func(t *testing.T) {
			ch := challenge.Challenge{Seed: seedOf("round trip " + size.String()), Size: size, Openings: challenge.DefaultOpenings}
			p := newNaive(t, ch)
			randomness := sha256.Sum256([]byte("block after the commit"))
			o := p.open(t, randomness)
			if err := ch.Verify(p.root(), randomness, o); err != nil {
				t.Fatalf("honest opening: %v", err)
			}
			if err := challenge.Verify(ch.Seed, size, p.root(), randomness, o); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			b, err := o.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(b), challenge.OpeningBytes(size, ch.Openings); got != want {
				t.Errorf("encoded opening is %d bytes, OpeningBytes says %d", got, want)
			}
			o2, err := challenge.DecodeOpening(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := ch.Verify(p.root(), randomness, o2); err != nil {
				t.Fatalf("decoded honest opening: %v", err)
			}
			cb, _ := challenge.Commit{Root: p.root()}.MarshalBinary()
			c, err := challenge.DecodeCommit(cb)
			if err != nil || c.Root != p.root() {
				t.Fatalf("commit round trip: %x, %v", c.Root, err)
			}
		})
	}
}

func TestVerifyRejects(t *testing.T) {
	size := challenge.Size{N: 128, K: 64, M: 320}
	ch := challenge.Challenge{Seed: seedOf("rejects"), Size: size, Openings: challenge.DefaultOpenings}
	p := newNaive(t, ch)
	root := p.root()
	randomness := sha256.Sum256([]byte("randomness"))
	sel, err := ch.Select(root, randomness)
	if err != nil {
		t.Fatal(err)
	}
	at := func(x int) int { return sel[x].Col % challenge.LeafEntries } // selected entry within leaf x

	tests := []struct {
		name       string
		root       [32]byte
		randomness [32]byte
		edit       func(o *challenge.Opening) *challenge.Opening
		want       error
	}{
		{"selected entry +1", root, randomness, func(o *challenge.Opening) *challenge.Opening {
			o.Leaves[7].Entries[at(7)]++
			return o
		}, challenge.ErrProof}, // the leaf no longer hashes to the committed one
		{"other entry of the leaf", root, randomness, func(o *challenge.Opening) *challenge.Opening {
			o.Leaves[3].Entries[(at(3)+1)%challenge.LeafEntries] ^= 1
			return o
		}, challenge.ErrProof},
		{"sibling bit flipped", root, randomness, func(o *challenge.Opening) *challenge.Opening {
			o.Leaves[11].Proof[4][9] ^= 0x10
			return o
		}, challenge.ErrProof},
		{"proof one short", root, randomness, func(o *challenge.Opening) *challenge.Opening {
			o.Leaves[0].Proof = o.Leaves[0].Proof[:len(o.Leaves[0].Proof)-1]
			return o
		}, challenge.ErrProof},
		{"proof one long", root, randomness, func(o *challenge.Opening) *challenge.Opening {
			o.Leaves[0].Proof = append(o.Leaves[0].Proof, [32]byte{})
			return o
		}, challenge.ErrProof},
		{"leaf index changed", root, randomness, func(o *challenge.Opening) *challenge.Opening {
			o.Leaves[5].Leaf ^= 1
			return o
		}, challenge.ErrLeaf},
		{"two leaves swapped", root, randomness, func(o *challenge.Opening) *challenge.Opening {
			o.Leaves[1], o.Leaves[2] = o.Leaves[2], o.Leaves[1]
			return o
		}, challenge.ErrLeaf},
		{"leaf dropped", root, randomness, func(o *challenge.Opening) *challenge.Opening {
			o.Leaves = o.Leaves[:len(o.Leaves)-1]
			return o
		}, challenge.ErrCount},
		{"leaf added", root, randomness, func(o *challenge.Opening) *challenge.Opening {
			o.Leaves = append(o.Leaves, o.Leaves[0])
			return o
		}, challenge.ErrCount},
		{"nil opening", root, randomness, func(*challenge.Opening) *challenge.Opening { return nil }, challenge.ErrCount},
		{"other randomness", root, sha256.Sum256([]byte("other")), func(o *challenge.Opening) *challenge.Opening { return o }, challenge.ErrLeaf},
		{"other root", sha256.Sum256([]byte("root")), randomness, func(o *challenge.Opening) *challenge.Opening { return o }, challenge.ErrLeaf},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.edit(p.open(t, randomness))
			err := ch.Verify(tt.root, tt.randomness, o)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}

	// A prover that commits to a wrong C has consistent proofs; the
	// recomputed entry catches it.
	t.Run("committed to a wrong C", func(t *testing.T) {
		liar := newNaive(t, ch)
		for x := range liar.c {
			liar.c[x]++
		}
		leaves := make([][32]byte, size.Leaves())
		for l := range leaves {
			leaves[l] = challenge.HashLeaf((*[challenge.LeafEntries]int32)(liar.c[l*challenge.LeafEntries:]))
		}
		if liar.tree, err = challenge.NewTree(leaves); err != nil {
			t.Fatal(err)
		}
		err := ch.Verify(liar.root(), randomness, liar.open(t, randomness))
		var ee *challenge.EntryError
		if !errors.As(err, &ee) || !errors.Is(err, challenge.ErrEntry) {
			t.Fatalf("Verify = %v, want an *EntryError", err)
		}
		if ee.Opening != 0 || ee.Got != ee.Want+1 {
			t.Errorf("EntryError %+v: want opening 0 with Got = Want+1", ee)
		}
		if want := p.c[ee.Row*size.M+ee.Col]; ee.Want != want {
			t.Errorf("EntryError.Want = %d, the true C[%d][%d] is %d", ee.Want, ee.Row, ee.Col, want)
		}
	})
}

// TestCatchProbability checks the security argument on a cheater that
// computes a fraction f of C's leaves and fills the rest with garbage,
// committing to it all consistently: each opening of K leaves catches it
// unless every selected leaf is honest, with probability
// C(honest, K)/C(L, K) ≤ (1-f)^K. The draws are deterministic, so is the
// observed rate.
func TestCatchProbability(t *testing.T) {
	size := challenge.Size{N: 64, K: 64, M: 64} // 64 leaves
	const k, bad, trials = 8, 16, 400           // f = 1/4
	ch := challenge.Challenge{Seed: seedOf("catch"), Size: size, Openings: k}
	liar := newNaive(t, ch)
	leaves := make([][32]byte, size.Leaves())
	for l := range leaves {
		if l%4 == 0 { // 16 garbage leaves
			for x := range challenge.LeafEntries {
				liar.c[l*challenge.LeafEntries+x] = 12345
			}
		}
		leaves[l] = challenge.HashLeaf((*[challenge.LeafEntries]int32)(liar.c[l*challenge.LeafEntries:]))
	}
	var err error
	if liar.tree, err = challenge.NewTree(leaves); err != nil {
		t.Fatal(err)
	}
	caught := 0
	for trial := range trials {
		r := sha256.Sum256(binary.LittleEndian.AppendUint64(nil, uint64(trial)))
		err := ch.Verify(liar.root(), r, liar.open(t, r))
		switch {
		case errors.Is(err, challenge.ErrEntry):
			caught++
		case err != nil:
			t.Fatalf("trial %d: %v, want nil or an entry error", trial, err)
		}
	}
	exact := 1.0 // P(caught) = 1 - C(48,8)/C(64,8)
	for i := range k {
		exact *= float64(size.Leaves()-bad-uint64(i)) / float64(size.Leaves()-uint64(i))
	}
	exact = 1 - exact
	bound := 1 - math.Pow(1-float64(bad)/float64(size.Leaves()), k)
	got := float64(caught) / trials
	sigma := math.Sqrt(exact * (1 - exact) / trials)
	t.Logf("caught %d/%d = %.3f; exact %.3f, 1-(1-f)^K = %.3f", caught, trials, got, exact, bound)
	if math.Abs(got-exact) > 4*sigma || exact < bound {
		t.Errorf("caught %.3f of cheats, want %.3f ± %.3f (≥ %.3f)", got, exact, 4*sigma, bound)
	}
}

func TestSelect(t *testing.T) {
	for _, size := range append(testSizes, challenge.Size{N: 4096, K: 64, M: 16384}) {
		t.Run(size.String(), func(t *testing.T) {
			ch := challenge.Challenge{Seed: seedOf("select"), Size: size, Openings: challenge.DefaultOpenings}
			root, r := sha256.Sum256([]byte("root")), sha256.Sum256([]byte("r"))
			sel, err := ch.Select(root, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(sel) != ch.Openings {
				t.Fatalf("%d entries, want %d", len(sel), ch.Openings)
			}
			seen := map[uint64]bool{}
			for _, e := range sel {
				if e.Row < 0 || e.Row >= size.N || e.Col < 0 || e.Col >= size.M {
					t.Fatalf("entry %+v outside %s", e, size)
				}
				if seen[e.Leaf(size)] {
					t.Fatalf("leaf %d selected twice", e.Leaf(size))
				}
				seen[e.Leaf(size)] = true
			}
			again, _ := ch.Select(root, r)
			if !slices.Equal(sel, again) {
				t.Error("Select is not deterministic")
			}
			other, _ := ch.Select(root, sha256.Sum256([]byte("r2")))
			if slices.Equal(sel, other) {
				t.Error("Select ignores the randomness")
			}
			other, _ = ch.Select(sha256.Sum256([]byte("root2")), r)
			if slices.Equal(sel, other) {
				t.Error("Select ignores the root")
			}
		})
	}
	t.Run("every leaf", func(t *testing.T) {
		size := challenge.Size{N: 64, K: 64, M: 64}
		ch := challenge.Challenge{Seed: seedOf("all"), Size: size, Openings: 64}
		sel, err := ch.Select([32]byte{}, [32]byte{})
		if err != nil {
			t.Fatal(err)
		}
		var leaves []uint64
		for _, e := range sel {
			leaves = append(leaves, e.Leaf(size))
		}
		slices.Sort(leaves)
		for l, got := range leaves {
			if got != uint64(l) {
				t.Fatalf("sorted leaves %v: want 0…63", leaves)
			}
		}
	})
	t.Run("more openings than leaves", func(t *testing.T) {
		ch := challenge.Challenge{Size: challenge.Size{N: 64, K: 64, M: 64}, Openings: 65}
		if _, err := ch.Select([32]byte{}, [32]byte{}); !errors.Is(err, challenge.ErrSize) {
			t.Fatalf("Select = %v, want ErrSize", err)
		}
	})
}

func TestTree(t *testing.T) {
	for n := 1; n <= 33; n++ {
		leaves := make([][32]byte, n)
		for l := range leaves {
			leaves[l] = sha256.Sum256([]byte{byte(l)})
		}
		tree, err := challenge.NewTree(leaves)
		if err != nil {
			t.Fatal(err)
		}
		for l := range uint64(n) {
			proof, err := tree.Proof(l)
			if err != nil {
				t.Fatal(err)
			}
			if err := challenge.VerifyProof(tree.Root(), uint64(n), l, leaves[l], proof); err != nil {
				t.Fatalf("%d leaves, leaf %d: %v", n, l, err)
			}
			if l+1 < uint64(n) {
				if err := challenge.VerifyProof(tree.Root(), uint64(n), l+1, leaves[l], proof); err == nil {
					t.Fatalf("%d leaves: leaf %d's proof accepted for leaf %d", n, l, l+1)
				}
			}
			if err := challenge.VerifyProof(tree.Root(), uint64(n)+1, l, leaves[l], proof); err == nil && n > 1 && n&(n-1) == 0 {
				t.Fatalf("%d leaves: proof accepted for a tree of %d", n, n+1)
			}
			if len(proof) > 0 {
				bad := slices.Clone(proof)
				bad[len(bad)-1][0] ^= 1
				if err := challenge.VerifyProof(tree.Root(), uint64(n), l, leaves[l], bad); !errors.Is(err, challenge.ErrProof) {
					t.Fatalf("%d leaves, leaf %d: tampered proof: %v", n, l, err)
				}
			}
		}
		if _, err := tree.Proof(uint64(n)); err == nil {
			t.Errorf("%d leaves: proof of leaf %d", n, n)
		}
		if err := challenge.VerifyProof(tree.Root(), uint64(n), uint64(n), leaves[0], nil); !errors.Is(err, challenge.ErrProof) {
			t.Errorf("%d leaves: leaf %d accepted: %v", n, n, err)
		}
	}

	// An empty sibling must be the zero hash even though the verifier
	// could hash anything in its place.
	leaves := [][32]byte{{1}, {2}, {3}} // leaf 2's sibling covers no leaf
	tree, _ := challenge.NewTree(leaves)
	proof, _ := tree.Proof(2)
	if proof[0] != ([32]byte{}) {
		t.Fatalf("sibling of the last leaf of 3 is %x, want empty", proof[0])
	}
	proof[0][0] = 1
	if err := challenge.VerifyProof(tree.Root(), 3, 2, leaves[2], proof); !errors.Is(err, challenge.ErrProof) {
		t.Errorf("non-empty padding sibling: %v, want ErrProof", err)
	}
	if _, err := challenge.NewTree(nil); err == nil {
		t.Error("tree of no leaves")
	}
	// A node with an empty right half hashes the zero hash; a lone leaf
	// is its own root.
	if got, want := tree.Root(), challenge.HashNode(challenge.HashNode(leaves[0], leaves[1]), challenge.HashNode(leaves[2], [32]byte{})); got != want {
		t.Errorf("root of 3 = %x, want %x", got, want)
	}
	one, _ := challenge.NewTree(leaves[:1])
	if one.Root() != leaves[0] {
		t.Error("the root of one leaf is not the leaf")
	}
}

// TestGolden pins the matrices, the tree and the selection for a fixed
// seed and size: any change to the protocol's bytes fails here, and the
// same values must come out of every implementation (a GPU prover's
// tests should check them too). The values come from
// testdata/reference.py, an independent implementation of the formats as
// the package documents them (Python, hashlib and the cryptography
// package's AES-CTR).
func TestGolden(t *testing.T) {
	size := challenge.Size{N: 64, K: 128, M: 192}
	ch := challenge.Challenge{Seed: seedOf("gpunet golden"), Size: size, Openings: challenge.DefaultOpenings}
	g, err := challenge.NewGenerator(ch.Seed, size)
	if err != nil {
		t.Fatal(err)
	}
	p := newNaive(t, ch)
	sel, err := ch.Select(p.root(), sha256.Sum256([]byte("golden randomness")))
	if err != nil {
		t.Fatal(err)
	}
	root := p.root()
	got := map[string]any{
		"A[0][0:8]":  g.RowA(0)[:8],
		"B[0:8][63]": g.ColB(63)[:8],
		"C[5][7]":    p.c[5*size.M+7],
		"root":       hex.EncodeToString(root[:]),
		"sel[0:3]":   sel[:3],
	}
	want := map[string]any{
		"A[0][0:8]":  []int8{-118, 46, -8, -112, 71, -12, 89, -37},
		"B[0:8][63]": []int8{58, 56, 115, 15, 7, -75, -59, 127},
		"C[5][7]":    int32(-32756),
		"root":       "3fbe8c753fa5514da302008bc176b55d106e4088eb273df285db7dd6ca9fc233",
		"sel[0:3]":   []challenge.Entry{{Row: 56, Col: 16}, {Row: 50, Col: 132}, {Row: 12, Col: 60}},
	}
	for k, w := range want {
		if g, w := fmtAny(got[k]), fmtAny(w); g != w {
			t.Errorf("%s = %s, want %s", k, g, w)
		}
	}
}

// TestStreamIsAESCTR recomputes a column of B with nothing but AES
// block encryptions of the documented counter blocks, far into the stream.
func TestStreamIsAESCTR(t *testing.T) {
	seed := seedOf("ctr")
	size := challenge.Size{N: 128, K: 192, M: 256}
	g, _ := challenge.NewGenerator(seed, size)
	h := sha256.New()
	h.Write([]byte("gpunet/challenge/v1/B\x00"))
	h.Write(seed[:])
	for _, d := range []int{size.N, size.K, size.M} {
		h.Write(binary.LittleEndian.AppendUint32(nil, uint32(d)))
	}
	block, err := aes.NewCipher(h.Sum(nil))
	if err != nil {
		t.Fatal(err)
	}
	const j = 201
	var want []int8
	for blk := j * size.K / 16; len(want) < size.K; blk++ {
		var in, out [16]byte
		binary.BigEndian.PutUint64(in[8:], uint64(blk))
		block.Encrypt(out[:], in[:])
		for _, b := range out {
			want = append(want, int8(b))
		}
	}
	if got := g.ColB(j); !slices.Equal(got, want) {
		t.Fatalf("column %d of B differs from AES-256-CTR at block %d", j, j*size.K/16)
	}
	all := make([]int8, size.N*size.K)
	g.FillRowsA(all, 0)
	if !slices.Equal(all[77*size.K:78*size.K], g.RowA(77)) {
		t.Error("RowA(77) differs from row 77 of FillRowsA")
	}
	if bytes.Equal([]byte(fmtAny(g.RowA(0))), []byte(fmtAny(g.ColB(0)))) {
		t.Error("A and B share a stream")
	}
}
