package abciapp

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/gpunet/gpunet/internal/ledger"
)

func openMemStore(t *testing.T, fs vfs.FS) *Store {
	t.Helper()
	db, err := OpenPebble("", fs, DefaultCacheBytes)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func set(k, v string) ledger.Change { return ledger.Change{Key: []byte(k), Value: []byte(v)} }

// TestPebbleKVSeesWritesAfterReset: a reused iterator must not serve the DB
// as it was before a write (Pebble iterators are point-in-time views).
func TestPebbleKVSeesWritesAfterReset(t *testing.T) {
	s := openMemStore(t, vfs.NewMem())
	defer s.Close()
	kv := s.KV()
	count := func() int {
		n := 0
		kv.Iterate([]byte("k"), []byte("l"), func(_, _ []byte) bool { n++; return true })
		return n
	}
	if err := s.Commit(false, []ledger.Change{set("k0", "v")}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if got := count(); got != i {
			t.Fatalf("after %d writes Iterate sees %d keys", i, got)
		}
		// A write while an iteration is in flight: that iterator must
		// not be pooled for the next scan.
		kv.Iterate([]byte("k"), []byte("l"), func(_, _ []byte) bool {
			if err := s.Commit(false, []ledger.Change{set(fmt.Sprintf("k%d", i), "v")}); err != nil {
				t.Fatal(err)
			}
			return false
		})
	}
}

// TestStoreMatchesModel: random blocks of writes to the scheduler index and
// to other keys; every Get and every scan (inside the index, across it,
// unbounded) reads what a plain map says, on the committed state, on views
// taken between blocks, and after reopening the store.
// It runs with the value cache's own bounds and with a cache of a few
// entries, which drops values all the time.
func TestStoreMatchesModel(t *testing.T) {
	for _, c := range []struct {
		name           string
		entries, bytes int
	}{{"default cache", valueCacheEntries, valueCacheBytes}, {"tiny cache", 4, 256}} {
		t.Run(c.name, func(t *testing.T) { storeMatchesModel(t, c.entries, c.bytes) })
	}
}

func storeMatchesModel(t *testing.T, cacheEntries, cacheBytes int) {
	fs := vfs.NewMem()
	s := openMemStore(t, fs)
	s.kv.cache = newValueCache(cacheEntries, cacheBytes)
	rng := rand.New(rand.NewPCG(1, 2))
	prefixes := []string{"pidx/a/", "pidx/b/", "pcls/", "acct/", "job/", "pidy/"}
	key := func() string { return fmt.Sprintf("%s%03d", prefixes[rng.IntN(len(prefixes))], rng.IntN(200)) }
	model := map[string]string{}
	type view struct {
		kv      *PebbleKV
		release func()
		model   map[string]string
	}
	var views []view
	check := func(kv ledger.KV, m map[string]string, what string) {
		t.Helper()
		for range 50 {
			k := key()
			if got := kv.Get([]byte(k)); string(got) != m[k] || (got == nil) != (m[k] == "") {
				t.Fatalf("%s: Get(%s) = %q, want %q", what, k, got, m[k])
			}
		}
		ranges := [][2][]byte{{[]byte("pidx/"), []byte("pidx0")}, {[]byte("pidx/a/050"), []byte("pidx/b/100")}, {[]byte("pcls/"), []byte("pcls0")},
			{[]byte("a"), []byte("q")}, {[]byte("pidx/b/"), nil}, {nil, nil}, {[]byte("pidx/a/"), []byte("pidx/a0")}}
		for _, r := range ranges {
			var want []string
			for k := range m {
				if k >= string(r[0]) && (r[1] == nil || k < string(r[1])) {
					want = append(want, k+"="+m[k])
				}
			}
			slices.Sort(want)
			var got []string
			kv.Iterate(r[0], r[1], func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true })
			if !slices.Equal(got, want) {
				t.Fatalf("%s: Iterate(%q, %q) = %v, want %v", what, r[0], r[1], got, want)
			}
		}
	}
	for block := range 60 {
		var changes []ledger.Change
		for range 1 + rng.IntN(40) {
			k := key()
			if rng.IntN(3) == 0 {
				changes = append(changes, ledger.Change{Key: []byte(k)})
				delete(model, k)
			} else {
				v := fmt.Sprintf("v%d.%d", block, rng.IntN(1000))
				changes = append(changes, set(k, v))
				model[k] = v
			}
		}
		if err := s.Commit(block%2 == 0, changes); err != nil {
			t.Fatal(err)
		}
		check(s.KV(), model, fmt.Sprintf("block %d", block))
		for i, v := range views {
			check(v.kv, v.model, fmt.Sprintf("block %d, view %d", block, i))
		}
		if block%10 == 0 {
			kv, release := s.View()
			views = append(views, view{kv, release, maps(model)})
		}
	}
	for _, v := range views {
		v.release()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMemStore(t, fs)
	defer s.Close()
	check(s.KV(), model, "reopened")
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestRangeInIndex(t *testing.T) {
	for _, c := range []struct {
		start, end string
		want       bool
	}{
		{"pidx/", "pidx0", true}, {"pidx/cpu/", "pidx/cpu0", true}, {"pidx/", "pidy", false},
		{"pid", "pidx0", false}, {"pcls/", "pcls0", true}, {"pidx/x", "", false},
	} {
		var end []byte
		if c.end != "" {
			end = []byte(c.end)
		}
		if got := rangeInIndex([]byte(c.start), end); got != c.want {
			t.Errorf("rangeInIndex(%q, %q) = %v", c.start, c.end, got)
		}
	}
	if !bytes.Equal(prefixEnd([]byte("pidx/")), []byte("pidx0")) {
		t.Fatal("prefixEnd")
	}
}

// TestOpenRefusesOldRecords: a state written with JSON records (before the
// binary encoding) is refused when the app opens, with a message that says
// what to do.
func TestOpenRefusesOldRecords(t *testing.T) {
	dir := t.TempDir()
	db, err := OpenPebble(dir, nil, DefaultCacheBytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("prov/\x01\x02"), []byte(`{"address":"gpu1…"}`), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "older gpunet") || !strings.Contains(err.Error(), "new home") {
		t.Fatalf("open: %v", err)
	}
	// An empty state opens.
	a, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
}
