package abciapp

import (
	"sync"

	"github.com/cockroachdb/pebble"

	"github.com/gpunet/gpunet/internal/ledger"
)

// PebbleKV reads committed state from Pebble (a DB or a snapshot). Its
// range scans reuse iterators: the scheduler scans the provider index a few
// times for every queued job, and opening a Pebble iterator costs more than
// repositioning one. A Pebble iterator sees the DB as it was when it was
// opened, so whoever writes to the DB must call Reset after the write:
// iterators opened before it are then closed instead of reused.
type PebbleKV struct {
	r    pebble.Reader
	mu   sync.Mutex
	gen  uint64             // Reset count
	free []*pebble.Iterator // opened in generation gen; at most maxFreeIters
}

const maxFreeIters = 8

// NewPebbleKV returns a KV reading r.
func NewPebbleKV(r pebble.Reader) *PebbleKV { return &PebbleKV{r: r} }

// Get implements ledger.KV.
func (p *PebbleKV) Get(key []byte) []byte {
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
