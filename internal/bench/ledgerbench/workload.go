package ledgerbench

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"sync"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Each sender starts with this many usync: far more than any run spends.
const senderBalance = 1 << 50

// Workload is a set of funded senders that sign transfers round-robin: tx i
// is from sender i mod S with sequence i div S, paying 1usync to the next
// sender and a fee of 1usync. Consecutive txs therefore come from different
// senders, so every block carries many of them, and each sender's txs reach
// the mempool in sequence order as long as one goroutine submits them all.
type Workload struct {
	keys  []ed25519.PrivateKey
	addrs []address.Address
}

// NewWorkload derives the keys of the given number of sender accounts,
// the same on every run.
func NewWorkload(senders int) *Workload {
	w := &Workload{}
	for i := range senders {
		seed := sha256.Sum256([]byte("gpunet-bench/sender/" + strconv.Itoa(i)))
		priv := ed25519.NewKeyFromSeed(seed[:])
		w.keys = append(w.keys, priv)
		w.addrs = append(w.addrs, address.FromPubKey(priv.Public().(ed25519.PublicKey)))
	}
	return w
}

// Senders returns the number of senders.
func (w *Workload) Senders() int { return len(w.keys) }

// Genesis funds every sender.
func (w *Workload) Genesis() ledger.Genesis {
	g := ledger.Genesis{Params: ledger.DefaultParams()}
	for _, a := range w.addrs {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: a, Balance: senderBalance})
	}
	return g
}

// Sender returns the index of the sender of tx i.
func (w *Workload) Sender(i int) int { return i % len(w.keys) }

// Txs signs txs [from, from+n) of the workload, on all cores.
func (w *Workload) Txs(chainID string, from, n int) [][]byte {
	out := make([][]byte, n)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for j := g; j < n; j += workers {
				i := from + j
				s := i % len(w.keys)
				tx := &ledger.Tx{
					ChainID:  chainID,
					Sequence: uint64(i / len(w.keys)),
					Fee:      market.TxFee,
					Msg:      &ledger.MsgSend{To: w.addrs[(s+1)%len(w.addrs)], Amount: 1},
				}
				if err := tx.Sign(w.keys[s]); err != nil {
					panic(err) // only for a malformed key, which NewWorkload never makes
				}
				raw, err := tx.Encode()
				if err != nil {
					panic(err)
				}
				out[j] = raw
			}
		})
	}
	wg.Wait()
	return out
}

// KVStoreTxs returns, for each tx in like, a kvstore tx of exactly the same
// length: "KEY=VALUE" with a random 32-hex-digit key (so no two collide) and
// a random hex value filling the rest.
func KVStoreTxs(like [][]byte) ([][]byte, error) {
	out := make([][]byte, len(like))
	for i, l := range like {
		n := len(l)
		if n < 34 {
			return nil, fmt.Errorf("tx %d has %d bytes; a kvstore tx needs at least 34", i, n)
		}
		rnd := make([]byte, n/2+1)
		rand.Read(rnd)
		h := hex.EncodeToString(rnd) // at least n-1 hex digits
		tx := make([]byte, 0, n)
		tx = append(tx, h[:32]...)
		tx = append(tx, '=')
		tx = append(tx, h[32:32+n-33]...)
		out[i] = tx
	}
	return out, nil
}
