// Package statestore holds the committed ledger states the benchmarks
// that drive the ledger directly (no consensus) apply blocks to: Pebble
// through abciapp's Store, as a node reads and writes it, or an in-memory
// B-tree, the ledger's own cost with the store's as small as it gets.
//
// ledger.MemKV is not one of them: its Iterate collects and sorts every key
// of the state on each call, so at 100k providers (about a million keys)
// each of the scheduler's index scans would cost a full sort of the state,
// a cost no real node has.
package statestore

import (
	"fmt"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/google/btree"

	"github.com/gpunet/gpunet/internal/abciapp"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Kinds of store Open makes.
const (
	// Pebble is Pebble, the store nodes run on (abciapp), on an in-memory
	// file system: the node's read path without disk noise.
	Pebble = "pebble"
	// BTree is an in-memory B-tree.
	BTree = "btree"
)

// Store is a committed state blocks are applied to.
type Store interface {
	ledger.KV
	// Apply commits a block's changes.
	Apply(changes []ledger.Change) error
	Close() error
}

// Open returns an empty store of the given kind, Pebble or BTree.
func Open(kind string) (Store, error) {
	switch kind {
	case Pebble:
		db, err := abciapp.OpenPebble("", vfs.NewMem(), abciapp.DefaultCacheBytes)
		if err != nil {
			return nil, err
		}
		return NewPebble(db)
	case BTree:
		return &btreeStore{t: btree.NewG(32, func(a, b kvItem) bool { return a.k < b.k })}, nil
	}
	return nil, fmt.Errorf("store %q: want %q or %q", kind, Pebble, BTree)
}

// PebbleStore reads and writes through abciapp's Store, as a node does: a
// block's changes go in one batch, unsynced.
type PebbleStore struct {
	*abciapp.PebbleKV
	s *abciapp.Store
}

// NewPebble opens abciapp's Store on db; closing the store closes db.
func NewPebble(db *pebble.DB) (*PebbleStore, error) {
	s, err := abciapp.OpenStore(db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &PebbleStore{PebbleKV: s.KV(), s: s}, nil
}

// Apply commits changes in one unsynced batch.
func (p *PebbleStore) Apply(changes []ledger.Change) error { return p.s.Commit(false, changes) }

// Close closes the store and its database.
func (p *PebbleStore) Close() error { return p.s.Close() }

type kvItem struct {
	k string
	v []byte
}

// btreeStore is an ordered in-memory KV.
type btreeStore struct{ t *btree.BTreeG[kvItem] }

func (s *btreeStore) Get(key []byte) []byte {
	it, ok := s.t.Get(kvItem{k: string(key)})
	if !ok {
		return nil
	}
	return it.v
}

func (s *btreeStore) Iterate(start, end []byte, fn func(k, v []byte) bool) {
	visit := func(it kvItem) bool { return fn([]byte(it.k), it.v) }
	if end == nil {
		s.t.AscendGreaterOrEqual(kvItem{k: string(start)}, visit)
		return
	}
	s.t.AscendRange(kvItem{k: string(start)}, kvItem{k: string(end)}, visit)
}

func (s *btreeStore) Apply(changes []ledger.Change) error {
	for _, c := range changes {
		if c.Value == nil {
			s.t.Delete(kvItem{k: string(c.Key)})
		} else {
			s.t.ReplaceOrInsert(kvItem{k: string(c.Key), v: c.Value})
		}
	}
	return nil
}

func (s *btreeStore) Close() error { return nil }

// CountKeys returns the number of keys in kv.
func CountKeys(kv ledger.KV) int {
	n := 0
	kv.Iterate(nil, nil, func(_, _ []byte) bool { n++; return true })
	return n
}
