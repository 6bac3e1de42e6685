// Package market is the synthetic chain population the benchmarks that
// drive the ledger directly share: deterministic account keys, txs signed
// on all cores, and a seeded market of providers (CPU-only machines and
// eight GPU classes, varied sizes, asks, regions, executors and job slots)
// and of jobs (CPU wasm jobs, GPU jobs naming one or two classes or taking
// any, replicated jobs). The same seed gives the same market on every run
// and at every provider count.
package market

import (
	"crypto/ed25519"
	"crypto/sha256"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Key is a deterministic account key.
type Key struct {
	Priv ed25519.PrivateKey
	Addr address.Address
}

// Keys derives n keys named prefix/i, on all cores: the same on every run.
func Keys(prefix string, n int) []Key {
	out := make([]Key, n)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := g; i < n; i += workers {
				seed := sha256.Sum256([]byte("gpunet-bench/" + prefix + "/" + strconv.Itoa(i)))
				priv := ed25519.NewKeyFromSeed(seed[:])
				out[i] = Key{Priv: priv, Addr: address.FromPubKey(priv.Public().(ed25519.PublicKey))}
			}
		})
	}
	wg.Wait()
	return out
}

// Tx is one tx to sign: Msg from Key, with sequence Seq.
type Tx struct {
	Key *Key
	Seq uint64
	Msg ledger.Msg
}

// TxFee is the fee of every tx the benchmarks sign themselves: the
// params.min_fee of their genesis, which keeps the default's (chainclient
// pays it by itself for the txs it sends).
var TxFee = ledger.DefaultParams().MinFee

// SignAll signs and encodes txs on all cores, in order.
func SignAll(chainID string, txs []Tx) ([][]byte, error) {
	out := make([][]byte, len(txs))
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for g := range workers {
		wg.Go(func() {
			for i := g; i < len(txs); i += workers {
				t := &ledger.Tx{ChainID: chainID, Sequence: txs[i].Seq, Fee: TxFee, Msg: txs[i].Msg}
				if err := t.Sign(txs[i].Key.Priv); err != nil {
					errs[g] = err
					return
				}
				raw, err := t.Encode()
				if err != nil {
					errs[g] = err
					return
				}
				out[i] = raw
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AgeRecipient is a syntactically valid age X25519 recipient named by name.
func AgeRecipient(name string) string {
	k := sha256.Sum256([]byte("gpunet-bench/age/" + name))
	s, err := address.EncodeBech32("age", k[:])
	if err != nil {
		panic(err)
	}
	return s
}

// Between draws a number in [lo, hi].
func Between(r *rand.Rand, lo, hi uint64) uint64 { return lo + r.Uint64N(hi-lo+1) }

// pick returns an index drawn with the given weights.
func pick(r *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	x := r.IntN(total)
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}
