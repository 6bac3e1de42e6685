package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"regexp"
)

// Wasm engines. Two wasm engines (wasmtime and wazero, two versions of one,
// one on two CPU architectures) may legitimately give a module different
// bits: NaN payloads, for one. So a provider declares the engine it runs
// wasm jobs on (ProviderInfo.WasmEngine), and the replicas of a wasm job
// whose results are compared all run on the engine its first placement
// chose: a network moving from one engine to another sees no false
// disagreements on the way. Jobs whose results are not compared, and oci
// jobs, run on any engine.
//
// The scheduler's index holds an engine as engineID, a fixed-size id, so
// that matching one is an integer compare. Two engine strings with one id
// (a 2^-64 chance) would count as one engine; a provider gains nothing by
// crafting one, since it can declare any engine string it likes anyway.

// MaxWasmEngineLen is the longest engine string a provider may declare.
const MaxWasmEngineLen = 128

var wasmEngineRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._,+=:@/-]{0,127}$`)

// ValidWasmEngine reports whether engine may name a wasm engine: 1 to
// MaxWasmEngineLen of A-Z a-z 0-9 . _ , + = : @ / -, starting with a letter
// or digit, e.g. wazero-1.12.0/linux-amd64/wasi-gpunet-1.
func ValidWasmEngine(engine string) bool { return wasmEngineRE.MatchString(engine) }

// engineID is the scheduler's name for engine: the first 8 bytes of its
// SHA-256, big-endian; 0 for no engine (and never for one).
func engineID(engine string) uint64 {
	if engine == "" {
		return 0
	}
	h := sha256.Sum256([]byte(engine))
	return max(binary.BigEndian.Uint64(h[:8]), 1)
}

// SharesEngine reports whether every replica of a job of this spec must
// run on one wasm engine: a wasm job whose results are compared.
func (s *JobSpec) SharesEngine() bool { return s.Executor == ExecutorWASM && s.Checked() }

// PinnedEngine is the wasm engine that every further replica of j must
// run on: that of its replicas, for a job whose replicas share one
// (SharesEngine), once it has one; "" before it is placed, and for any
// other job.
func (j *Job) PinnedEngine() string {
	if !j.Spec.SharesEngine() {
		return ""
	}
	for _, a := range j.Assignments {
		if a.WasmEngine != "" {
			return a.WasmEngine
		}
	}
	return ""
}

// engineNeed is what a placement asks of the engines of the offers it
// takes.
type engineNeed struct {
	// shared: every replica runs on one engine, so an offer without one
	// does not fit.
	shared bool
	// pinned, when shared, is the engine the job's replicas already run on
	// (its id in pinnedID); "" to let the placement choose one.
	pinned   string
	pinnedID uint64
	// group, when shared and not pinned, is how many offers of one engine
	// the placement needs.
	group int
}

// engineNeedOf is what placing the replicas j waits for asks of engines.
func engineNeedOf(j *Job) engineNeed {
	if !j.Spec.SharesEngine() {
		return engineNeed{}
	}
	if e := j.PinnedEngine(); e != "" {
		return engineNeed{shared: true, pinned: e, pinnedID: engineID(e)}
	}
	return engineNeed{shared: true, group: int(j.Replicas) - len(j.Assignments)}
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
func (e engineNeed) tally() *engineTally {
	if e.shared && e.pinned == "" && e.group > 1 {
		t := &engineTally{want: e.group}
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
// better-ranked on a tie), and v records that the job waits for one.
func chooseEngine(cands []candidate, group int, v *verdict) []candidate {
	var buf [4]engineCount
	counts := buf[:0]
	chosen, ok := uint64(0), false
	for _, c := range cands {
		var n int
		counts, n = countEngine(counts, c.engine)
		if n >= group {
			chosen, ok = c.engine, true
			break
		}
	}
	if !ok {
		v.engines, v.fitting = len(counts), len(cands)
		best := 0
		for _, c := range counts { // in first-seen order: ties go to the better-ranked
			if c.n > best {
				best, chosen = c.n, c.id
			}
		}
	}
	out := cands[:0]
	for _, c := range cands {
		if c.engine == chosen {
			out = append(out, c)
		}
	}
	return out
}
