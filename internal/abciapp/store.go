package abciapp

import (
	"github.com/cockroachdb/pebble"

	"github.com/gpunet/gpunet/internal/ledger"
)

// pebbleKV reads committed state from Pebble (a DB or a snapshot).
type pebbleKV struct {
	r pebble.Reader
}

func (p pebbleKV) Get(key []byte) []byte {
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

func (p pebbleKV) Iterate(start, end []byte, fn func(k, v []byte) bool) {
	it, err := p.r.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		panic("app state iteration failed: " + err.Error())
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(it.Key(), it.Value()) {
			return
		}
	}
	if err := it.Error(); err != nil {
		panic("app state iteration failed: " + err.Error())
	}
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
