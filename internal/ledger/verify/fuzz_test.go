package verify_test

import (
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger/verify"
)

// fuzzReplicas reads up to 9 replicas from data: each byte is one replica,
// silent when it is 0 mod 4, else revealing one of three results.
func fuzzReplicas(data []byte) []verify.Replica {
	rs := make([]verify.Replica, 0, 9)
	for _, b := range data[:min(len(data), 9)] {
		if b%4 != 0 {
			rs = append(rs, verify.Replica{Revealed: true, Result: string(rune('a' + b%3))})
		} else {
			rs = append(rs, verify.Replica{})
		}
	}
	return rs
}

// count is a brute-force count: the distinct results revealed and, for the
// result that more than half of the replicas revealed, its key.
func count(rs []verify.Replica) (distinct int, majority string, ok bool) {
	seen := map[string]int{}
	for _, r := range rs {
		if r.Revealed {
			seen[r.Result]++
		}
	}
	for k, c := range seen {
		if 2*c > len(rs) {
			majority, ok = k, true
		}
	}
	return len(seen), majority, ok
}

// checkPartition checks that the lists partition [0, n), each ascending.
func checkPartition(t *testing.T, n int, lists ...[]int) {
	t.Helper()
	seen := make([]int, n)
	for _, l := range lists {
		if !slices.IsSorted(l) {
			t.Errorf("list %v is not in order", l)
		}
		for _, i := range l {
			if i < 0 || i >= n {
				t.Fatalf("index %d out of [0, %d)", i, n)
			}
			seen[i]++
		}
	}
	for i, c := range seen {
		if c != 1 {
			t.Errorf("replica %d is in %d of the lists %v, want 1", i, c, lists)
		}
	}
}

func FuzzTally(f *testing.F) {
	f.Add([]byte{1, 1}, true, uint8(5), uint8(1), uint8(8), false)
	f.Add([]byte{1, 2, 1}, true, uint8(5), uint8(1), uint8(8), false)
	f.Add([]byte{1, 2}, true, uint8(5), uint8(1), uint8(8), false)
	f.Add([]byte{1, 2}, true, uint8(2), uint8(1), uint8(8), false)
	f.Add([]byte{1, 0}, true, uint8(5), uint8(1), uint8(8), true)
	f.Add([]byte{0, 0, 0}, true, uint8(5), uint8(1), uint8(8), false)
	f.Add([]byte{1}, false, uint8(5), uint8(1), uint8(8), false)
	f.Add([]byte{1, 2, 3, 5, 6}, true, uint8(5), uint8(8), uint8(8), false)
	f.Fuzz(func(t *testing.T, data []byte, checked bool, maxReplicas, placements, budget uint8, dropped bool) {
		rs := fuzzReplicas(data)
		rules := verify.Rules{
			Checked: checked, MaxReplicas: uint64(maxReplicas), Placements: uint64(placements),
			PlacementBudget: uint64(budget), ReplicaDropped: dropped,
		}
		out := verify.Tally(rs, rules)
		n := len(rs)
		distinct, majority, ok := count(rs)
		if out.N != n || out.Results != distinct {
			t.Errorf("N, Results = %d, %d; want %d, %d", out.N, out.Results, n, distinct)
		}
		// Winners, minority, silent and undecided partition the replicas.
		checkPartition(t, n, out.Winners, out.Minority, out.Unrevealed, out.Undecided)
		for i, r := range rs {
			f := out.Fate(i)
			if (f == verify.Unrevealed) == r.Revealed {
				t.Errorf("replica %d revealed %t but has fate %d", i, r.Revealed, f)
			}
		}
		// At most one winner group: every winner revealed the majority's
		// result, and no one else did.
		for _, i := range out.Winners {
			if !rs[i].Revealed || rs[i].Result != majority {
				t.Errorf("winner %d revealed %+v, the majority %q", i, rs[i], majority)
			}
		}
		for _, i := range out.Minority {
			if !rs[i].Revealed || rs[i].Result == majority {
				t.Errorf("minority %d revealed %+v, the majority %q", i, rs[i], majority)
			}
		}
		// A strict majority exists iff the verdict accepts a result, and
		// it is validated iff checked with two or more replicas.
		accepted := out.Verdict == verify.Validated || out.Verdict == verify.Unverified || out.Verdict == verify.Unchecked
		if ok != accepted || ok != (len(out.Winners) > 0) {
			t.Errorf("strict majority %t, but verdict %v with %d winners", ok, out.Verdict, len(out.Winners))
		}
		if (out.Verdict == verify.Validated) != (ok && checked && n >= 2) {
			t.Errorf("verdict %v: majority %t, checked %t, %d replicas", out.Verdict, ok, checked, n)
		}
		if ok && (2*len(out.Winners) <= n || len(out.Undecided) > 0) {
			t.Errorf("majority of %d of %d with %d undecided", len(out.Winners), n, len(out.Undecided))
		}
		if !ok && len(out.Minority) > 0 {
			t.Errorf("no majority, yet %v outvoted", out.Minority)
		}
		switch {
		case ok && out.Delivered != out.Winners[0]:
			t.Errorf("delivered %d, want the first winner %d", out.Delivered, out.Winners[0])
		case !ok && out.Delivered != -1:
			t.Errorf("delivered %d without a majority", out.Delivered)
		}
		// Escalation never exceeds max replicas, and happens only when
		// it may.
		may := !ok && checked && !dropped && uint64(n) < rules.MaxReplicas && rules.Placements < rules.PlacementBudget && distinct > 0
		if (out.Verdict == verify.Escalate) != may {
			t.Errorf("verdict %v, but escalation allowed %t", out.Verdict, may)
		}
		if out.Verdict == verify.Escalate {
			if out.Replicas != n+1 || uint64(out.Replicas) > rules.MaxReplicas {
				t.Errorf("escalates %d replicas to %d, max %d", n, out.Replicas, rules.MaxReplicas)
			}
		} else if out.Replicas != 0 {
			t.Errorf("verdict %v asks for %d replicas", out.Verdict, out.Replicas)
		}
		if !ok && !may && out.Verdict != verify.NoMajority {
			t.Errorf("no majority and no escalation, verdict %v", out.Verdict)
		}
	})
}

func FuzzTallyCheckpoint(f *testing.F) {
	f.Add([]byte{1, 2, 1}, uint8(5))
	f.Add([]byte{1, 2}, uint8(2))
	f.Add([]byte{1, 2, 0}, uint8(5))
	f.Add([]byte{2, 3, 2, 1, 1, 1, 1}, uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, maxReplicas uint8) {
		rs := fuzzReplicas(data)
		out := verify.TallyCheckpoint(rs, uint64(maxReplicas))
		n := len(rs)
		distinct, majority, ok := count(rs)
		reported := 0
		for _, r := range rs {
			if r.Revealed {
				reported++
			}
		}
		if out.N != n || out.Results != distinct || out.Reported != reported {
			t.Errorf("N, Results, Reported = %d, %d, %d; want %d, %d, %d", out.N, out.Results, out.Reported, n, distinct, reported)
		}
		if (out.Action == verify.Agree) != (distinct < 2) {
			t.Errorf("%d distinct states, action %v", distinct, out.Action)
		}
		if distinct >= 2 && (out.Action == verify.DropMinority) != ok {
			t.Errorf("strict majority %t, action %v", ok, out.Action)
		}
		// The outvoted are exactly those who reported another state than
		// the majority's, each once; nobody silent is touched.
		var want []int
		if out.Action == verify.DropMinority {
			for i, r := range rs {
				if r.Revealed && r.Result != majority {
					want = append(want, i)
				}
			}
		}
		got := slices.Clone(out.Minority)
		slices.Sort(got)
		if !slices.Equal(got, want) || len(slices.Compact(got)) != len(want) {
			t.Errorf("minority %v, want %v in some order", out.Minority, want)
		}
		// Restart never exceeds max replicas; waiting only while a
		// majority is still possible.
		if out.Action == verify.Restart && (out.Replicas != n+1 || uint64(out.Replicas) > uint64(maxReplicas)) {
			t.Errorf("restarts %d replicas with %d, max %d", n, out.Replicas, maxReplicas)
		}
		if out.Action != verify.Restart && out.Replicas != 0 {
			t.Errorf("action %v asks for %d replicas", out.Action, out.Replicas)
		}
		possible := 2*(out.Votes+n-reported) > n
		if out.Action == verify.Wait && !possible || (out.Action == verify.Restart || out.Action == verify.Fail) && possible {
			t.Errorf("action %v with a majority possible %t", out.Action, possible)
		}
		if out.Action == verify.Fail && uint64(n) < uint64(maxReplicas) {
			t.Errorf("fails with %d replicas of at most %d", n, maxReplicas)
		}
	})
}
