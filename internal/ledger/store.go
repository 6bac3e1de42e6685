package ledger

import (
	"bytes"
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
type Overlay struct {
	base   KV
	writes map[string][]byte // nil value: deleted
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
	return o.base.Get(key)
}

// Set stages a write. value must not be nil; the overlay keeps its own copy.
func (o *Overlay) Set(key, value []byte) {
	o.writes[string(key)] = append(make([]byte, 0, len(value)), value...)
}

// Delete stages a deletion.
func (o *Overlay) Delete(key []byte) { o.writes[string(key)] = nil }

// Iterate implements KV, merging staged writes with the base in key order.
func (o *Overlay) Iterate(start, end []byte, fn func(key, value []byte) bool) {
	var keys []string
	for k := range o.writes {
		if k >= string(start) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	i := 0
	stopped := false
	emitStaged := func(upTo []byte) bool { // emit staged keys < upTo (all if nil)
		for i < len(keys) && (upTo == nil || keys[i] < string(upTo)) {
			if v := o.writes[keys[i]]; v != nil && !fn([]byte(keys[i]), v) {
				return false
			}
			i++
		}
		return true
	}
	o.base.Iterate(start, end, func(k, v []byte) bool {
		if !emitStaged(k) {
			stopped = true
			return false
		}
		if i < len(keys) && keys[i] == string(k) {
			i++
			if w := o.writes[string(k)]; w != nil {
				if !fn(k, w) {
					stopped = true
					return false
				}
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
	out := make([]Change, 0, len(o.writes))
	for k, v := range o.writes {
		out = append(out, Change{Key: []byte(k), Value: v})
	}
	slices.SortFunc(out, func(a, b Change) int { return bytes.Compare(a.Key, b.Key) })
	return out
}

// Flush applies the staged writes to dst and empties the overlay.
func (o *Overlay) Flush(dst *Overlay) {
	for k, v := range o.writes {
		dst.writes[k] = v
	}
	clear(o.writes)
}

// Discard drops the staged writes.
func (o *Overlay) Discard() { clear(o.writes) }

// Len returns the number of staged writes.
func (o *Overlay) Len() int { return len(o.writes) }

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
