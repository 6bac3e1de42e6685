package abciapp

import (
	"sync"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Bounds of the committed state's value cache: entries per generation (it
// keeps two) and their bytes (keys and values) per generation; a value
// larger than valueCacheMaxValue is read from Pebble each time.
const (
	valueCacheEntries  = 1 << 16
	valueCacheBytes    = 16 << 20
	valueCacheMaxValue = 16 << 10
	valueCacheOverhead = 64 // a map entry and the slices' headers, roughly
)

// valueCache holds values of the committed state by key, a nil value for
// a key that is absent. Reads fill it (PebbleKV.Get) and Store.Commit writes
// each block's changes through to it, under the lock that makes the block
// visible in Pebble, so a reader never finds in it a value other than the
// one Pebble holds. A read that missed, went to Pebble and comes back after
// a commit must not put what it read (it may be the value before the
// commit): the epoch, which every commit advances, tells.
//
// A nil *valueCache caches nothing (a view's PebbleKV reads a snapshot).
type valueCache struct {
	mu    sync.Mutex
	epoch uint64
	g     generations[string, []byte]
}

func newValueCache(entries, bytes int) *valueCache {
	return &valueCache{g: newGenerations[string, []byte](entries).withBytes(bytes)}
}

// get returns key's value and whether the cache holds it, and the epoch a
// put of what Pebble answers instead must name.
func (c *valueCache) get(key []byte) ([]byte, bool, uint64) {
	if c == nil {
		return nil, false, 0
	}
	c.mu.Lock()
	e, ok := c.g.cur[string(key)] // no copy of key for a hit in the current generation
	v := e.v
	if !ok {
		v, ok = c.g.get(string(key))
	}
	epoch := c.epoch
	c.mu.Unlock()
	return v, ok, epoch
}

// put remembers v, read from Pebble for key in epoch, unless a commit came
// between. v is kept as it is: the KV's callers do not modify what Get
// returns.
func (c *valueCache) put(key, v []byte, epoch uint64) {
	if c == nil || len(v) > valueCacheMaxValue {
		return
	}
	c.mu.Lock()
	if c.epoch == epoch {
		c.g.putSized(string(key), v, len(key)+len(v)+valueCacheOverhead)
	}
	c.mu.Unlock()
}

// commit runs apply, which makes change sets visible in Pebble, and then
// writes them, in order, through to the cache, with readers of the cache
// held off for both: none finds a value there that Pebble no longer holds.
func (c *valueCache) commit(sets [][]ledger.Change, apply func() error) error {
	if c == nil {
		return apply()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++ // even if apply fails: what it wrote is unknown
	if err := apply(); err != nil {
		c.g.clear()
		return err
	}
	for _, set := range sets {
		for _, ch := range set {
			if len(ch.Value) > valueCacheMaxValue {
				c.g.drop(string(ch.Key))
				continue
			}
			var v []byte
			if ch.Value != nil {
				v = append(make([]byte, 0, len(ch.Value)), ch.Value...)
			}
			c.g.putSized(string(ch.Key), v, len(ch.Key)+len(v)+valueCacheOverhead)
		}
	}
	return nil
}

// clear forgets everything (the DB was written to directly: a restore).
func (c *valueCache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.epoch++
	c.g.clear()
	c.mu.Unlock()
}
