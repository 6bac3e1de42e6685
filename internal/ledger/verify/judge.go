package verify

import (
	"math/bits"
	"strconv"
)

// The judging round of a job whose outputs are judged within a tolerance
// (JobSpec.Compare; docs/ledger.md, "Outputs judged within a tolerance").
// When its replicas' revealed results differ, each replica that revealed (a
// judge) compares every pair of those results' outputs and reveals one bit
// per pair: the same within the tolerance, or not. The judges' bit vectors
// are tallied by exact equality, as results are: the vector more than half
// of the judges revealed is the job's equivalence graph, and a judge that
// revealed another vector is outvoted. From the graph, [Class] finds the
// largest set of replicas pairwise judged the same; the ledger gives its
// members one tally key, and [Tally] runs on those keys unchanged.
//
// A vector is a uint64 with bit [PairBit](i, j) for each pair i < j of the
// job's replicas (indexes into its assignments, judges or not); a bit for a
// pair that is not two judges must be 0.

// MaxJudged is the most replicas a judging round can cover: their
// 11·10/2 = 55 pairs fit one uint64. The ledger judges no more.
const MaxJudged = 11

// PairBit returns the bit of pair (i, j), i < j < MaxJudged, in a vector:
// pairs in the order (0,1), (0,2), (1,2), (0,3), (1,3), (2,3), … so that a
// pair's bit does not depend on how many replicas the job has.
func PairBit(i, j int) uint64 {
	if i > j {
		i, j = j, i
	}
	return 1 << uint(j*(j-1)/2+i)
}

// PairMask returns the vector with a bit for every pair of the judges.
func PairMask(judges []bool) uint64 {
	var m uint64
	for j := range judges {
		for i := range j {
			if judges[i] && judges[j] {
				m |= PairBit(i, j)
			}
		}
	}
	return m
}

// A Judgment is what the judging round knows of one replica.
type Judgment struct {
	// Judge: the replica revealed a result, so it judges and is judged.
	Judge bool
	// Revealed: it revealed its vector in time. Ignored unless Judge.
	Revealed bool
	// Vector is its verdict bits. Ignored unless Revealed.
	Vector uint64
}

// Judging is a judging round's decision. Agree, Outvoted and Silent
// partition the judges, each in order.
type Judging struct {
	// Decided: more than half of the judges revealed one vector, Graph.
	Decided bool
	Graph   uint64
	// Agree revealed Graph; Outvoted revealed another vector (empty when
	// not Decided: nobody is outvoted without a majority); Silent did not
	// reveal. Silent and Outvoted judges are settled like a withheld and an
	// outvoted result.
	Agree, Outvoted, Silent []int
	// Undecided revealed a vector while no vector had a majority.
	Undecided []int
	// Class is the largest set of judges pairwise the same in Graph, in
	// order; nil when not Decided or when two sets are largest.
	Class []int
}

// TallyJudgments decides a judging round over a job's replicas js (in the
// job's order, at most MaxJudged). It is a pure function of js.
func TallyJudgments(js []Judgment) Judging {
	var out Judging
	if len(js) > MaxJudged {
		return out
	}
	rs := make([]Replica, len(js))
	judges := make([]bool, len(js))
	n := 0
	for i, j := range js {
		if !j.Judge {
			continue
		}
		judges[i] = true
		n++
		if j.Revealed {
			rs[i] = Replica{Revealed: true, Result: strconv.FormatUint(j.Vector, 16)}
		}
	}
	gs := Groups(rs)
	win := Majority(gs, n)
	if win >= 0 {
		out.Decided = true
		out.Graph, _ = strconv.ParseUint(gs[win].Result, 16, 64)
	}
	for i, j := range js {
		switch {
		case !j.Judge:
		case !j.Revealed:
			out.Silent = append(out.Silent, i)
		case !out.Decided:
			out.Undecided = append(out.Undecided, i)
		case j.Vector == out.Graph:
			out.Agree = append(out.Agree, i)
		default:
			out.Outvoted = append(out.Outvoted, i)
		}
	}
	if out.Decided {
		out.Class = Class(out.Graph&PairMask(judges), judges)
	}
	return out
}

// Class returns the largest set of judges every pair of which has its bit
// set in graph, in order, or nil when there are no judges or two sets are
// largest. It tries every subset of the judges in increasing order (at
// most 2^MaxJudged), so it is bounded and the same on every validator.
func Class(graph uint64, judges []bool) []int {
	if len(judges) > MaxJudged {
		return nil
	}
	var all uint
	for i, j := range judges {
		if j {
			all |= 1 << uint(i)
		}
	}
	best, size, tie := uint(0), 0, false
	for s := all; s > 0; s = (s - 1) & all { // every non-empty subset of all
		k := bits.OnesCount(s)
		if k < size || !clique(graph, s) {
			continue
		}
		if k == size {
			tie = true
			continue
		}
		best, size, tie = s, k, false
	}
	if size == 0 || tie {
		return nil
	}
	var members []int
	for i := range judges {
		if best&(1<<uint(i)) != 0 {
			members = append(members, i)
		}
	}
	return members
}

// clique reports whether every pair in the set s has its bit in graph.
func clique(graph uint64, s uint) bool {
	for j := 0; j < MaxJudged; j++ {
		if s&(1<<uint(j)) == 0 {
			continue
		}
		for i := range j {
			if s&(1<<uint(i)) != 0 && graph&PairBit(i, j) == 0 {
				return false
			}
		}
	}
	return true
}
