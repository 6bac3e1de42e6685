package sched

import "slices"

// Gangs: a job of several members (the ledger's resources.nodes) takes
// Need distinct providers at once, all in one block or none, and all in
// one site: providers that declare the same region. Members of a gang
// exchange gradients over their private network, so a gang spread over
// regions would run at the speed of its slowest link; one operator's
// machines in one site are exactly what a gang wants, and nothing here
// spreads them apart.
//
// The scan of a gang's request goes on past PerClass until Need fitting
// offers of one site are found (or ScanLimit), and pick takes the first
// site, in rank order, to reach Need: the site of the best Need-th
// candidate. Its picks are that site's best Need candidates, rank 0 first.

// siteCount is how many candidates one site has.
type siteCount struct {
	site string
	n    int
}

// countSite adds one candidate of site to counts and returns the site's
// count. A gang's candidates come from few sites, so a slice does.
func countSite(counts []siteCount, site string) ([]siteCount, int) {
	for i := range counts {
		if counts[i].site == site {
			counts[i].n++
			return counts, counts[i].n
		}
	}
	return append(counts, siteCount{site, 1}), 1
}

// siteTally counts a gang's scan's fitting offers per site; nil for a
// request that is not a gang.
type siteTally struct {
	want    int
	counts  []siteCount
	largest int
}

func newSiteTally(r *Request) *siteTally {
	if !r.Gang || r.Need < 2 {
		return nil
	}
	return &siteTally{want: r.Need}
}

// add counts one candidate of site and returns the site's name, one
// string per site rather than one per candidate.
func (t *siteTally) add(site []byte) string {
	for i := range t.counts {
		if c := &t.counts[i]; c.site == string(site) {
			c.n++
			t.largest = max(t.largest, c.n)
			return c.site
		}
	}
	t.counts = append(t.counts, siteCount{string(site), 1})
	t.largest = max(t.largest, 1)
	return t.counts[len(t.counts)-1].site
}

// short reports whether no site has t.want offers yet; false for no
// tally.
func (t *siteTally) short() bool { return t != nil && t.largest < t.want }

// pickGangs chooses need/members whole gangs of members each (one gang
// of need when members is 0 or need): the first as pickGang does, each
// next one the same way among the candidates the earlier ones left, so
// that no provider is in two gangs. It picks all of them or none; m
// records the first gang's counts, Gangs how many whole gangs the
// candidates make.
func pickGangs(cands []Pick, need, members int, m *Miss) (picks []Pick, gangs int) {
	if members <= 0 || members >= need || need%members != 0 {
		return pickGang(cands, need, m)
	}
	picks = make([]Pick, 0, need)
	left := cands
	for k := 0; k < need/members; k++ {
		var g []Pick
		var mk Miss
		g, n := pickGang(left, members, &mk)
		if k == 0 {
			m.Sites, m.Together, gangs = mk.Sites, mk.Together, n
		}
		if g == nil {
			if k > 0 {
				// Enough for one gang, not for all: a site short.
				m.Together = min(m.Together, need-1)
			}
			return nil, gangs
		}
		picks = append(picks, g...)
		left = slices.DeleteFunc(slices.Clone(left), func(c Pick) bool {
			return slices.ContainsFunc(g, func(x Pick) bool { return x.Provider == c.Provider })
		})
	}
	return picks, gangs
}

// pickGang chooses, of cands (best first, filtered), the gang: the first
// site to have need candidates, and its best need. It records in m how many
// sites the candidates are in and the most in one, and returns the picks
// (nil when no site has need) and how many whole gangs the candidates
// could make, site by site.
func pickGang(cands []Pick, need int, m *Miss) (picks []Pick, gangs int) {
	var counts []siteCount
	chosen, ok := "", false
	for _, c := range cands {
		var n int
		counts, n = countSite(counts, c.Site)
		if n >= need && !ok {
			chosen, ok = c.Site, true
		}
	}
	m.Sites = len(counts)
	for _, c := range counts {
		m.Together = max(m.Together, c.n)
		gangs += c.n / need
	}
	if !ok {
		return nil, gangs
	}
	picks = make([]Pick, 0, need)
	for _, c := range cands {
		if c.Site == chosen && len(picks) < need {
			picks = append(picks, c)
		}
	}
	return picks, gangs
}
