package sched

// Wasm engines: the replicas of a wasm job whose results are compared all
// run on one engine (two engines may legitimately give one module
// different bits), the one its first placement chose. An offer carries its
// engine as a fixed-size id (Offer.Engine), so that matching one is an
// integer compare.

// EngineNeed is what a placement asks of the wasm engines of the offers it
// takes. The zero EngineNeed asks nothing.
type EngineNeed struct {
	// Shared: every replica runs on one engine, so an offer without one
	// does not fit.
	Shared bool
	// Pinned, when Shared, is the id of the engine the job's replicas
	// already run on; 0 to let the placement choose one.
	Pinned uint64
	// Group, when Shared and not pinned, is how many offers of one engine
	// the placement needs.
	Group int
}

// engineCount is how many candidates run one engine.
type engineCount struct {
	id uint64
	n  int
}

// countEngine adds one candidate of engine id to counts and returns that
// engine's count. Few engines are in use at once, so a slice does.
func countEngine(counts []engineCount, id uint64) ([]engineCount, int) {
	for i := range counts {
		if counts[i].id == id {
			counts[i].n++
			return counts, counts[i].n
		}
	}
	return append(counts, engineCount{id, 1}), 1
}

// tally is what counts a scan's offers when the placement chooses the
// engine (it needs more than one replica and has none); nil otherwise.
func (e EngineNeed) tally() *engineTally {
	if e.Shared && e.Pinned == 0 && e.Group > 1 {
		t := &engineTally{want: e.Group}
		t.counts = t.buf[:0]
		return t
	}
	return nil
}

// engineTally counts a scan's fitting offers per engine.
type engineTally struct {
	want    int // offers of one engine the placement needs
	counts  []engineCount
	largest int
	buf     [4]engineCount // counts' first backing array: one allocation
}

func (t *engineTally) add(id uint64) {
	var n int
	t.counts, n = countEngine(t.counts, id)
	t.largest = max(t.largest, n)
}

// short reports whether no engine has t.want offers yet; false for no
// tally.
func (t *engineTally) short() bool { return t != nil && t.largest < t.want }

// chooseEngine keeps, of cands (best first), those of the engine whose
// group-th best candidate ranks highest: the first engine with group
// candidates. When no engine has that many it keeps the largest group (the
// better-ranked on a tie), and m records that the job waits for one.
func chooseEngine(cands []Pick, group int, m *Miss) []Pick {
	var buf [4]engineCount
	counts := buf[:0]
	chosen, ok := uint64(0), false
	for _, c := range cands {
		var n int
		counts, n = countEngine(counts, c.Engine)
		if n >= group {
			chosen, ok = c.Engine, true
			break
		}
	}
	if !ok {
		m.Engines, m.Fitting = len(counts), len(cands)
		best := 0
		for _, c := range counts { // in first-seen order: ties go to the better-ranked
			if c.n > best {
				best, chosen = c.n, c.id
			}
		}
	}
	out := cands[:0]
	for _, c := range cands {
		if c.Engine == chosen {
			out = append(out, c)
		}
	}
	return out
}
