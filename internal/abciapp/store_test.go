package abciapp

import (
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

// TestPebbleKVSeesWritesAfterReset: a reused iterator must not serve the DB
// as it was before a write (Pebble iterators are point-in-time views).
func TestPebbleKVSeesWritesAfterReset(t *testing.T) {
	db, err := OpenPebble("", vfs.NewMem(), DefaultCacheBytes)
	if err != nil {
		t.Fatal(err)
	}
	kv := NewPebbleKV(db)
	defer func() { kv.Reset(); db.Close() }()
	count := func() int {
		n := 0
		kv.Iterate([]byte("k"), []byte("l"), func(_, _ []byte) bool { n++; return true })
		return n
	}
	if err := db.Set([]byte("k0"), []byte("v"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	kv.Reset()
	for i := 1; i <= 5; i++ {
		if got := count(); got != i {
			t.Fatalf("after %d writes Iterate sees %d keys", i, got)
		}
		// A write while an iteration is in flight: that iterator must
		// not be pooled for the next scan.
		kv.Iterate([]byte("k"), []byte("l"), func(_, _ []byte) bool {
			if err := db.Set([]byte{'k', byte('0' + i)}, []byte("v"), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			if err := kv.Reset(); err != nil {
				t.Fatal(err)
			}
			return false
		})
	}
}
