package sched

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// site is offer n at ask in region r.
func site(n byte, ask uint64, r string) Offer {
	o := offer(n, ask)
	o.Region = []byte(r)
	return o
}

// gangReq is req as a gang of need members.
func gangReq(need int) Request {
	r := req()
	r.Gang, r.Need, r.Planned = true, need, need
	return r
}

// TestGangPickedInOneSite: a gang takes the first site (in rank order) to
// reach its members, that site's best, rank 0 first; a gang no site can
// hold takes none, and says how many fit, in how many sites, the most in
// one.
func TestGangPickedInOneSite(t *testing.T) {
	st := newState(site(1, 100, "us"), site(2, 200, "eu"), site(3, 300, "us"), site(4, 400, "eu"), site(5, 500, "eu"), site(6, 600, "ap"))
	plan := place(t, st, gangReq(3))
	if got := providers(plan.Picks); !slices.Equal(got, []byte{2, 4, 5}) || plan.Miss.Code != "" || plan.Gangs != 1 {
		t.Errorf("gang of 3: picks %v code %q gangs %d, want eu's 2 4 5, one gang", got, plan.Miss.Code, plan.Gangs)
	}
	plan = place(t, st, gangReq(2))
	if got := providers(plan.Picks); !slices.Equal(got, []byte{1, 3}) || plan.Gangs != 2 {
		t.Errorf("gang of 2: picks %v gangs %d, want us's 1 3 (the first site with 2), 2 gangs", got, plan.Gangs)
	}
	// A job that is not a gang takes the best, wherever they are.
	r := req()
	r.Need, r.Planned = 3, 3
	if got := providers(place(t, st, r).Picks); !slices.Equal(got, []byte{1, 2, 3}) {
		t.Errorf("3 replicas: %v", got)
	}
	plan = place(t, st, gangReq(4))
	m := plan.Miss
	if len(plan.Picks) != 0 || m.Code != Apart || m.Fit != 6 || m.Sites != 3 || m.Together != 3 || m.Need != 4 {
		t.Errorf("gang of 4: picks %v miss %+v, want none, apart: 6 fit in 3 sites, 3 in one", providers(plan.Picks), m)
	}
	plan = place(t, st, gangReq(7))
	if plan.Miss.Code != TooFew || len(plan.Picks) != 0 {
		t.Errorf("gang of 7 with 6 fitting: %q %v", plan.Miss.Code, providers(plan.Picks))
	}
	// A gang never takes a provider it has or excludes.
	r = gangReq(2)
	r.Excluded = []address.Address{addr(3)}
	if got := providers(place(t, st, r).Picks); !slices.Equal(got, []byte{2, 4}) {
		t.Errorf("gang of 2 excluding 3: %v, want eu's 2 4", got)
	}
}

// TestGangScanGoesOnToASite: the scan of a gang looks past PerClass until
// one site has its members; a single job's stops at PerClass.
func TestGangScanGoesOnToASite(t *testing.T) {
	var offers []Offer
	for i := range 40 {
		r := fmt.Sprintf("r%d", i%10)
		if i >= 30 {
			r = "r0" // the dearest ten all in r0: r0 reaches 8 at the 34th
		}
		offers = append(offers, site(byte(i+1), uint64(10+i), r))
	}
	st := newState(offers...)
	plan := place(t, st, gangReq(8))
	if len(plan.Picks) != 8 || string(plan.Picks[0].Site) != "r0" || st.scanned[CPUClass] != 35 {
		t.Errorf("gang of 8: %d picks in %q after %d scanned, want 8 in r0 after 35", len(plan.Picks), plan.Picks[0].Site, st.scanned[CPUClass])
	}
	st.scanned[CPUClass] = 0
	r := req()
	place(t, st, r)
	if st.scanned[CPUClass] != PlacePerClass {
		t.Errorf("a single job scanned %d, want %d", st.scanned[CPUClass], PlacePerClass)
	}
}

// TestNVLinkIsAConstraint: a request for NVLink turns away offers without
// it, counted in Miss.NVLink.
func TestNVLinkIsAConstraint(t *testing.T) {
	a, b, c := gpuOffer(1, 100, 8, 80, 9000), gpuOffer(2, 200, 8, 80, 9000), gpuOffer(3, 300, 8, 80, 9000)
	b.NVLink = true
	st := newState().add("H100", a, b, c)
	r := gpuReq(8)
	r.NVLink = true
	plan := place(t, st, r)
	if got := providers(plan.Picks); !slices.Equal(got, []byte{2}) || plan.Miss.NVLink != 2 {
		t.Errorf("NVLink: picks %v, %d without NVLink; want 2 and 2", got, plan.Miss.NVLink)
	}
	r.NVLink = false
	if got := providers(place(t, st, r).Picks); !slices.Equal(got, []byte{1}) {
		t.Errorf("any interconnect: %v", got)
	}
}

// TestReplicaGangsPicked: a request for 2 gangs of 2 (Members 2, Need 4)
// takes two whole gangs, gang by gang, each in one site, no provider in
// both: the first the first site to reach 2, the next the same among what
// is left (the same site when it has 4). All or none: with one site short
// it takes none and waits apart, with fewer than 4 fitting too few.
func TestReplicaGangsPicked(t *testing.T) {
	gangs := func(members, need int) Request {
		r := gangReq(need)
		r.Members = members
		return r
	}
	st := newState(site(1, 100, "us"), site(2, 200, "eu"), site(3, 300, "us"), site(4, 400, "eu"), site(5, 500, "ap"))
	plan := place(t, st, gangs(2, 4))
	if got := providers(plan.Picks); !slices.Equal(got, []byte{1, 3, 2, 4}) || plan.Miss.Code != "" {
		t.Errorf("2 gangs of 2: picks %v code %q, want us's 1 3 then eu's 2 4", got, plan.Miss.Code)
	}
	st = newState(site(1, 100, "eu"), site(2, 200, "eu"), site(3, 300, "eu"), site(4, 400, "eu"), site(5, 500, "us"))
	if got := providers(place(t, st, gangs(2, 4)).Picks); !slices.Equal(got, []byte{1, 2, 3, 4}) {
		t.Errorf("2 gangs of 2 in one site of 4: %v, want 1 2 then 3 4", got)
	}
	st = newState(site(1, 100, "us"), site(2, 200, "eu"), site(3, 300, "us"), site(4, 400, "ap"), site(5, 500, "sa"))
	plan = place(t, st, gangs(2, 4))
	if len(plan.Picks) != 0 || plan.Miss.Code != Apart || plan.Miss.Fit != 5 {
		t.Errorf("one site of 2, the rest alone: picks %v miss %+v, want none, apart", providers(plan.Picks), plan.Miss)
	}
	st = newState(site(1, 100, "us"), site(2, 200, "us"), site(3, 300, "us"))
	plan = place(t, st, gangs(2, 4))
	if len(plan.Picks) != 0 || plan.Miss.Code != TooFew {
		t.Errorf("3 fitting for 2 gangs of 2: picks %v code %q, want none, too few", providers(plan.Picks), plan.Miss.Code)
	}
	// Members equal to Need is one gang, as before.
	st = newState(site(1, 100, "us"), site(2, 200, "us"))
	if got := providers(place(t, st, gangs(2, 2)).Picks); !slices.Equal(got, []byte{1, 2}) {
		t.Errorf("1 gang of 2: %v", got)
	}
}
