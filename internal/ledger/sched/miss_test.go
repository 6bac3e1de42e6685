package sched

import (
	"slices"
	"testing"
)

// TestMiss: the counts of why offers were passed over, one case per
// filter, and the Code of why the job waits.
func TestMiss(t *testing.T) {
	cpu := func(f func(*Offer)) *memState { return newState(with(offer(1, 100), f)) }
	for _, tc := range []struct {
		name  string
		state *memState
		req   func(*Request)
		want  Miss
		// unscanned: the planner must decide without State passing it an
		// offer (a summary or a market price rules the classes out).
		unscanned bool
	}{
		{
			name:  "executor",
			state: cpu(func(o *Offer) { o.Executors = wasm }),
			want:  Miss{Seen: 1, Executor: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "stake",
			state: cpu(func(o *Offer) { o.Stake = 99 }),
			want:  Miss{Seen: 1, Stake: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "stake per GPU, all the provider's GPUs",
			state: newState().add("T4", with(gpuOffer(1, 100, 1, 16, 7_500), func(o *Offer) { o.GPUs, o.Stake = 3, 299 })),
			req:   func(r *Request) { *r = gpuReq(1) },
			want:  Miss{Seen: 1, Stake: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "CPU cores, rounded up",
			state: cpu(func(*Offer) {}),
			req:   func(r *Request) { r.CPUMilli = 8_001; r.MaxPricePerHour = 9_000 },
			want:  Miss{Seen: 1, CPU: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "RAM",
			state: cpu(func(*Offer) {}),
			req:   func(r *Request) { r.Memory = 16*gib + 1 },
			want:  Miss{Seen: 1, RAM: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "disk",
			state: cpu(func(*Offer) {}),
			req:   func(r *Request) { r.Disk = 100*gib + 1 },
			want:  Miss{Seen: 1, Disk: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "region, required",
			state: cpu(func(*Offer) {}),
			req:   func(r *Request) { r.Region, r.RegionRequired = "us", true },
			want:  Miss{Seen: 1, Region: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "network",
			state: cpu(func(*Offer) {}),
			req:   func(r *Request) { r.Network = true },
			want:  Miss{Seen: 1, Network: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "the first constraint failed is the one counted",
			state: cpu(func(o *Offer) { o.Executors, o.Stake, o.Jobs = wasm, 0, 4 }),
			want:  Miss{Seen: 1, Executor: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "GPU count, scanned",
			state: newState().add("T4", gpuOffer(1, 100, 1, 16, 7_500), gpuOffer(2, 200, 2, 16, 7_500)),
			req:   func(r *Request) { *r = gpuReq(2) },
			want:  Miss{Seen: 2, GPUs: 1, Classes: 1, Fit: 1, Need: 1},
		},
		{
			name: "VRAM, scanned: each of the GPUs needs it",
			state: newState().add("L4", gpuOffer(1, 100, 2, 16, 8_900),
				with(gpuOffer(2, 200, 2, 16, 8_900), func(o *Offer) { o.ClassGPUs[0].VRAM = 24 * gib })),
			req:  func(r *Request) { *r = gpuReq(2); r.MinVRAM = 24 * gib },
			want: Miss{Seen: 2, VRAM: 2, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "compute capability, scanned: of the GPUs with the VRAM",
			state: newState().add("H100", with(gpuOffer(1, 100, 2, 80, 9_000), func(o *Offer) { o.ClassGPUs[1].VRAM = 8 * gib; o.ClassGPUs[0].ComputeCap = 8_000 })),
			req:   func(r *Request) { *r = gpuReq(1); r.MinVRAM, r.MinComputeCap = 40*gib, 9_000 },
			want:  Miss{Seen: 1, ComputeCap: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:      "GPU count, from the summary: the class is not scanned",
			state:     newState().add("T4", gpuOffer(1, 100, 1, 16, 7_500), gpuOffer(2, 100, 1, 16, 7_500), gpuOffer(3, 100, 2, 16, 7_500)),
			req:       func(r *Request) { *r = gpuReq(4) },
			want:      Miss{Seen: 3, GPUs: 3, Classes: 1, Need: 1, Code: NoFit},
			unscanned: true,
		},
		{
			name:      "VRAM, from the summary",
			state:     newState().add("T4", gpuOffer(1, 100, 1, 16, 7_500), gpuOffer(2, 100, 4, 16, 7_500)).add("L4", gpuOffer(3, 100, 1, 24, 8_900)),
			req:       func(r *Request) { *r = gpuReq(1); r.MinVRAM = 40 * gib },
			want:      Miss{Seen: 3, VRAM: 3, Classes: 2, Need: 1, Code: NoFit},
			unscanned: true,
		},
		{
			name:      "compute capability, from the summary",
			state:     newState().add("T4", gpuOffer(1, 100, 1, 16, 7_500)),
			req:       func(r *Request) { *r = gpuReq(1); r.MinComputeCap = 8_000 },
			want:      Miss{Seen: 1, ComputeCap: 1, Classes: 1, Need: 1, Code: NoFit},
			unscanned: true,
		},
		{
			name:  "busy",
			state: cpu(func(o *Offer) { o.Jobs = 4 }),
			want:  Miss{Seen: 1, Busy: 1, Classes: 1, Need: 1, Code: NoFit},
		},
		{
			name:  "every ask above the ceiling",
			state: newState(offer(1, 2_000), offer(2, 1_500)),
			want:  Miss{Classes: 1, CheapestAbove: 1_500, Need: 1, Code: OverPrice},
		},
		{
			name:  "the cheapest ask above, for the job's units",
			state: newState().add("T4", gpuOffer(1, 600, 2, 16, 7_500)),
			req:   func(r *Request) { *r = gpuReq(2); r.MaxPricePerHour = 1_000 },
			want:  Miss{Classes: 1, CheapestAbove: 1_200, Need: 1, Code: OverPrice},
		},
		{
			name: "a class with offers above the ceiling only counts",
			state: newState().add("T4", with(gpuOffer(1, 100, 1, 16, 7_500), func(o *Offer) { o.Jobs = 4 }), gpuOffer(2, 3_000, 1, 16, 7_500)).
				add("L4", gpuOffer(3, 2_000, 1, 24, 8_900)),
			req:  func(r *Request) { *r = gpuReq(1) },
			want: Miss{Seen: 1, Busy: 1, Classes: 2, CheapestAbove: 2_000, Need: 1, Code: NoFit},
		},
		{
			name:  "no cheapest ask above once enough fit",
			state: newState(offer(1, 100), offer(2, 2_000)),
			want:  Miss{Seen: 1, Classes: 1, Fit: 1, Need: 1},
		},
		{
			name:  "no offer at all",
			state: newState(),
			want:  Miss{Need: 1, Code: NoOffer},
		},
		{
			name:  "no offer of the job's class",
			state: newState().add("T4", gpuOffer(1, 100, 1, 16, 7_500)),
			req:   func(r *Request) { *r = gpuReq(1); r.Classes = []string{"A100"} },
			want:  Miss{Need: 1, Code: NoOffer},
		},
		{
			name:      "the market price above the ceiling",
			state:     func() *memState { st := newState(offer(1, 100)); st.market[CPUClass] = 1_001; return st }(),
			want:      Miss{Classes: 1, OverMarket: 1, MarketPrice: 1_001, Need: 1, Code: OverMarket},
			unscanned: true,
		},
		{
			name: "the market price of the job's tier",
			state: func() *memState {
				st := newState().add("T4", gpuOffer(1, 100, 2, 16, 7_500)).add("L4", gpuOffer(2, 100, 2, 24, 8_900))
				st.marketTier["T4/priority"], st.marketTier["L4/priority"] = 1_500, 1_200
				return st
			}(),
			req:  func(r *Request) { *r = gpuReq(2); r.Tier, r.MaxPricePerHour = "priority", 2_000 },
			want: Miss{Classes: 2, OverMarket: 2, MarketPrice: 2_400, Need: 1, Code: OverMarket},
		},
		{
			name:  "too few for the replicas",
			state: newState(offer(1, 100), with(offer(2, 200), func(o *Offer) { o.Jobs = 4 })),
			req:   func(r *Request) { r.Need, r.Planned = 2, 2 },
			want:  Miss{Seen: 2, Busy: 1, Classes: 1, Fit: 1, Need: 2, Code: TooFew},
		},
		{
			name: "each offer under its own constraint",
			state: newState(with(offer(1, 100), func(o *Offer) { o.Executors = wasm }), with(offer(2, 100), func(o *Offer) { o.Stake = 0 }),
				with(offer(3, 100), func(o *Offer) { o.CPUCores = 0 }), with(offer(4, 100), func(o *Offer) { o.RAM = 0 }),
				with(offer(5, 100), func(o *Offer) { o.Disk = 0 }), with(offer(6, 100), func(o *Offer) { o.Jobs = 9 }),
				offer(7, 5_000)),
			want: Miss{Seen: 6, Executor: 1, Stake: 1, CPU: 1, RAM: 1, Disk: 1, Busy: 1, Classes: 1, CheapestAbove: 5_000, Need: 1, Code: NoFit},
		},
		{
			name: "at most ScanLimit offers",
			state: func() *memState {
				st := newState()
				for i := range ScanLimit + 10 {
					st.add(CPUClass, with(offer(byte(i), uint64(1+i/256)), func(o *Offer) { o.Executors = wasm }))
				}
				return st
			}(),
			want: Miss{Seen: ScanLimit, Executor: ScanLimit, Classes: 1, Need: 1, Code: NoFit},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req()
			if tc.req != nil {
				tc.req(&r)
			}
			plan := place(t, tc.state, r)
			if plan.Miss != tc.want {
				t.Errorf("miss\n%+v, want\n%+v", plan.Miss, tc.want)
			}
			scanned := 0
			for _, n := range tc.state.scanned {
				scanned += n
			}
			if tc.unscanned && scanned != 0 {
				t.Errorf("%d offers scanned, want none", scanned)
			}
		})
	}
}

// TestBusyOffers: a job of a tier that may preempt learns the offers that
// fit but for a free slot, at most PerClass of them; a job whose replicas
// share an engine does not (preemption does not choose engines).
func TestBusyOffers(t *testing.T) {
	busy := func(n byte, ask uint64) Offer { return with(offer(n, ask), func(o *Offer) { o.Jobs = o.MaxJobs }) }
	st := newState(busy(1, 100), with(offer(2, 150), func(o *Offer) { o.RAM = 0 }), busy(3, 200), busy(4, 300))
	st.market[CPUClass] = 120
	r := req()
	r.MayPreempt, r.PerClass = true, 2
	plan := place(t, st, r)
	want := []Pick{{Provider: addr(1), Class: CPUClass, Price: 120, Ask: 100}, {Provider: addr(3), Class: CPUClass, Price: 200, Ask: 200}}
	if !slices.Equal(plan.Busy, want) {
		t.Errorf("busy %+v, want %+v", plan.Busy, want)
	}
	if plan.Miss.Busy != 3 || plan.Miss.Code != NoFit {
		t.Errorf("miss %+v", plan.Miss)
	}
	for _, tc := range []struct {
		name string
		f    func(*Request)
	}{
		{"a tier that may not preempt", func(r *Request) { r.MayPreempt = false }},
		{"a shared engine", func(r *Request) { r.Engine = EngineNeed{Shared: true, Group: 1}; r.Executor = wasm }},
	} {
		r := req()
		r.MayPreempt = true
		tc.f(&r)
		if plan := place(t, st, r); len(plan.Busy) != 0 {
			t.Errorf("%s: busy %+v", tc.name, plan.Busy)
		}
	}
}

// TestMissCode: the codes' precedence, from the counts alone.
func TestMissCode(t *testing.T) {
	for _, tc := range []struct {
		m         Miss
		fit, need int
		want      Code
	}{
		{Miss{OverMarket: 1, Classes: 1}, 0, 1, OverMarket},
		{Miss{OverMarket: 1, Classes: 2, Seen: 1, Busy: 1}, 0, 1, NoFit},
		{Miss{Engines: 2, Fitting: 2, Seen: 2, Classes: 1}, 1, 2, NoEngine},
		{Miss{OtherEngine: 1, Seen: 2, Classes: 1}, 1, 2, NoEngine},
		{Miss{NoEngine: 1, Seen: 1, Classes: 1}, 0, 1, NoEngine},
		{Miss{Seen: 1, Classes: 1}, 1, 2, TooFew},
		{Miss{}, 0, 1, NoOffer},
		{Miss{Classes: 1}, 0, 1, NoOffer},
		{Miss{Classes: 1, CheapestAbove: 5}, 0, 1, OverPrice},
		{Miss{Classes: 1, Seen: 1, Busy: 1}, 0, 1, NoFit},
	} {
		if got := tc.m.code(tc.fit, tc.need); got != tc.want {
			t.Errorf("%+v with %d of %d: %s, want %s", tc.m, tc.fit, tc.need, got, tc.want)
		}
	}
}
