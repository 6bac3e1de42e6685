package validator

import (
	"errors"
	"sync"

	dbm "github.com/cometbft/cometbft-db"
)

// errStoreClosed is what a guardedDB answers once closed.
var errStoreClosed = errors.New("store closed")

// GuardDB wraps the tx indexer's store. CometBFT v1.0.1 never closes that
// store, and its indexer goroutine outlives node.Stop (IndexerService.OnStop
// unsubscribes but does not wait for it), so it may still be writing a
// block's batch when the node's owner closes the store, and Pebble answers a
// write to a closed store with a panic ("pebble: closed"). The guard makes
// Close wait for calls in flight and every later call fail with
// errStoreClosed, which the indexer logs and drops: at worst the last
// block's txs go unindexed.
func GuardDB(db dbm.DB) dbm.DB { return &guardedDB{DB: db} }

// guardedDB is GuardDB's store.
type guardedDB struct {
	dbm.DB
	mu     sync.RWMutex
	closed bool
}

func (g *guardedDB) guard(f func() error) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return errStoreClosed
	}
	return f()
}

func (g *guardedDB) Get(key []byte) (v []byte, err error) {
	err = g.guard(func() error { v, err = g.DB.Get(key); return err })
	return v, err
}

func (g *guardedDB) Has(key []byte) (ok bool, err error) {
	err = g.guard(func() error { ok, err = g.DB.Has(key); return err })
	return ok, err
}

func (g *guardedDB) Set(key, value []byte) error {
	return g.guard(func() error { return g.DB.Set(key, value) })
}

func (g *guardedDB) SetSync(key, value []byte) error {
	return g.guard(func() error { return g.DB.SetSync(key, value) })
}

func (g *guardedDB) Delete(key []byte) error {
	return g.guard(func() error { return g.DB.Delete(key) })
}

func (g *guardedDB) DeleteSync(key []byte) error {
	return g.guard(func() error { return g.DB.DeleteSync(key) })
}

func (g *guardedDB) Iterator(start, end []byte) (it dbm.Iterator, err error) {
	err = g.guard(func() error { it, err = g.DB.Iterator(start, end); return err })
	return it, err
}

func (g *guardedDB) ReverseIterator(start, end []byte) (it dbm.Iterator, err error) {
	err = g.guard(func() error { it, err = g.DB.ReverseIterator(start, end); return err })
	return it, err
}

func (g *guardedDB) Compact(start, end []byte) error {
	return g.guard(func() error { return g.DB.Compact(start, end) })
}

func (g *guardedDB) Print() error { return g.guard(g.DB.Print) }

func (g *guardedDB) Stats() (st map[string]string) {
	g.guard(func() error { st = g.DB.Stats(); return nil })
	return st
}

// NewBatch returns a batch whose writes go through the guard. Made on a
// closed store, it is one that only fails.
func (g *guardedDB) NewBatch() dbm.Batch {
	var b dbm.Batch
	if g.guard(func() error { b = g.DB.NewBatch(); return nil }) != nil {
		return closedBatch{}
	}
	return &guardedBatch{Batch: b, db: g}
}

// Close closes the store once the calls in flight are done; it is
// idempotent.
func (g *guardedDB) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.DB.Close()
}

type guardedBatch struct {
	dbm.Batch
	db *guardedDB
}

func (b *guardedBatch) Set(key, value []byte) error {
	return b.db.guard(func() error { return b.Batch.Set(key, value) })
}

func (b *guardedBatch) Delete(key []byte) error {
	return b.db.guard(func() error { return b.Batch.Delete(key) })
}

func (b *guardedBatch) Write() error { return b.db.guard(b.Batch.Write) }

func (b *guardedBatch) WriteSync() error { return b.db.guard(b.Batch.WriteSync) }

// closedBatch is a batch of a closed store.
type closedBatch struct{}

func (closedBatch) Set(_, _ []byte) error { return errStoreClosed }
func (closedBatch) Delete([]byte) error   { return errStoreClosed }
func (closedBatch) Write() error          { return errStoreClosed }
func (closedBatch) WriteSync() error      { return errStoreClosed }
func (closedBatch) Close() error          { return nil }
