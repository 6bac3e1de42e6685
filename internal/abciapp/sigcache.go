package abciapp

import (
	"crypto/ed25519"
	"sync"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Bounds of the cache: entries per generation, of which it keeps two. A
// decoded tx costs what txCacheBytes says; an expanded public key about
// 1.5 KiB (about 12 MB at most). Both are far above what a node uses
// between two looks at an entry: a block's txs, checked and then
// delivered.
const (
	sigCacheEntries = 1 << 16
	sigCacheKeys    = 1 << 12
	// Decoded txs: at most sigCacheEntries a generation, and at most
	// txCacheBytes (a tx costs twice its wire size and txCost: its
	// decoded message, with the copies of its strings and key, is about
	// as large as its bytes, counted twice to leave room for Go's
	// overheads; at most 64 MiB for both generations, about 30 000
	// transfers each).
	txCacheBytes = 32 << 20
	txCost       = 256
)

// sigCache verifies ed25519 signatures for the ledger and remembers the
// txs it decoded and verified (ledger.TxCache). Txs are decoded and
// verified once, normally by CheckTx (outside its lock) or by
// FinalizeBlock on all cores, and found by the hash of their bytes in each
// recheck and in DeliverTx, which neither decode nor verify them again.
// It keeps senders' public keys expanded (curve25519-voi's precomputation,
// about 40% faster than crypto/ed25519). Its answers are exactly
// crypto/ed25519.Verify's (VerifyOptionsStdLib; TestSigCacheMatchesStdlib
// and FuzzSigCacheMatchesStdlib check it), so what it holds changes how
// fast a node answers, never what (TestCachesDoNotChangeResults).
//
// It does not remember verified signatures apart from the txs that carry
// them: the ledger verifies a signature only for a tx the tx cache does
// not hold, and then puts the tx in it, so a memo of signatures answered
// only for txs the tx cache had dropped (by its byte bound), at the cost of
// a SHA-256 of the signed bytes and two map operations under the mutex for
// every new tx (issue 36).
//
// Batch verification (curve25519-voi's BatchVerifier) is not used: it
// checks the cofactored equation, which accepts some signatures that
// crypto/ed25519's cofactorless one refuses, so a node verifying a block in
// a batch could accept a crafted tx that a node whose cache answered
// refused. voi refuses to batch with VerifyOptionsStdLib for that reason.
type sigCache struct {
	mu   sync.Mutex
	keys generations[[32]byte, *voi.ExpandedPublicKey]
	txs  generations[[32]byte, *ledger.Tx] // by ledger.TxHash
}

var stdlibVerify = &voi.Options{Verify: voi.VerifyOptionsStdLib}

func newSigCache(entries, keys int) *sigCache {
	return &sigCache{
		keys: newGenerations[[32]byte, *voi.ExpandedPublicKey](keys),
		txs:  newGenerations[[32]byte, *ledger.Tx](entries).withBytes(txCacheBytes),
	}
}

// Get implements ledger.TxCache.
func (c *sigCache) Get(k [32]byte) *ledger.Tx {
	c.mu.Lock()
	tx, _ := c.txs.get(k)
	c.mu.Unlock()
	return tx
}

// Put implements ledger.TxCache.
func (c *sigCache) Put(k [32]byte, raw []byte, tx *ledger.Tx) {
	c.mu.Lock()
	c.txs.putSized(k, tx, 2*len(raw)+txCost)
	c.mu.Unlock()
}

// verify is the ledger's Verifier. It remembers the expanded key of a
// signature that verifies.
func (c *sigCache) verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	var pk [32]byte
	copy(pk[:], pub)
	c.mu.Lock()
	epk, known := c.keys.get(pk) // a hit in the old generation moves it to the current one
	c.mu.Unlock()
	if !known {
		var err error
		if epk, err = voi.NewExpandedPublicKey(voi.PublicKey(pub)); err != nil {
			// Not a point voi can expand: fall back to the reference.
			return ed25519.Verify(pub, msg, sig)
		}
	}
	if !voi.VerifyExpandedWithOptions(epk, msg, sig, stdlibVerify) {
		return false
	}
	if !known {
		c.mu.Lock()
		c.keys.put(pk, epk)
		c.mu.Unlock()
	}
	return true
}

// verifyBlock runs prepare (ledger.Ledger.Prepare: decode and verify,
// into the cache) on up to workers cores for a block's txs (the cache does
// not hold those of a block from another proposer whose txs this node's
// mempool never saw, or one replayed while catching up) and returns what
// it made of each, in order, for DeliverPrepared: DeliverTx then checks
// each tx in order as always, without decoding, verifying or looking it up
// again. When every tx is cached already (the usual case), its cost is a
// hash and a lookup per tx, spread over the workers. It returns nil for a
// block too small to share out, and at most as many txs as a generation
// holds (a bound on what a block can make it keep).
func (c *sigCache) verifyBlock(txs [][]byte, workers int, prepare func([]byte) ledger.PreparedTx) []ledger.PreparedTx {
	txs = txs[:min(len(txs), c.txs.max)]
	workers = min(workers, len(txs)/minTxsPerWorker)
	if workers < 2 {
		return nil
	}
	out := make([]ledger.PreparedTx, len(txs))
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(txs)/workers, (w+1)*len(txs)/workers
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				out[i] = prepare(txs[i])
			}
		})
	}
	wg.Wait()
	return out
}

// minTxsPerWorker keeps verifyBlock from starting a goroutine for less work
// than it costs.
const minTxsPerWorker = 8

// generations is a map bounded to 2×max entries (and, withBytes, to about
// 2×maxBytes of the sizes entries are put with) that keeps what is in use:
// entries go into the current generation; when it is full it becomes the
// old one and the old one is dropped. An entry found in the old generation
// moves back into the current one. A flood of new entries therefore costs
// the cache what was not used in the last max insertions, and never grows
// it past its bound. Not safe for concurrent use.
type generations[K comparable, V any] struct {
	max      int
	cur, old map[K]sized[V]
	maxBytes int // 0: entries are not sized
	curBytes int
}

type sized[V any] struct {
	v    V
	size int
}

func newGenerations[K comparable, V any](max int) generations[K, V] {
	return generations[K, V]{max: max, cur: make(map[K]sized[V])}
}

// withBytes bounds the current generation's entries to maxBytes in all as
// well (putSized says how large each is).
func (g generations[K, V]) withBytes(maxBytes int) generations[K, V] {
	g.maxBytes = maxBytes
	return g
}

func (g *generations[K, V]) get(k K) (V, bool) {
	if e, ok := g.cur[k]; ok {
		return e.v, true
	}
	e, ok := g.old[k]
	if ok {
		delete(g.old, k)
		g.putSized(k, e.v, e.size)
	}
	return e.v, ok
}

func (g *generations[K, V]) put(k K, v V) { g.putSized(k, v, 0) }

// putSized puts k; size counts against maxBytes. An entry larger than
// maxBytes alone is not kept.
func (g *generations[K, V]) putSized(k K, v V, size int) {
	if g.maxBytes > 0 && size > g.maxBytes {
		return
	}
	old, ok := g.cur[k]
	if ok {
		g.curBytes -= old.size
	} else if len(g.cur) >= g.max || (g.maxBytes > 0 && g.curBytes+size > g.maxBytes) {
		g.old, g.cur, g.curBytes = g.cur, make(map[K]sized[V], len(g.cur)), 0
	}
	g.cur[k] = sized[V]{v, size}
	g.curBytes += size
}

// drop forgets k.
func (g *generations[K, V]) drop(k K) {
	if e, ok := g.cur[k]; ok {
		g.curBytes -= e.size
		delete(g.cur, k)
	}
	delete(g.old, k)
}

// clear forgets every entry.
func (g *generations[K, V]) clear() {
	g.cur, g.old, g.curBytes = make(map[K]sized[V]), nil, 0
}

func (g *generations[K, V]) len() int { return len(g.cur) + len(g.old) }
