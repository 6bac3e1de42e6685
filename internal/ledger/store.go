package ledger

import (
	"slices"
)

// KV is read access to an ordered key-value store: the committed state that a
// block or a mempool check starts from. Implementations live outside the
// ledger (Pebble in abciapp, maps in tests).
type KV interface {
	// Get returns the value stored at key, or nil if there is none. The
	// caller must not modify the returned slice.
	Get(key []byte) []byte
	// Iterate calls fn for each key in [start, end) in ascending byte order
	// (end nil means no upper bound) until fn returns false.
	Iterate(start, end []byte, fn func(key, value []byte) bool)
}

// Change is one write in a change set; a nil Value deletes the key.
type Change struct {
	Key, Value []byte
}

// Overlay buffers writes on top of a KV. Reads see the buffered writes. It is
// how a block, a tx within a block, and the mempool's check state stage
// changes without touching what lies beneath.
//
// Staged writes live in a map (for Get) and, by key, in a skip list (for
// Iterate and Changes), so that a range scan costs O(log writes + keys in
// range) however many writes the block has staged: the scheduler scans the
// provider index once per queued job, in a block that may stage tens of
// thousands of writes. Keys go into the skip list at the next ordered read
// (Iterate, Changes), not when staged: most overlays are never read in
// order (the mempool's check state, a tx's scratch overlays, which Flush
// empties into another), and those never pay for it (issue 36).
//
// An overlay also remembers what it read from its base (which must not
// change while the overlay is in use), so that folding a block's changes
// into the app hash, which needs each changed key's old value, seldom goes
// back to the store.
type Overlay struct {
	base   KV
	writes map[string][]byte // nil value: deleted
	keys   skipList          // keys of writes, in order
	// unindexed holds the keys of writes not yet in keys, in the order
	// they were first staged.
	unindexed []string
	read      map[string][]byte // values read from base; nil: absent there
	// noReads: read is not kept (a tx's scratch overlay, whose base is
	// another overlay and whose reads nothing folds into a hash).
	noReads bool
}

// NewOverlay returns an empty overlay on base.
func NewOverlay(base KV) *Overlay {
	return &Overlay{base: base, writes: make(map[string][]byte)}
}

// Get implements KV.
func (o *Overlay) Get(key []byte) []byte {
	if v, ok := o.writes[string(key)]; ok {
		return v
	}
	return o.baseGet(key)
}

// baseGet returns the value key has in the base.
func (o *Overlay) baseGet(key []byte) []byte {
	if o.noReads {
		return o.base.Get(key)
	}
	if v, ok := o.read[string(key)]; ok {
		return v
	}
	v := o.base.Get(key)
	if o.read == nil {
		o.read = make(map[string][]byte)
	}
	o.read[string(key)] = v
	return v
}

// noteBase tells the overlay the value key has in the base, for a caller
// that learnt it otherwise than by Get (from a scan, or from the record an
// index entry is derived from). It is ignored if key is staged.
func (o *Overlay) noteBase(key, value []byte) {
	if o.noReads {
		return
	}
	if _, ok := o.writes[string(key)]; ok {
		return
	}
	if o.read == nil {
		o.read = make(map[string][]byte)
	}
	o.read[string(key)] = value
}

// Set stages a write. value must not be nil; the overlay keeps its own copy.
func (o *Overlay) Set(key, value []byte) {
	o.stage(string(key), append(make([]byte, 0, len(value)), value...))
}

// setOwned is Set for a value the caller made for it and never uses again
// (a record just encoded, a counter just appended): the overlay keeps it
// rather than a copy.
func (o *Overlay) setOwned(key, value []byte) {
	if value == nil {
		value = []byte{}
	}
	o.stage(string(key), value)
}

// Delete stages a deletion.
func (o *Overlay) Delete(key []byte) { o.stage(string(key), nil) }

func (o *Overlay) stage(key string, value []byte) {
	if _, ok := o.writes[key]; !ok {
		o.unindexed = append(o.unindexed, key)
	}
	o.writes[key] = value
}

// index puts the keys staged since the last ordered read into the skip list.
func (o *Overlay) index() {
	for _, k := range o.unindexed {
		o.keys.insert(k)
	}
	clear(o.unindexed)
	o.unindexed = o.unindexed[:0]
}

// Iterate implements KV, merging staged writes with the base in key order.
// Writes staged by fn are not visited.
func (o *Overlay) Iterate(start, end []byte, fn func(key, value []byte) bool) {
	o.index()
	next := o.keys.seek(string(start))
	inRange := func(n *skipNode) bool { return n != nil && (end == nil || n.key < string(end)) }
	stopped := false
	emitStaged := func(upTo []byte) bool { // emit staged keys < upTo (all if nil)
		for inRange(next) && (upTo == nil || next.key < string(upTo)) {
			if v := o.writes[next.key]; v != nil && !fn([]byte(next.key), v) {
				return false
			}
			next = next.next[0]
		}
		return true
	}
	o.base.Iterate(start, end, func(k, v []byte) bool {
		if !emitStaged(k) {
			stopped = true
			return false
		}
		if inRange(next) && next.key == string(k) {
			w := o.writes[next.key]
			next = next.next[0]
			if w != nil && !fn(k, w) {
				stopped = true
				return false
			}
			return true
		}
		if !fn(k, v) {
			stopped = true
			return false
		}
		return true
	})
	if !stopped {
		emitStaged(nil)
	}
}

// Changes returns the staged writes sorted by key.
func (o *Overlay) Changes() []Change {
	o.index()
	out := make([]Change, 0, len(o.writes))
	for n := o.keys.first(); n != nil; n = n.next[0] {
		out = append(out, Change{Key: []byte(n.key), Value: o.writes[n.key]})
	}
	return out
}

// Flush applies the staged writes to dst and empties the overlay.
// The order they go in does not matter (dst orders its keys when read in
// order), so those not yet in the skip list are not put there.
//
// When dst is the overlay's base, what the overlay remembers reading from
// it is brought up to date with what it flushed there.
func (o *Overlay) Flush(dst *Overlay) {
	toBase := o.read != nil && o.base == KV(dst)
	flush := func(k string) {
		v := o.writes[k]
		dst.stage(k, v)
		if toBase {
			o.read[k] = v
		}
	}
	for n := o.keys.first(); n != nil; n = n.next[0] {
		flush(n.key)
	}
	for _, k := range o.unindexed {
		flush(k)
	}
	o.Discard()
}

// Discard drops the staged writes.
func (o *Overlay) Discard() {
	clear(o.writes)
	o.keys.reset()
	clear(o.unindexed)
	o.unindexed = o.unindexed[:0]
}

// Len returns the number of staged writes.
func (o *Overlay) Len() int { return len(o.writes) }

// skipList is an ordered set of strings (Pugh's skip list). Node heights
// come from a fixed xorshift sequence: they shape only the list's speed,
// never its order, so determinism does not depend on them.
type skipList struct {
	head  [skipMaxLevel]*skipNode
	level int // levels in use
	rng   uint64
}

type skipNode struct {
	key  string
	next []*skipNode
	// inline holds next for the nodes of height 2 or less (15 in 16),
	// which then cost one allocation rather than two.
	inline [2]*skipNode
}

const skipMaxLevel = 24 // enough for 4^24 keys at p = 1/4

func (l *skipList) reset() { *l = skipList{} }

func (l *skipList) first() *skipNode { return l.head[0] }

// randomLevel draws a height with P(h > k) = 4^-k.
func (l *skipList) randomLevel() int {
	if l.rng == 0 {
		l.rng = 0x9E3779B97F4A7C15
	}
	l.rng ^= l.rng << 13
	l.rng ^= l.rng >> 7
	l.rng ^= l.rng << 17
	h, r := 1, l.rng
	for h < skipMaxLevel && r&3 == 0 {
		h++
		r >>= 2
	}
	return h
}

// seek returns the first node whose key is >= key, or nil; prev, if not
// nil, receives at each level the last node before it (nil: the head).
func (l *skipList) seek(key string) *skipNode {
	return l.find(key, nil)
}

func (l *skipList) find(key string, prev *[skipMaxLevel]*skipNode) *skipNode {
	var x *skipNode // nil stands for the head
	for lv := l.level - 1; lv >= 0; lv-- {
		for {
			n := l.nextAt(x, lv)
			if n == nil || n.key >= key {
				break
			}
			x = n
		}
		if prev != nil {
			prev[lv] = x
		}
	}
	return l.nextAt(x, 0)
}

func (l *skipList) nextAt(x *skipNode, lv int) *skipNode {
	if x == nil {
		return l.head[lv]
	}
	return x.next[lv]
}

// insert adds key, which must not be in the list.
func (l *skipList) insert(key string) {
	var prev [skipMaxLevel]*skipNode
	l.find(key, &prev)
	h := l.randomLevel()
	for l.level < h {
		prev[l.level] = nil
		l.level++
	}
	n := &skipNode{key: key}
	if h <= len(n.inline) {
		n.next = n.inline[:h:h]
	} else {
		n.next = make([]*skipNode, h)
	}
	for lv := range h {
		if p := prev[lv]; p == nil {
			n.next[lv], l.head[lv] = l.head[lv], n
		} else {
			n.next[lv], p.next[lv] = p.next[lv], n
		}
	}
}

// MemKV is an in-memory KV, for tests and tools.
type MemKV struct{ m map[string][]byte }

// NewMemKV returns an empty MemKV.
func NewMemKV() *MemKV { return &MemKV{m: make(map[string][]byte)} }

// Get implements KV.
func (m *MemKV) Get(key []byte) []byte { return m.m[string(key)] }

// Iterate implements KV.
func (m *MemKV) Iterate(start, end []byte, fn func(key, value []byte) bool) {
	var keys []string
	for k := range m.m {
		if k >= string(start) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !fn([]byte(k), m.m[k]) {
			return
		}
	}
}

// Apply writes a change set.
func (m *MemKV) Apply(changes []Change) {
	for _, c := range changes {
		if c.Value == nil {
			delete(m.m, string(c.Key))
		} else {
			m.m[string(c.Key)] = c.Value
		}
	}
}
