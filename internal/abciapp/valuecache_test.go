package abciapp

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestValueCacheWritesThrough: the committed state's reads are served from
// the cache after the first, and a commit's sets and deletes replace what
// it holds (a key read while absent included).
func TestValueCacheWritesThrough(t *testing.T) {
	s := openMemStore(t, vfs.NewMem())
	defer s.Close()
	kv := s.KV()
	commit := func(ch ...ledger.Change) {
		t.Helper()
		if err := s.Commit(false, ch); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(k, want string) {
		t.Helper()
		for range 2 { // a miss, then a hit
			if got := kv.Get([]byte(k)); string(got) != want || (got == nil) != (want == "") {
				t.Fatalf("Get(%s) = %q, want %q", k, got, want)
			}
		}
		if _, ok, _ := kv.cache.get([]byte(k)); !ok {
			t.Fatalf("%s not cached after a read", k)
		}
	}
	commit(set("acct/a", "1"))
	expect("acct/a", "1")
	expect("acct/b", "") // absent: cached as absent
	commit(set("acct/a", "2"), set("acct/b", "3"))
	expect("acct/a", "2")
	expect("acct/b", "3")
	commit(ledger.Change{Key: []byte("acct/a")})
	expect("acct/a", "")
	// A value too large to keep is read from Pebble every time.
	big := string(make([]byte, valueCacheMaxValue+1))
	commit(set("blob/x", big))
	if got := kv.Get([]byte("blob/x")); string(got) != big {
		t.Fatalf("large value read back as %d bytes", len(got))
	}
	if _, ok, _ := kv.cache.get([]byte("blob/x")); ok {
		t.Error("a value over valueCacheMaxValue was cached")
	}
}

// TestValueCacheDropsReadsAcrossCommit: a read that missed the cache and
// went to Pebble before a commit must not put what it found after the
// commit: it is the value the commit replaced.
func TestValueCacheDropsReadsAcrossCommit(t *testing.T) {
	s := openMemStore(t, vfs.NewMem())
	defer s.Close()
	kv := s.KV()
	if err := s.Commit(false, []ledger.Change{set("acct/a", "old")}); err != nil {
		t.Fatal(err)
	}
	kv.cache.clear()
	_, ok, epoch := kv.cache.get([]byte("acct/a"))
	if ok {
		t.Fatal("cached after clear")
	}
	stale := kv.get([]byte("acct/a")) // the read, before the commit
	if err := s.Commit(false, []ledger.Change{set("acct/a", "new")}); err != nil {
		t.Fatal(err)
	}
	kv.cache.put([]byte("acct/a"), stale, epoch) // it comes back late
	if got := kv.Get([]byte("acct/a")); string(got) != "new" {
		t.Fatalf("Get = %q after a late put of %q, want %q", got, stale, "new")
	}
}

// TestValueCacheBounded: however many keys are read, the cache holds at
// most two generations of its bounds.
func TestValueCacheBounded(t *testing.T) {
	c := newValueCache(100, 1<<20)
	for i := range 10_000 {
		_, _, e := c.get(fmt.Appendf(nil, "k%05d", i))
		c.put(fmt.Appendf(nil, "k%05d", i), []byte("v"), e)
	}
	if n := c.g.len(); n > 200 {
		t.Errorf("%d entries, bound 2×100", n)
	}
	c = newValueCache(1<<16, 10_000)
	for i := range 1000 {
		_, _, e := c.get(fmt.Appendf(nil, "k%05d", i))
		c.put(fmt.Appendf(nil, "k%05d", i), make([]byte, 1000), e)
	}
	if n := c.g.len(); n > 2*10_000/(1000+6+valueCacheOverhead)+2 {
		t.Errorf("%d entries of 1000 bytes, bound 2×10 000 bytes", n)
	}
}

// TestValueCacheClearedByRestore: what a restore writes to the DB directly
// is what the committed state reads after it, not what was cached.
func TestValueCacheClearedByRestore(t *testing.T) {
	s := openMemStore(t, vfs.NewMem())
	defer s.Close()
	if err := s.Commit(false, []ledger.Change{set("acct/a", "before")}); err != nil {
		t.Fatal(err)
	}
	if got := s.KV().Get([]byte("acct/a")); string(got) != "before" {
		t.Fatalf("Get = %q", got)
	}
	if err := s.db.Set([]byte("acct/a"), []byte("restored"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.reload(); err != nil {
		t.Fatal(err)
	}
	if got := s.KV().Get([]byte("acct/a")); string(got) != "restored" {
		t.Fatalf("Get = %q after a restore, want %q", got, "restored")
	}
}

// TestValueCacheConcurrentReads: readers of the committed state while
// blocks are committed never see a key go back to an older value, whether
// their reads hit the cache or went to Pebble (run it with -race too).
func TestValueCacheConcurrentReads(t *testing.T) {
	s := openMemStore(t, vfs.NewMem())
	defer s.Close()
	kv := s.KV()
	keys := [][]byte{[]byte("acct/a"), []byte("acct/b"), []byte("acct/c")}
	const blocks = 300
	done := make(chan struct{})
	errs := make(chan error, 4)
	for r := range 4 {
		go func() {
			seen := make([]int, len(keys))
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				i := r % len(keys)
				r++
				if r%7 == 0 {
					kv.cache.clear() // force reads through Pebble now and then
				}
				var n int
				if v := kv.Get(keys[i]); v != nil {
					fmt.Sscanf(string(v), "%d", &n)
				}
				if n < seen[i] {
					errs <- fmt.Errorf("%s went back from %d to %d", keys[i], seen[i], n)
					return
				}
				seen[i] = n
			}
		}()
	}
	for b := 1; b <= blocks; b++ {
		var ch []ledger.Change
		for _, k := range keys {
			ch = append(ch, ledger.Change{Key: k, Value: fmt.Appendf(nil, "%d", b)})
		}
		if err := s.Commit(false, ch); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for _, k := range keys {
		if got := string(kv.Get(k)); got != fmt.Sprint(blocks) {
			t.Errorf("%s = %q after %d blocks", k, got, blocks)
		}
	}
}
