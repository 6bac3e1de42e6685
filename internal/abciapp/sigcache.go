package abciapp

import (
	"crypto/ed25519"
	"crypto/sha256"
	"sync"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Bounds of the signature cache: entries per generation, of which it keeps
// two. A verified signature costs its 32-byte key and a map slot (about
// 8 MB at most for both generations); an expanded public key about 1.5 KiB
// (about 12 MB at most). Both are far above what a node uses between two
// looks at an entry: a block's txs, checked and then delivered.
const (
	sigCacheEntries = 1 << 16
	sigCacheKeys    = 1 << 12
)

// sigCache verifies ed25519 signatures for the ledger. It remembers
// signatures already verified (normally by CheckTx) so that FinalizeBlock
// does not verify them again, and keeps senders' public keys expanded
// (curve25519-voi's precomputation, about 40% faster than crypto/ed25519).
// Its answers are exactly crypto/ed25519.Verify's (VerifyOptionsStdLib;
// TestSigCacheMatchesStdlib and FuzzSigCacheMatchesStdlib check it): it
// holds only successes, keyed by a hash of everything the answer depends
// on, so what it holds changes how fast a node answers, never what.
//
// Batch verification (curve25519-voi's BatchVerifier) is not used: it
// checks the cofactored equation, which accepts some signatures that
// crypto/ed25519's cofactorless one refuses, so a node verifying a block in
// a batch could accept a crafted tx that a node whose cache answered
// refused. voi refuses to batch with VerifyOptionsStdLib for that reason.
type sigCache struct {
	mu   sync.Mutex
	ok   generations[[32]byte, struct{}]
	keys generations[[32]byte, *voi.ExpandedPublicKey]
}

var stdlibVerify = &voi.Options{Verify: voi.VerifyOptionsStdLib}

func newSigCache(entries, keys int) *sigCache {
	return &sigCache{ok: newGenerations[[32]byte, struct{}](entries), keys: newGenerations[[32]byte, *voi.ExpandedPublicKey](keys)}
}

// sigKey is what the answer for (pub, msg, sig) is remembered under. pub
// and sig have fixed lengths, so the concatenation is unambiguous.
func sigKey(pub ed25519.PublicKey, msg, sig []byte) [32]byte {
	h := sha256.New()
	h.Write(pub)
	h.Write(sig)
	h.Write(msg)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// verify is the ledger's Verifier.
func (c *sigCache) verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	k := sigKey(pub, msg, sig)
	c.mu.Lock()
	_, hit := c.ok.get(k)
	c.mu.Unlock()
	return hit || c.verifyMiss(k, pub, msg, sig)
}

// verifyMiss verifies a signature the cache does not hold and remembers it
// if it is valid.
func (c *sigCache) verifyMiss(k [32]byte, pub ed25519.PublicKey, msg, sig []byte) bool {
	var pk [32]byte
	copy(pk[:], pub)
	c.mu.Lock()
	epk, _ := c.keys.get(pk)
	c.mu.Unlock()
	if epk == nil {
		var err error
		if epk, err = voi.NewExpandedPublicKey(voi.PublicKey(pub)); err != nil {
			// Not a point voi can expand: fall back to the reference.
			return ed25519.Verify(pub, msg, sig)
		}
	}
	if !voi.VerifyExpandedWithOptions(epk, msg, sig, stdlibVerify) {
		return false
	}
	c.mu.Lock()
	c.ok.put(k, struct{}{})
	c.keys.put(pk, epk)
	c.mu.Unlock()
	return true
}

// preverify checks a wire-form tx's signature into the cache, so that the
// ledger's own check of it then costs a lookup. Callers run it outside
// their locks (CheckTx) or for many txs at once (verifyBlock).
func (c *sigCache) preverify(raw []byte) {
	if pub, msg, sig, ok := ledger.SignedParts(raw); ok {
		c.verify(pub, msg, sig)
	}
}

// verifyBlock verifies, on up to workers cores, the signatures of a block's
// txs that the cache does not hold (a block from another proposer whose txs
// this node's mempool never saw, or one replayed while catching up). It
// only fills the cache: DeliverTx then verifies each tx in order as always,
// and finds the answer. When every signature is cached already (the usual
// case), its cost is a hash and a lookup per tx, spread over the workers.
func (c *sigCache) verifyBlock(txs [][]byte, workers int) {
	// More txs than a generation holds would push the first ones out
	// before DeliverTx reads them: look only at those that stay.
	txs = txs[:min(len(txs), c.ok.max)]
	workers = min(workers, len(txs)/minTxsPerWorker)
	if workers < 2 {
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		part := txs[w*len(txs)/workers : (w+1)*len(txs)/workers]
		wg.Go(func() {
			for _, raw := range part {
				c.preverify(raw)
			}
		})
	}
	wg.Wait()
}

// minTxsPerWorker keeps verifyBlock from starting a goroutine for less work
// than it costs.
const minTxsPerWorker = 8

// generations is a map bounded to 2×max entries that keeps what is in use:
// entries go into the current generation; when it is full it becomes the
// old one and the old one is dropped. An entry found in the old generation
// moves back into the current one. A flood of new entries therefore costs
// the cache what was not used in the last max insertions, and never grows
// it past its bound. Not safe for concurrent use.
type generations[K comparable, V any] struct {
	max      int
	cur, old map[K]V
}

func newGenerations[K comparable, V any](max int) generations[K, V] {
	return generations[K, V]{max: max, cur: make(map[K]V)}
}

func (g *generations[K, V]) get(k K) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.old[k]
	if ok {
		delete(g.old, k)
		g.put(k, v)
	}
	return v, ok
}

func (g *generations[K, V]) put(k K, v V) {
	if _, ok := g.cur[k]; !ok && len(g.cur) >= g.max {
		g.old, g.cur = g.cur, make(map[K]V, len(g.cur))
	}
	g.cur[k] = v
}

func (g *generations[K, V]) len() int { return len(g.cur) + len(g.old) }
