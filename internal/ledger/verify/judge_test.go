package verify_test

import (
	"math/bits"
	"reflect"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger/verify"
)

// graph is the vector with the bits of the given pairs set.
func graph(pairs ...[2]int) uint64 {
	var g uint64
	for _, p := range pairs {
		g |= verify.PairBit(p[0], p[1])
	}
	return g
}

// judges: every replica revealed a result and judged, voting vs[i].
func judges(vs ...uint64) []verify.Judgment {
	js := make([]verify.Judgment, len(vs))
	for i, v := range vs {
		js[i] = verify.Judgment{Judge: true, Revealed: true, Vector: v}
	}
	return js
}

// TestPairBitOrder: pairs take distinct bits, the first n(n-1)/2 of them
// for n replicas, so a vector over 5 replicas uses 10 bits and 11 replicas
// fit a uint64.
func TestPairBitOrder(t *testing.T) {
	var seen uint64
	for j := 1; j < verify.MaxJudged; j++ {
		for i := range j {
			b := verify.PairBit(i, j)
			if seen&b != 0 || bits.OnesCount64(b) != 1 || verify.PairBit(j, i) != b {
				t.Fatalf("PairBit(%d, %d) = %#x collides or is not one bit", i, j, b)
			}
			seen |= b
		}
		if want := uint64(1)<<uint((j+1)*j/2) - 1; seen != want {
			t.Fatalf("pairs of %d replicas use %#x, want %#x", j+1, seen, want)
		}
	}
}

// TestTallyJudgments: the judging round's property. Honest replicas whose
// outputs differ within the tolerance form one class, nobody outvoted; a
// cheater outside the tolerance is left out of the class whatever it
// claims; a judge that lies about honest replicas is outvoted.
func TestTallyJudgments(t *testing.T) {
	all3 := graph([2]int{0, 1}, [2]int{0, 2}, [2]int{1, 2})
	honest01 := graph([2]int{0, 1}) // 2 is outside the tolerance
	for _, tc := range []struct {
		name                           string
		js                             []verify.Judgment
		decided                        bool
		agree, outvoted, silent, class []int
	}{
		{"honest replicas within tolerance", judges(all3, all3, all3), true, idx(0, 1, 2), nil, nil, idx(0, 1, 2)},
		{"cheater claims it is the same", judges(honest01, honest01, all3), true, idx(0, 1), idx(2), nil, idx(0, 1)},
		{"cheater judges honestly", judges(honest01, honest01, honest01), true, idx(0, 1, 2), nil, nil, idx(0, 1)},
		{"honest output, lying judge", judges(all3, all3, honest01), true, idx(0, 1), idx(2), nil, idx(0, 1, 2)},
		{"silent judge", []verify.Judgment{{Judge: true, Revealed: true, Vector: all3}, {Judge: true, Revealed: true, Vector: all3}, {Judge: true}}, true, idx(0, 1), nil, idx(2), idx(0, 1, 2)},
		{"two replicas differ", judges(0, 0), true, idx(0, 1), nil, nil, nil},
		{"no majority of vectors", judges(all3, honest01, graph([2]int{1, 2})), false, nil, nil, nil, nil},
		{"two largest classes", judges(graph([2]int{0, 1}, [2]int{2, 3}), graph([2]int{0, 1}, [2]int{2, 3}), graph([2]int{0, 1}, [2]int{2, 3}), graph([2]int{0, 1}, [2]int{2, 3})), true, idx(0, 1, 2, 3), nil, nil, nil},
		{"a replica that revealed no result does not judge", []verify.Judgment{{Judge: true, Revealed: true, Vector: graph([2]int{0, 2})}, {}, {Judge: true, Revealed: true, Vector: graph([2]int{0, 2})}}, true, idx(0, 2), nil, nil, idx(0, 2)},
		{"bits for a non-judge are ignored in the class", []verify.Judgment{{Judge: true, Revealed: true, Vector: all3}, {}, {Judge: true, Revealed: true, Vector: all3}}, true, idx(0, 2), nil, nil, idx(0, 2)},
	} {
		got := verify.TallyJudgments(tc.js)
		if got.Decided != tc.decided || !reflect.DeepEqual(got.Agree, tc.agree) || !reflect.DeepEqual(got.Outvoted, tc.outvoted) ||
			!reflect.DeepEqual(got.Silent, tc.silent) || !reflect.DeepEqual(got.Class, tc.class) {
			t.Errorf("%s: got %+v, want decided %t, agree %v, outvoted %v, silent %v, class %v", tc.name, got, tc.decided, tc.agree, tc.outvoted, tc.silent, tc.class)
		}
	}
}

// FuzzClass checks Class against its definition on random graphs over up
// to MaxJudged judges: the class is pairwise joined, no larger set is, and
// it is nil exactly when two sets of the largest size are.
func FuzzClass(f *testing.F) {
	f.Add(uint64(0b111), uint16(0b111))
	f.Add(uint64(0b100001), uint16(0b1111))
	f.Add(^uint64(0), uint16(0x7ff))
	f.Fuzz(func(t *testing.T, g uint64, mask uint16) {
		judges := make([]bool, verify.MaxJudged)
		for i := range judges {
			judges[i] = mask&(1<<uint(i)) != 0
		}
		joined := func(s []int) bool {
			for a := range s {
				for b := range a {
					if g&verify.PairBit(s[b], s[a]) == 0 {
						return false
					}
				}
			}
			return true
		}
		// Brute force: the sizes of all cliques of judges.
		largest, count := 0, 0
		for s := 1; s < 1<<verify.MaxJudged; s++ {
			var set []int
			ok := true
			for i := range judges {
				if s&(1<<uint(i)) != 0 {
					ok = ok && judges[i]
					set = append(set, i)
				}
			}
			if !ok || !joined(set) {
				continue
			}
			switch {
			case len(set) > largest:
				largest, count = len(set), 1
			case len(set) == largest:
				count++
			}
		}
		c := verify.Class(g, judges)
		if want := largest > 0 && count == 1; (c != nil) != want {
			t.Fatalf("Class(%#x, %#x) = %v, want a class: %t (largest %d, %d of them)", g, mask, c, want, largest, count)
		}
		if c != nil && (len(c) != largest || !joined(c)) {
			t.Fatalf("Class(%#x, %#x) = %v, not a largest joined set (largest %d)", g, mask, c, largest)
		}
		for _, i := range c {
			if !judges[i] {
				t.Fatalf("Class(%#x, %#x) = %v has a replica that is not a judge", g, mask, c)
			}
		}
	})
}
