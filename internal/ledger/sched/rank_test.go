package sched

import (
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// with returns o changed by f.
func with(o Offer, f func(*Offer)) Offer { f(&o); return o }

// TestRanking: which provider a job gets first, when the offers that fit
// differ in price, reputation, load, speed, region, class and engine.
func TestRanking(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state *memState
		req   func(*Request)
		want  []byte // providers, best first
	}{
		{
			name:  "cheaper first",
			state: newState(offer(1, 600), offer(2, 300)),
			want:  []byte{2, 1},
		},
		{
			name: "reputation outweighs a slightly lower price",
			// 4×600 + 3×200 = 3000 against 4×500 + 3×900 = 4700.
			state: newState(with(offer(1, 400), func(o *Offer) { o.Reputation = 200_000 }), with(offer(2, 500), func(o *Offer) { o.Reputation = 900_000 })),
			want:  []byte{2, 1},
		},
		{
			name: "a much lower price outweighs reputation",
			// 4×900 + 0 = 3600 against 4×100 + 3×1000 = 3400.
			state: newState(with(offer(1, 100), func(o *Offer) { o.Reputation = 0 }), with(offer(2, 900), func(o *Offer) { o.Reputation = 1_000_000 })),
			want:  []byte{1, 2},
		},
		{
			name:  "less loaded first",
			state: newState(with(offer(1, 500), func(o *Offer) { o.Jobs = 3 }), offer(2, 500)),
			want:  []byte{2, 1},
		},
		{
			name:  "load outweighs a little price",
			state: newState(with(offer(1, 400), func(o *Offer) { o.Jobs = 3 }), offer(2, 500)),
			want:  []byte{2, 1},
		},
		{
			name:  "faster first",
			state: newState(offer(1, 500), with(offer(2, 500), func(o *Offer) { o.Int8GOPS = 50_000 })),
			want:  []byte{2, 1},
		},
		{
			name: "speed is capped: past 100 000 GOPS the address decides",
			state: newState(with(offer(2, 500), func(o *Offer) { o.Int8GOPS = 1 << 40 }),
				with(offer(1, 500), func(o *Offer) { o.Int8GOPS = 100_000 })),
			want: []byte{1, 2},
		},
		{
			name:  "the preferred region first",
			state: newState(with(offer(1, 500), func(o *Offer) { o.Region = []byte("us") }), offer(2, 500)),
			req:   func(r *Request) { r.Region = "eu" },
			want:  []byte{2, 1},
		},
		{
			name:  "no preferred region: region does not rank",
			state: newState(with(offer(2, 500), func(o *Offer) { o.Region = []byte("us") }), offer(1, 500)),
			want:  []byte{1, 2},
		},
		{
			name:  "ties go to the lower address",
			state: newState(offer(3, 500), offer(1, 500), offer(2, 500)),
			want:  []byte{1, 2, 3},
		},
		{
			name: "the market price floors every price: reputation decides",
			state: func() *memState {
				st := newState(with(offer(1, 100), func(o *Offer) { o.Reputation = 0 }), with(offer(2, 700), func(o *Offer) { o.Reputation = 600_000 }))
				st.market[CPUClass] = 800
				return st
			}(),
			want: []byte{2, 1},
		},
		{
			name: "per-class limit: only the PerClass cheapest that fit are scored",
			state: newState(offer(1, 100), offer(2, 200), offer(3, 300),
				with(offer(4, 400), func(o *Offer) { o.Reputation = 1_000_000; o.Int8GOPS = 1 << 30 })),
			req:  func(r *Request) { r.PerClass = 2 },
			want: []byte{1, 2},
		},
		{
			name: "per-class limit counts offers that fit, not offers seen",
			state: newState(with(offer(1, 100), func(o *Offer) { o.Executors = wasm }), offer(2, 200), offer(3, 300),
				with(offer(4, 400), func(o *Offer) { o.Reputation = 1_000_000 })),
			req:  func(r *Request) { r.PerClass = 2 },
			want: []byte{2, 3},
		},
		{
			name: "several classes: a provider once, at its best",
			state: newState().
				add("T4", gpuOffer(1, 600, 1, 16, 7_500), gpuOffer(2, 400, 1, 16, 7_500)).
				add("L4", gpuOffer(1, 200, 1, 24, 8_900), gpuOffer(3, 900, 1, 24, 8_900)),
			req:  func(r *Request) { *r = gpuReq(1) },
			want: []byte{1, 2, 3},
		},
		{
			name: "the job's classes only",
			state: newState().
				add("T4", gpuOffer(1, 600, 1, 16, 7_500), gpuOffer(2, 400, 1, 16, 7_500)).
				add("L4", gpuOffer(1, 200, 1, 24, 8_900), gpuOffer(3, 100, 1, 24, 8_900)),
			req:  func(r *Request) { *r = gpuReq(1); r.Classes = []string{"T4"} },
			want: []byte{2, 1},
		},
		{
			name:  "providers the job has are not ranked",
			state: newState(offer(1, 100), offer(2, 200), offer(3, 300)),
			req:   func(r *Request) { r.Have = []address.Address{addr(1)} },
			want:  []byte{2, 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req()
			r.Need = 0 // rank only
			if tc.req != nil {
				tc.req(&r)
				r.Need = 0
			}
			plan := place(t, tc.state, r)
			if got := providers(plan.Ranked); !slices.Equal(got, tc.want) {
				t.Errorf("ranked %v, want %v (%+v)", got, tc.want, plan.Ranked)
			}
			for i := 1; i < len(plan.Ranked); i++ {
				if plan.Ranked[i-1].Score < plan.Ranked[i].Score {
					t.Errorf("score %d ranked before %d", plan.Ranked[i-1].Score, plan.Ranked[i].Score)
				}
			}
		})
	}
}

// TestPickClassAndPrice: a pick carries the class it was found in, its
// price (max(ask, market price) × units) and its ask × units.
func TestPickClassAndPrice(t *testing.T) {
	st := newState().
		add("T4", gpuOffer(1, 300, 2, 16, 7_500)).
		add("L4", gpuOffer(1, 200, 2, 24, 8_900), gpuOffer(2, 100, 2, 24, 8_900))
	st.market["L4"] = 150
	plan := place(t, st, gpuReq(2))
	// Provider 1 is cheaper in L4 (ask 200, market 150) than in T4 (300);
	// provider 2's ask is below L4's market price: it pays that.
	want := []Pick{
		{Provider: addr(2), Class: "L4", Price: 300, Ask: 200},
		{Provider: addr(1), Class: "L4", Price: 400, Ask: 400},
	}
	if len(plan.Ranked) != 2 {
		t.Fatalf("ranked %+v", plan.Ranked)
	}
	for i, p := range plan.Ranked {
		p.Score = 0
		if p != want[i] {
			t.Errorf("pick %d = %+v, want %+v", i, p, want[i])
		}
	}
	if got := providers(plan.Picks); !slices.Equal(got, []byte{2}) {
		t.Errorf("picks %v, want [2]", got)
	}
}

// TestScore pins the weights: price ×4, reputation ×3, free slots ×2,
// speed ×1, the preferred region ×2, each term in [0, 1000].
func TestScore(t *testing.T) {
	r := req()
	r.Region = "eu"
	for _, tc := range []struct {
		name  string
		o     Offer
		price uint64
		want  uint64
	}{
		{"at the ceiling, nothing else", Offer{MaxJobs: 1, Jobs: 1, Region: []byte("us")}, 1_000, 0},
		{"everything best", Offer{MaxJobs: 4, Reputation: 1_000_000, Int8GOPS: 100_000, Region: []byte("eu")}, 0, 4_000 + 3_000 + 2_000 + 1_000 + 2_000},
		{"half price", Offer{MaxJobs: 1, Jobs: 1}, 500, 4 * 500},
		{"above the ceiling counts as at it", Offer{MaxJobs: 1, Jobs: 1}, 5_000, 0},
		{"reputation in thousandths", Offer{MaxJobs: 1, Jobs: 1, Reputation: 123_456}, 1_000, 3 * 123},
		{"one of four slots taken", Offer{MaxJobs: 4, Jobs: 1}, 1_000, 2 * 750},
		{"more jobs than slots", Offer{MaxJobs: 2, Jobs: 5}, 1_000, 0},
		{"no slots at all", Offer{}, 1_000, 0},
		{"speed in hundreds of GOPS", Offer{MaxJobs: 1, Jobs: 1, Int8GOPS: 12_345}, 1_000, 123},
		{"the region", Offer{MaxJobs: 1, Jobs: 1, Region: []byte("eu")}, 1_000, 2_000},
	} {
		if got := Score(&tc.o, tc.price, &r); got != tc.want {
			t.Errorf("%s: Score = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestEngineGrouping: a job whose replicas share a wasm engine gets
// providers of one engine: the engine whose Group-th candidate ranks
// highest, or the pinned one.
func TestEngineGrouping(t *testing.T) {
	const x, y = 0xa, 0xb
	eng := func(o Offer, id uint64) Offer { o.Engine = id; return o }
	for _, tc := range []struct {
		name     string
		state    *memState
		engine   EngineNeed
		need     int
		perClass int // PlacePerClass if 0
		want     []byte
		miss     Miss // Engines, Fitting, OtherEngine, NoEngine and Code only
	}{
		{
			name:   "the engine that has two first",
			state:  newState(eng(offer(1, 100), x), eng(offer(2, 200), y), eng(offer(3, 300), y), eng(offer(4, 400), x)),
			engine: EngineNeed{Shared: true, Group: 2}, need: 2,
			want: []byte{2, 3},
		},
		{
			name:   "the scan goes past PerClass until one engine has the group",
			state:  newState(eng(offer(1, 100), x), eng(offer(2, 200), y), eng(offer(3, 300), y), eng(offer(4, 400), x)),
			engine: EngineNeed{Shared: true, Group: 2}, need: 2, perClass: 1,
			want: []byte{2, 3},
		},
		{
			name:   "no engine has enough: the better-ranked of the largest, and the job waits",
			state:  newState(eng(offer(1, 100), x), eng(offer(2, 200), y)),
			engine: EngineNeed{Shared: true, Group: 2}, need: 2,
			want: []byte{1},
			miss: Miss{Engines: 2, Fitting: 2, Code: NoEngine},
		},
		{
			name:   "an offer without an engine does not fit",
			state:  newState(offer(1, 100), eng(offer(2, 200), x), eng(offer(3, 300), x)),
			engine: EngineNeed{Shared: true, Group: 2}, need: 2,
			want: []byte{2, 3},
			miss: Miss{NoEngine: 1},
		},
		{
			name:   "pinned: only that engine",
			state:  newState(eng(offer(1, 100), x), offer(2, 150), eng(offer(3, 200), y)),
			engine: EngineNeed{Shared: true, Pinned: y}, need: 1,
			want: []byte{3},
			miss: Miss{OtherEngine: 1, NoEngine: 1},
		},
		{
			name:   "pinned, and only others free: it waits for the engine",
			state:  newState(eng(offer(1, 100), x), offer(2, 150)),
			engine: EngineNeed{Shared: true, Pinned: y}, need: 1,
			want: []byte{},
			miss: Miss{OtherEngine: 1, NoEngine: 1, Code: NoEngine},
		},
		{
			name:   "not shared: engines do not matter",
			state:  newState(eng(offer(1, 100), x), offer(2, 150), eng(offer(3, 200), y)),
			engine: EngineNeed{}, need: 3,
			want: []byte{1, 2, 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req()
			r.Executor, r.Engine, r.Need, r.Planned = wasm, tc.engine, tc.need, tc.need
			if tc.perClass > 0 {
				r.PerClass = tc.perClass
			}
			plan := place(t, tc.state, r)
			if got := providers(plan.Ranked); !slices.Equal(got, tc.want) {
				t.Errorf("ranked %v, want %v", got, tc.want)
			}
			m := plan.Miss
			got := Miss{Engines: m.Engines, Fitting: m.Fitting, OtherEngine: m.OtherEngine, NoEngine: m.NoEngine, Code: m.Code}
			if got != tc.miss {
				t.Errorf("miss %+v, want %+v", got, tc.miss)
			}
		})
	}
}

// TestPicks: a job's replicas are placed all or none; a service's
// (Partial) as far as they fit; never on a provider the job has, nor on
// one it excludes, which the miss counts.
func TestPicks(t *testing.T) {
	st := newState(offer(1, 100), offer(2, 200), offer(3, 300))
	for _, tc := range []struct {
		name     string
		need     int
		partial  bool
		have     []address.Address
		excluded []address.Address
		want     []byte
		miss     Miss // Excluded, Fit, Need and Code only
	}{
		{name: "the best need", need: 2, want: []byte{1, 2}, miss: Miss{Fit: 3, Need: 2}},
		{name: "all or none", need: 4, want: []byte{}, miss: Miss{Fit: 3, Need: 4, Code: TooFew}},
		{name: "partial", need: 4, partial: true, want: []byte{1, 2, 3}, miss: Miss{Fit: 3, Need: 4, Code: TooFew}},
		{name: "not one it has", need: 2, have: []address.Address{addr(1)}, want: []byte{2, 3}, miss: Miss{Fit: 2, Need: 2}},
		{name: "not one it excludes", need: 2, excluded: []address.Address{addr(2), addr(9)}, want: []byte{1, 3}, miss: Miss{Excluded: 1, Fit: 2, Need: 2}},
		{name: "excluded, and too few", need: 2, partial: true, have: []address.Address{addr(3)}, excluded: []address.Address{addr(1)}, want: []byte{2}, miss: Miss{Excluded: 1, Fit: 1, Need: 2, Code: TooFew}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req()
			r.Need, r.Partial, r.Have, r.Excluded = tc.need, tc.partial, tc.have, tc.excluded
			plan := place(t, st, r)
			if got := providers(plan.Picks); !slices.Equal(got, tc.want) {
				t.Errorf("picks %v, want %v", got, tc.want)
			}
			m := plan.Miss
			if got := (Miss{Excluded: m.Excluded, Fit: m.Fit, Need: m.Need, Code: m.Code}); got != tc.miss {
				t.Errorf("miss %+v, want %+v", got, tc.miss)
			}
		})
	}
}
