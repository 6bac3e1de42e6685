package sched

import (
	"slices"
	"testing"
)

// TestTentativePositions: a slot that nothing granted holds takes up to
// TentativePerSlot placements not granted yet; a provider whose free
// slots carry that many, or whose every slot is granted, is busy.
func TestTentativePositions(t *testing.T) {
	k := uint64(TentativePerSlot)
	for _, tc := range []struct {
		name                     string
		jobs, maxJobs, tentative uint64
		positions                uint64
		fits                     bool
	}{
		{"idle", 0, 4, 0, 4 * k, true},
		{"every slot granted", 4, 4, 0, 0, false},
		{"one free slot, one position left", 3, 4, k - 1, k, true},
		{"one free slot, every position held", 3, 4, k, k, false},
		{"every slot held, none granted", 0, 4, 4, 4 * k, true},
		{"two free slots, every position held", 2, 4, 2 * k, 2 * k, false},
		{"more granted than slots (max_jobs lowered)", 5, 4, 0, 0, false},
		{"no slots", 0, 0, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Positions(tc.jobs, tc.maxJobs); got != tc.positions {
				t.Errorf("Positions(%d, %d) = %d, want %d", tc.jobs, tc.maxJobs, got, tc.positions)
			}
			o := offer(1, 100)
			o.Jobs, o.MaxJobs, o.Tentative = tc.jobs, tc.maxJobs, tc.tentative
			plan := place(t, newState(o), req())
			if got := len(plan.Picks) == 1; got != tc.fits {
				t.Errorf("placed %v, want %v (miss %+v)", got, tc.fits, plan.Miss)
			}
			if busy := plan.Miss.Busy == 1; busy == tc.fits {
				t.Errorf("busy %d, want %v", plan.Miss.Busy, !tc.fits)
			}
		})
	}
}

// TestTentativeLoad: ungranted placements count in the load term as the
// positions they take, so that placements spread over providers rather
// than piling onto the best one; with none, the term is the free slots'
// share as before.
func TestTentativeLoad(t *testing.T) {
	r := req()
	for _, tc := range []struct {
		name string
		o    Offer
		want uint64
	}{
		{"idle", Offer{MaxJobs: 4}, 2 * 1_000},
		{"one of four granted", Offer{MaxJobs: 4, Jobs: 1}, 2 * 750},
		{"one of four granted, four placements waiting", Offer{MaxJobs: 4, Jobs: 1, Tentative: 4}, 2 * (4*3 - 4) * 1_000 / 16},
		{"every position held", Offer{MaxJobs: 4, Jobs: 1, Tentative: 12}, 0},
	} {
		if got := Score(&tc.o, r.MaxPricePerHour, &r); got != tc.want {
			t.Errorf("%s: Score = %d, want %d", tc.name, got, tc.want)
		}
	}
	// At equal price and reputation, the provider with fewer ungranted
	// placements ranks first.
	a, b := offer(1, 100), offer(2, 100)
	a.Tentative = 3
	plan := place(t, newState(a, b), req())
	if got := providers(plan.Ranked); !slices.Equal(got, []byte{2, 1}) {
		t.Errorf("ranked %v, want [2 1]", got)
	}
}
