package abciapp

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
	"github.com/google/btree"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Store is the app state: Pebble, plus an in-memory copy of the ledger's
// scheduler index (ledger.SchedulerIndexPrefixes). The scheduler scans that
// index for every job it places, and its entries are rewritten whenever a
// provider's load changes, so in Pebble a scan steps over many versions of
// each key in the memtables; an ordered in-memory tree does not. Pebble
// keeps every key too (the tree is a write-through copy, loaded at open),
// so a range that spans the index and other keys is read from Pebble.
//
// Commit writes a block to both. Views pair a Pebble snapshot with the
// tree of the same block: the tree is copied on write (google/btree's
// Clone), so a view's copy never changes under it.
//
// The committed state's point reads also go through a bounded cache of
// values (valueCache): a tx's accounts are read when it is checked, again
// when rechecked and again when its block is delivered, and a Pebble Get
// costs about a microsecond where a map lookup costs a tenth of that
// (issue 36). Commit writes each block's changes through to it.
type Store struct {
	db *pebble.DB
	kv *PebbleKV // the committed state
	mu sync.Mutex
}

// OpenStore wraps db and loads the scheduler index into memory.
func OpenStore(db *pebble.DB) (*Store, error) {
	mem := newMemIndex()
	for _, p := range ledger.SchedulerIndexPrefixes() {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return nil, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			mem.ReplaceOrInsert(memItem{k: bytes.Clone(it.Key()), v: bytes.Clone(it.Value())})
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return nil, fmt.Errorf("load the scheduler index: %w", err)
		}
	}
	s := &Store{db: db, kv: &PebbleKV{r: db, cache: newValueCache(valueCacheEntries, valueCacheBytes)}}
	s.kv.mem.Store(mem)
	return s, nil
}

// KV reads the committed state.
func (s *Store) KV() *PebbleKV { return s.kv }

// Commit writes change sets, in order, in one batch; sync waits for the
// write-ahead log to reach the disk. Readers of KV see the new state once
// Commit returns.
func (s *Store) Commit(sync bool, sets ...[]ledger.Change) error {
	batch := s.db.NewBatch()
	defer batch.Close()
	next := s.kv.mem.Load().Clone()
	for _, set := range sets {
		for _, c := range set {
			var err error
			if c.Value == nil {
				err = batch.Delete(c.Key, nil)
			} else {
				err = batch.Set(c.Key, c.Value, nil)
			}
			if err != nil {
				return err
			}
			if inIndex(c.Key) {
				if c.Value == nil {
					next.Delete(memItem{k: c.Key})
				} else {
					next.ReplaceOrInsert(memItem{k: bytes.Clone(c.Key), v: bytes.Clone(c.Value)})
				}
			}
		}
	}
	// The batch becomes visible and the tree is swapped under mu, which
	// View takes to pair a snapshot with its tree, and the value cache
	// takes the changes with it. The log sync, the slow part, is waited
	// for outside both.
	s.mu.Lock()
	err := s.kv.cache.commit(sets, func() error {
		if sync {
			return s.db.ApplyNoSyncWait(batch, pebble.Sync)
		}
		return s.db.Apply(batch, pebble.NoSync)
	})
	if err == nil {
		s.kv.mem.Store(next)
	}
	s.mu.Unlock()
	if err == nil && sync {
		err = batch.SyncWait()
	}
	if err != nil {
		return err
	}
	// Iterators opened before the write do not see it.
	return s.kv.Reset()
}

// View returns a consistent read-only view of the committed state and a
// function to release it.
func (s *Store) View() (*PebbleKV, func()) {
	s.mu.Lock()
	snap := s.db.NewSnapshot()
	kv := &PebbleKV{r: snap}
	kv.mem.Store(s.kv.mem.Load())
	s.mu.Unlock()
	return kv, func() { kv.Reset(); snap.Close() }
}

// Close closes the store's iterators and the DB.
func (s *Store) Close() error { return errors.Join(s.kv.Reset(), s.db.Close()) }

// PebbleKV reads state from Pebble (a DB or a snapshot), and the scheduler
// index from the tree of the same state. Its range scans reuse iterators:
// opening a Pebble iterator costs more than repositioning one. A Pebble
// iterator sees the DB as it was when it was opened, so whoever writes to
// the DB must call Reset after the write (Store.Commit does): iterators
// opened before it are then closed instead of reused.
type PebbleKV struct {
	r     pebble.Reader
	cache *valueCache // the live state's point reads; nil in a view
	mem   atomic.Pointer[memIndex]
	mu    sync.Mutex
	gen   uint64             // Reset count
	free  []*pebble.Iterator // opened in generation gen; at most maxFreeIters
}

const maxFreeIters = 8

// Get implements ledger.KV.
func (p *PebbleKV) Get(key []byte) []byte {
	if inIndex(key) {
		if it, ok := p.mem.Load().Get(memItem{k: key}); ok {
			return it.v
		}
		return nil
	}
	v, ok, epoch := p.cache.get(key)
	if ok {
		return v
	}
	v = p.get(key)
	p.cache.put(key, v, epoch)
	return v
}

// get reads key from Pebble.
func (p *PebbleKV) get(key []byte) []byte {
	v, closer, err := p.r.Get(key)
	if err == pebble.ErrNotFound {
		return nil
	}
	if err != nil {
		// A read error from the local store means the disk or the store is
		// broken; carrying on could fork this node from the others.
		panic("app state read failed: " + err.Error())
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out
}

// Iterate implements ledger.KV.
func (p *PebbleKV) Iterate(start, end []byte, fn func(k, v []byte) bool) {
	if rangeInIndex(start, end) {
		visit := func(it memItem) bool { return fn(it.k, it.v) }
		if end == nil {
			p.mem.Load().AscendGreaterOrEqual(memItem{k: start}, visit)
		} else {
			p.mem.Load().AscendRange(memItem{k: start}, memItem{k: end}, visit)
		}
		return
	}
	opts := &pebble.IterOptions{LowerBound: start, UpperBound: end}
	var it *pebble.Iterator
	p.mu.Lock()
	gen := p.gen
	if n := len(p.free); n > 0 {
		it, p.free = p.free[n-1], p.free[:n-1]
	}
	p.mu.Unlock()
	if it != nil {
		it.SetOptions(opts)
	} else {
		var err error
		if it, err = p.r.NewIter(opts); err != nil {
			panic("app state iteration failed: " + err.Error())
		}
	}
	defer p.release(it, gen)
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(it.Key(), it.Value()) {
			return
		}
	}
	if err := it.Error(); err != nil {
		panic("app state iteration failed: " + err.Error())
	}
}

func (p *PebbleKV) release(it *pebble.Iterator, gen uint64) {
	p.mu.Lock()
	if gen == p.gen && it.Error() == nil && len(p.free) < maxFreeIters {
		p.free = append(p.free, it)
		it = nil
	}
	p.mu.Unlock()
	if it != nil {
		it.Close()
	}
}

// Reset closes the iterators kept for reuse, and makes those in use close
// when done: call it after each write to the DB, and before closing it.
func (p *PebbleKV) Reset() error {
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.gen++
	p.mu.Unlock()
	var first error
	for _, it := range free {
		if err := it.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// memIndex is the in-memory scheduler index: an ordered tree of its keys.
type memIndex = btree.BTreeG[memItem]

type memItem struct{ k, v []byte }

func newMemIndex() *memIndex {
	return btree.NewG(32, func(a, b memItem) bool { return bytes.Compare(a.k, b.k) < 0 })
}

func inIndex(key []byte) bool {
	for _, p := range ledger.SchedulerIndexPrefixes() {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// rangeInIndex reports whether [start, end) holds only index keys.
func rangeInIndex(start, end []byte) bool {
	if end == nil {
		return false
	}
	for _, p := range ledger.SchedulerIndexPrefixes() {
		if bytes.HasPrefix(start, p) && bytes.Compare(end, prefixEnd(p)) <= 0 {
			return true
		}
	}
	return false
}

func prefixEnd(p []byte) []byte { return ledger.PrefixEnd(p) }

// layered is a committed base with a change set on top that is not yet
// written (genesis, between InitChain and the first Commit).
func layered(base ledger.KV, changes []ledger.Change) ledger.KV {
	if len(changes) == 0 {
		return base
	}
	o := ledger.NewOverlay(base)
	for _, c := range changes {
		if c.Value == nil {
			o.Delete(c.Key)
		} else {
			o.Set(c.Key, c.Value)
		}
	}
	return o
}
