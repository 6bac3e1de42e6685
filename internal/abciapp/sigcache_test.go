package abciapp

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

func initChainWith(t *testing.T, a *App, g ledger.Genesis) {
	t.Helper()
	st, _ := json.Marshal(g)
	if _, err := a.InitChain(t.Context(), &abci.InitChainRequest{ChainId: lt.ChainID, AppStateBytes: st}); err != nil {
		t.Fatal(err)
	}
}

func checkTx(t *testing.T, a *App, tx []byte, typ abci.CheckTxType) *abci.CheckTxResponse {
	t.Helper()
	res, err := a.CheckTx(t.Context(), &abci.CheckTxRequest{Tx: tx, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func badSig(tx []byte) []byte {
	b := bytes.Clone(tx)
	b[len(b)-1] ^= 1
	return b
}

// TestCachesDoNotChangeResults applies the same blocks on five nodes whose
// caches of signatures and decoded txs differ: one that checked every tx
// in its mempool first (warm: DeliverTx finds them decoded and verified),
// one that saw none of them (cold: FinalizeBlock decodes and verifies
// them), one whose caches hold a single entry per generation (always
// evicting), and two with no cache at all, decoding every tx each time and
// verifying with crypto/ed25519, of which one checks the txs first. Every
// tx result, every CheckTx answer and every app hash must be the same.
func TestCachesDoNotChangeResults(t *testing.T) {
	carol, dave := lt.NewKey("carol"), lt.NewKey("dave") // dave is never funded
	g := lt.Genesis(1000, "alice", "bob", "carol")
	blocks := [][][]byte{
		{alice.Send(0, bob.Addr, 10), bob.Send(0, alice.Addr, 5), badSig(alice.Send(1, bob.Addr, 1)), []byte("junk"),
			dave.Send(0, alice.Addr, 1), carol.Send(0, dave.Addr, 7)},
		{alice.Send(1, bob.Addr, 2000), alice.Send(1, bob.Addr, 3), alice.Send(2, carol.Addr, 1), alice.Send(2, carol.Addr, 1),
			carol.Tx("elsewhere", 1, 0, &ledger.MsgSend{To: bob.Addr, Amount: 1})},
		{},
		{bob.Send(1, carol.Addr, 1), badSig(bob.Send(2, carol.Addr, 1)), bob.Send(2, carol.Addr, 1), carol.Send(1, alice.Addr, 990)},
	}
	// What the warm nodes' mempools see besides the blocks' txs: txs that
	// never make it into a block.
	extra := [][]byte{alice.Send(9, bob.Addr, 1), carol.Send(1, bob.Addr, 1), badSig(carol.Send(1, bob.Addr, 2))}

	type node struct {
		name  string
		app   *App
		check bool // CheckTx every tx before its block
	}
	var nodes []node
	for _, n := range []struct {
		name  string
		check bool
		setup func(*App)
	}{
		{"warm", true, nil},
		{"cold", false, nil},
		{"evicting", true, func(a *App) { a.sigs = newSigCache(1, 1); a.ledger.Verify, a.ledger.Txs = a.sigs.verify, a.sigs }},
		{"uncached", false, func(a *App) { a.ledger.Verify, a.ledger.Txs = nil, nil }},
		{"uncached, checked", true, func(a *App) { a.ledger.Verify, a.ledger.Txs = nil, nil }},
	} {
		a := openApp(t, t.TempDir())
		if n.setup != nil {
			n.setup(a)
		}
		initChainWith(t, a, g)
		nodes = append(nodes, node{n.name, a, n.check})
	}

	for i, txs := range blocks {
		h := int64(i + 1)
		var wantCheck []*abci.CheckTxResponse
		var want *abci.FinalizeBlockResponse
		for _, n := range nodes {
			if n.check {
				var got []*abci.CheckTxResponse
				for _, tx := range append(append([][]byte{}, txs...), extra...) {
					got = append(got, checkTx(t, n.app, tx, abci.CHECK_TX_TYPE_CHECK))
				}
				if wantCheck == nil {
					wantCheck = got
				} else if !reflect.DeepEqual(got, wantCheck) {
					t.Fatalf("block %d: %s node's CheckTx answers differ:\n%v\nwant\n%v", h, n.name, got, wantCheck)
				}
			}
			res := finalize(t, n.app, h, txs...)
			commit(t, n.app)
			if want == nil {
				want = res
				continue
			}
			if !reflect.DeepEqual(res, want) {
				t.Fatalf("block %d: %s node's results differ from the %s node's:\n%v\nwant\n%v", h, n.name, nodes[0].name, res, want)
			}
		}
		// The blocks must exercise both outcomes.
		if h == 1 && (want.TxResults[0].Code != 0 || want.TxResults[2].Code != ledger.ErrBadSignature.Code) {
			t.Fatalf("block 1: codes %d and %d, want 0 and a bad signature", want.TxResults[0].Code, want.TxResults[2].Code)
		}
	}
	for _, n := range nodes[1:] {
		if got, want := info(t, n.app).LastBlockAppHash, info(t, nodes[0].app).LastBlockAppHash; !bytes.Equal(got, want) {
			t.Fatalf("%s node's app hash %x, want %x", n.name, got, want)
		}
	}
}

// TestRecheckSeesNewState: a tx admitted to the mempool, its signature now
// cached, is checked again against the state after a block, and refused
// when that block used its sequence or the balance it needed.
func TestRecheckSeesNewState(t *testing.T) {
	a := openApp(t, t.TempDir())
	initChain(t, a) // alice and bob hold 1000 each
	first, second := alice.Send(0, bob.Addr, 100), alice.Send(1, bob.Addr, 800)
	for _, tx := range [][]byte{first, second} {
		if res := checkTx(t, a, tx, abci.CHECK_TX_TYPE_CHECK); res.Code != 0 {
			t.Fatalf("CheckTx: %s", res.Log)
		}
	}
	// Another proposer's block spends alice's sequence 0 on another
	// transfer (alice signed two txs with one sequence).
	other := alice.Send(0, bob.Addr, 500)
	if res := finalize(t, a, 1, other); res.TxResults[0].Code != 0 {
		t.Fatalf("block 1: %s", res.TxResults[0].Log)
	}
	commit(t, a)
	if res := checkTx(t, a, first, abci.CHECK_TX_TYPE_RECHECK); res.Code != ledger.ErrBadSequence.Code {
		t.Errorf("recheck of the tx whose sequence the block used: code %d %q, want a bad sequence", res.Code, res.Log)
	}
	// The transfer behind it still has a sequence a block can take (the
	// block used 0, it is 1) and its fee: it stays, though its message now
	// fails (a block charges its fee and sequence, as for any failed
	// message: ledger.TxChecker.Recheck), so that alice's txs behind it
	// are not dropped a sequence ahead.
	if res := checkTx(t, a, second, abci.CHECK_TX_TYPE_RECHECK); res.Code != 0 {
		t.Errorf("recheck of a transfer of 800 from a balance of 500, sequence 1 the next: code %d %q, want it kept", res.Code, res.Log)
	}
	if res := checkTx(t, a, alice.Send(1, bob.Addr, 400), abci.CHECK_TX_TYPE_CHECK); res.Code != ledger.ErrBadSequence.Code {
		t.Errorf("a new tx with the sequence of the one kept: code %d %q, want a bad sequence", res.Code, res.Log)
	}
	// Nor does a cached signature let a refused tx into a block.
	res := finalize(t, a, 2, first, second)
	if res.TxResults[0].Code != ledger.ErrBadSequence.Code || res.TxResults[1].Code != ledger.ErrInsufficientFunds.Code {
		t.Errorf("block 2: codes %d, %d, want a bad sequence and insufficient funds", res.TxResults[0].Code, res.TxResults[1].Code)
	}
}

// TestConcurrentCheckTx: CometBFT's RPC handlers call CheckTx at once; each
// sender's txs, sent in order from its own goroutine, are all admitted.
func TestConcurrentCheckTx(t *testing.T) {
	const senders, each = 8, 10
	names := make([]string, senders)
	for i := range names {
		names[i] = fmt.Sprint("concurrent", i)
	}
	a := openApp(t, t.TempDir())
	initChainWith(t, a, lt.Genesis(1000, names...))
	var wg sync.WaitGroup
	for _, n := range names {
		k := lt.NewKey(n)
		wg.Go(func() {
			for seq := range uint64(each) {
				res, err := a.CheckTx(t.Context(), &abci.CheckTxRequest{Tx: k.Send(seq, bob.Addr, 1)})
				if err != nil || res.Code != 0 {
					t.Errorf("%s seq %d: %v %s", n, seq, err, res.GetLog())
				}
			}
		})
	}
	wg.Wait()
	for _, n := range names {
		if seq, err := a.NextSequence(lt.NewKey(n).Addr); err != nil || seq != each {
			t.Errorf("%s: next sequence %d (%v), want %d", n, seq, err, each)
		}
	}
}

// preverify checks a wire-form tx's signature into c.
func preverify(c *sigCache, raw []byte) {
	if pub, msg, sig, ok := ledger.SignedParts(raw); ok {
		c.verify(pub, msg, sig)
	}
}

// TestSigCacheBounded floods the cache with distinct valid txs from
// distinct keys: it never holds more than its bound, and a key in
// constant use stays.
func TestSigCacheBounded(t *testing.T) {
	const entries, keys = 8, 4
	c := newSigCache(entries, keys)
	kept := alice.Send(0, bob.Addr, 1)
	pub, msg, sig, _ := ledger.SignedParts(kept)
	for i := range 200 {
		preverify(c, lt.NewKey(fmt.Sprint("flood", i)).Send(0, bob.Addr, 1))
		if !c.verify(pub, msg, sig) {
			t.Fatal("valid signature refused")
		}
		if n := c.keys.len(); n > 2*keys {
			t.Fatalf("after %d txs the cache holds %d keys, bound %d", i+1, n, 2*keys)
		}
	}
	if _, ok := c.keys.get([32]byte(pub)); !ok {
		t.Fatal("the key in constant use was evicted")
	}
}

// TestVerifyBlock: preparing a block's txs up front caches the valid
// txs, and only those, and hands each back in order.
func TestVerifyBlock(t *testing.T) {
	c := newSigCache(sigCacheEntries, sigCacheKeys)
	l := ledger.Ledger{Verify: c.verify, Txs: c}
	var good, bad [][]byte
	for i := range 20 {
		good = append(good, alice.Send(uint64(i), bob.Addr, 1))
		bad = append(bad, badSig(bob.Send(uint64(i), alice.Addr, 1)))
	}
	block := append(append([][]byte{[]byte("junk")}, good...), bad...)
	out := c.verifyBlock(block, 4, l.Prepare)
	if n := c.txs.len(); n != len(good) {
		t.Fatalf("cache holds %d txs after a block of %d valid and %d invalid txs", n, len(good), len(bad))
	}
	for _, tx := range good {
		if c.Get(ledger.TxHash(tx)) == nil {
			t.Fatal("a valid tx is not cached")
		}
	}
	if len(out) != len(block) {
		t.Fatalf("verifyBlock handed back %d txs of %d", len(out), len(block))
	}
	if small := c.verifyBlock(good[:3], 4, l.Prepare); small != nil {
		t.Fatalf("a block of 3 txs was shared out: %d prepared", len(small))
	}
}

// BenchmarkFinalizeBlock applies blocks of 1000 transfers from 200 senders
// through the app (Pebble, FinalizeBlock timed, Commit not): "checked"
// after CheckTx admitted every tx, as on a node whose mempool saw them;
// "unseen" without, as for a block replayed while catching up, whose
// txs FinalizeBlock decodes and verifies (on GOMAXPROCS cores: run with
// -cpu 1,2 to compare). The "-decoding" variants have no cache of decoded
// txs (only of signatures), as before it: DeliverTx decodes each tx again.
func BenchmarkFinalizeBlock(b *testing.B) {
	const senders, perBlock = 200, 1000
	keys := make([]lt.Key, senders)
	names := make([]string, senders)
	for i := range keys {
		names[i] = fmt.Sprint("sender", i)
		keys[i] = lt.NewKey(names[i])
	}
	for _, v := range []struct {
		name             string
		checked, txCache bool
	}{{"checked", true, true}, {"unseen", false, true}, {"checked-decoding", true, false}, {"unseen-decoding", false, false}} {
		checked := v.checked
		b.Run(v.name, func(b *testing.B) {
			a, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			if !v.txCache {
				a.ledger.Txs = nil // as before issue 36's tx cache: decode in each use
			}
			st, _ := json.Marshal(lt.Genesis(1<<40, names...))
			if _, err := a.InitChain(b.Context(), &abci.InitChainRequest{ChainId: lt.ChainID, AppStateBytes: st}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var cpu time.Duration // the process's, over FinalizeBlock: load moves it less than wall time
			b.ResetTimer()
			for h := 1; h <= b.N; h++ {
				b.StopTimer()
				txs := make([][]byte, perBlock)
				for i := range txs {
					n := (h-1)*perBlock + i
					txs[i] = keys[n%senders].Send(uint64(n/senders), keys[(n+1)%senders].Addr, 1)
					if checked {
						if res, _ := a.CheckTx(b.Context(), &abci.CheckTxRequest{Tx: txs[i]}); res.Code != 0 {
							b.Fatalf("CheckTx: %s", res.Log)
						}
					}
				}
				b.StartTimer()
				c0 := measure.ProcessCPU()
				res, err := a.FinalizeBlock(b.Context(), &abci.FinalizeBlockRequest{Height: int64(h), Time: lt.BlockTime(int64(h)), Txs: txs})
				cpu += measure.ProcessCPU() - c0
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for i, r := range res.TxResults {
					if r.Code != 0 {
						b.Fatalf("block %d tx %d: %s", h, i, r.Log)
					}
				}
				if _, err := a.Commit(b.Context(), &abci.CommitRequest{}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perBlock), "ns/tx")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*perBlock), "cpu-ns/tx")
		})
	}
}

// countingTxs counts the txs a ledger.TxCache is given, by hash, and its
// lookups.
type countingTxs struct {
	ledger.TxCache
	mu   sync.Mutex
	puts map[[32]byte]int
	gets int
}

func (c *countingTxs) Get(key [32]byte) *ledger.Tx {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.TxCache.Get(key)
}

func (c *countingTxs) Put(key [32]byte, raw []byte, tx *ledger.Tx) {
	c.mu.Lock()
	c.puts[key]++
	c.mu.Unlock()
	c.TxCache.Put(key, raw, tx)
}

// TestTxDecodedOnce: a tx is decoded and verified once on a node, whether
// its mempool saw it first (CheckTx, then a recheck, then DeliverTx) or not
// (FinalizeBlock prepares a block's txs on all cores, then DeliverTx): each
// later use finds it in the cache or is handed it.
func TestTxDecodedOnce(t *testing.T) {
	a := openApp(t, t.TempDir())
	initChainWith(t, a, lt.Genesis(1000, "alice", "bob"))
	count := &countingTxs{TxCache: a.sigs, puts: map[[32]byte]int{}}
	a.ledger.Txs = count

	seen := [][]byte{alice.Send(0, bob.Addr, 1), bob.Send(0, alice.Addr, 1)}
	for _, tx := range seen {
		if res := checkTx(t, a, tx, abci.CHECK_TX_TYPE_CHECK); res.Code != 0 {
			t.Fatalf("CheckTx: %s", res.Log)
		}
		checkTx(t, a, tx, abci.CHECK_TX_TYPE_RECHECK)
	}
	var unseen [][]byte
	for i := range 32 {
		unseen = append(unseen, alice.Send(uint64(i+1), bob.Addr, 1))
	}
	count.gets = 0
	block := append(seen, unseen...)
	for _, r := range finalize(t, a, 1, block...).TxResults {
		if r.Code != 0 {
			t.Fatalf("DeliverTx: %s", r.Log)
		}
	}
	// FinalizeBlock prepares the block's txs on all cores (one lookup
	// each) and hands them to DeliverPrepared, which looks none up again.
	if count.gets != len(block) {
		t.Errorf("FinalizeBlock looked its %d txs up %d times, want once each", len(block), count.gets)
	}
	commit(t, a)
	for i, tx := range append(seen, unseen...) {
		if n := count.puts[ledger.TxHash(tx)]; n != 1 {
			t.Errorf("tx %d decoded and verified %d times, want once", i, n)
		}
	}
}

// TestCheckTxUsesPreparedTx: CheckTx hands the tx it decoded and verified
// before its lock to the check, which does not look it up again (one
// lookup in all, Prepare's, which misses); its answer carries no events,
// and the block's result of the same tx still does.
func TestCheckTxUsesPreparedTx(t *testing.T) {
	a := openApp(t, t.TempDir())
	initChainWith(t, a, lt.Genesis(1000, "alice", "bob"))
	count := &countingTxs{TxCache: a.sigs, puts: map[[32]byte]int{}}
	a.ledger.Txs = count
	tx := alice.Send(0, bob.Addr, 1)
	res := checkTx(t, a, tx, abci.CHECK_TX_TYPE_CHECK)
	if res.Code != 0 || len(res.Events) != 0 {
		t.Fatalf("CheckTx: code %d (%s), %d events; want 0 and none", res.Code, res.Log, len(res.Events))
	}
	if count.gets != 1 || count.puts[ledger.TxHash(tx)] != 1 {
		t.Fatalf("CheckTx looked the tx up %d times and cached it %d times, want once each (Prepare)", count.gets, count.puts[ledger.TxHash(tx)])
	}
	// A second sender's later tx is admitted against the first's state.
	if res := checkTx(t, a, alice.Send(1, bob.Addr, 1), abci.CHECK_TX_TYPE_CHECK); res.Code != 0 {
		t.Fatalf("CheckTx of the next tx: %s", res.Log)
	}
	if res := checkTx(t, a, alice.Send(1, bob.Addr, 1), abci.CHECK_TX_TYPE_CHECK); res.Code != ledger.ErrBadSequence.Code {
		t.Fatalf("CheckTx of a replayed tx: code %d (%s), want a bad sequence", res.Code, res.Log)
	}
	r := finalize(t, a, 1, tx).TxResults[0]
	if r.Code != 0 || len(r.Events) != 1 || r.Events[0].Type != "transfer" {
		t.Fatalf("DeliverTx: code %d (%s), events %v; want one transfer event", r.Code, r.Log, r.Events)
	}
}

// TestTxCacheBounded: the decoded txs' generations hold at most their
// entries and about their bytes, and keep the tx in constant use.
func TestTxCacheBounded(t *testing.T) {
	const entries, maxBytes = 8, 4000
	g := newGenerations[[32]byte, *ledger.Tx](entries).withBytes(maxBytes)
	kept := [32]byte{1}
	g.putSized(kept, &ledger.Tx{}, 100)
	for i := range 200 {
		k := sha256.Sum256(fmt.Append(nil, i))
		g.putSized(k, &ledger.Tx{}, 100+i*10)
		if _, ok := g.get(kept); !ok {
			t.Fatalf("after %d txs the tx in constant use was evicted", i+1)
		}
		if n := g.len(); n > 2*entries {
			t.Fatalf("after %d txs %d held, bound %d", i+1, n, 2*entries)
		}
		var bytes int
		for _, e := range g.cur {
			bytes += e.size
		}
		if bytes != g.curBytes || bytes > maxBytes {
			t.Fatalf("after %d txs the current generation holds %d bytes (counted %d), bound %d", i+1, bytes, g.curBytes, maxBytes)
		}
	}
	big := [32]byte{2}
	g.putSized(big, &ledger.Tx{}, maxBytes+1)
	if _, ok := g.get(big); ok {
		t.Fatal("an entry larger than a generation was kept")
	}
}

// TestCachedTxOutlivesItsBuffer: the caller of CheckTx may reuse the tx's
// buffer once it returns; the decoded tx kept for DeliverTx must not
// change with it.
func TestCachedTxOutlivesItsBuffer(t *testing.T) {
	a := openApp(t, t.TempDir())
	initChainWith(t, a, lt.Genesis(1000, "alice", "bob"))
	tx := alice.Send(0, bob.Addr, 1)
	buf := bytes.Clone(tx)
	if res := checkTx(t, a, buf, abci.CHECK_TX_TYPE_CHECK); res.Code != 0 {
		t.Fatalf("CheckTx: %s", res.Log)
	}
	for i := range buf {
		buf[i] = 0
	}
	if r := finalize(t, a, 1, tx).TxResults[0]; r.Code != 0 {
		t.Fatalf("DeliverTx after the CheckTx buffer was reused: %s", r.Log)
	}
}

// TestVerifyRemembersNoSignature: verifying a new tx's signature by a
// known key costs its check and a lookup of the key, nothing more: no hash
// of the signed bytes and no entry kept for the signature (the tx cache
// keeps the tx it is verified for). A memo of signatures grew by one entry
// (a 32-byte key and its slot) a signature: 40 bytes or more each.
func TestVerifyRemembersNoSignature(t *testing.T) {
	c := newSigCache(sigCacheEntries, sigCacheKeys)
	const runs = 500
	parts := make([][3][]byte, runs)
	for i := range parts {
		pub, msg, sig, _ := ledger.SignedParts(alice.Send(uint64(i), bob.Addr, 1))
		parts[i] = [3][]byte{pub, msg, sig}
	}
	preverify(c, alice.Send(runs, bob.Addr, 1)) // alice's key expanded
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, p := range parts {
		if !c.verify(p[0], p[1], p[2]) {
			t.Fatal("valid signature refused")
		}
	}
	runtime.ReadMemStats(&after)
	if perSig := (after.TotalAlloc - before.TotalAlloc) / runs; perSig > 8 {
		t.Fatalf("verifying a signature by a known key allocates %d bytes, want none kept for it", perSig)
	}
	if n := c.keys.len(); n != 1 {
		t.Fatalf("the cache holds %d keys, want alice's alone", n)
	}
}
