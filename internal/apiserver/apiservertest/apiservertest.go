// Package apiservertest serves the node's real API routes (package
// apiserver, and the blob gateway) over an in-memory ledger, for tests of
// the clients (chainclient, jobclient, the provider agent) that want the
// server's real answers without a consensus engine: every tx that passes
// CheckTx is applied at once as a block of its own.
package apiservertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// Chain is an apiserver.Chain over an in-memory ledger (ledgertest.Chain).
// A broadcast tx is checked as a mempool would (a rejection has height 0)
// and, if it passes, applied as the next block. Its methods may be called
// from several goroutines at once.
type Chain struct {
	tb     testing.TB
	mu     sync.Mutex
	c      *lt.Chain
	blocks []*apiwire.Block
	txs    map[string]*apiwire.TxResult
}

var _ apiserver.Chain = (*Chain)(nil)

// NewChain returns a chain started from g, with chain id ledgertest.ChainID.
func NewChain(tb testing.TB, g ledger.Genesis) *Chain {
	tb.Helper()
	return &Chain{tb: tb, c: lt.NewChain(tb, g), txs: map[string]*apiwire.TxResult{}}
}

// SetAttest sets the verifier of TEE evidence the chain's blocks use
// (attest.LedgerVerifier, as a node's), for tests that attest providers.
func (c *Chain) SetAttest(v ledger.AttestVerifier) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.c.L.Attest = v
}

// Send applies msg from k, with k's next sequence, as a block, and fails
// the test if the ledger refuses it.
func (c *Chain) Send(k lt.Key, msg ledger.Msg) *apiwire.TxResult {
	c.tb.Helper()
	seq, err := c.NextSequence(k.Addr)
	if err != nil {
		c.tb.Fatal(err)
	}
	res := c.Apply(k.Tx(lt.ChainID, seq, 0, msg))
	if res.Code != 0 {
		c.tb.Fatalf("%T from %s: code %d: %s", msg, k.Addr, res.Code, res.Log)
	}
	return res
}

// Apply checks raw as CheckTx does and, if it passes, applies it as the
// next block; it returns the tx's result.
func (c *Chain) Apply(raw []byte) *apiwire.TxResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := sha256.Sum256(raw)
	hash := strings.ToUpper(hex.EncodeToString(h[:]))
	var l ledger.Ledger
	if chk := l.CheckTx(ledger.NewOverlay(c.c.KV), raw); chk.Err != nil {
		return &apiwire.TxResult{Hash: hash, Code: chk.Code(), Log: chk.Err.Error()}
	}
	res := c.c.ApplyBlock(c.tb, raw)[0]
	tr := &apiwire.TxResult{Hash: hash, Height: c.c.Height, Code: res.Code(), Events: res.Events}
	if res.Err != nil {
		tr.Log = res.Err.Error()
	}
	c.txs[hash] = tr
	b := &apiwire.Block{
		BlockHeader: apiwire.BlockHeader{Height: c.c.Height, Time: c.c.Now(), Hash: fmt.Sprintf("%064X", c.c.Height), NumTxs: 1, Size: len(raw)},
		Txs:         []apiwire.BlockTx{{Hash: hash, Size: len(raw), Code: tr.Code, Log: tr.Log, Events: tr.Events}},
		Events:      []ledger.Event{},
	}
	if tx, err := ledger.DecodeTx(raw); err == nil {
		b.Txs[0].Type, b.Txs[0].Sender = tx.Msg.Type().String(), tx.Sender().String()
		b.Txs[0].Msg, _ = json.Marshal(tx.Msg)
	}
	c.blocks = append(c.blocks, b)
	return tr
}

// Status implements apiserver.Chain.
func (c *Chain) Status(context.Context) (*apiwire.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, err := ledger.AppHash(c.c.KV)
	if err != nil {
		return nil, err
	}
	return &apiwire.Status{ChainID: lt.ChainID, Moniker: "apiservertest", Height: c.c.Height, AppHash: hex.EncodeToString(h), LatestBlockTime: c.c.Now(),
		Validators: []apiwire.Validator{{Address: "AB", PubKey: "CD", VotingPower: 10}}}, nil
}

// View implements apiserver.Chain.
func (c *Chain) View() (ledger.KV, func()) {
	c.mu.Lock()
	return c.c.KV, c.mu.Unlock
}

// BroadcastTx implements apiserver.Chain.
func (c *Chain) BroadcastTx(_ context.Context, raw []byte) (*apiwire.TxResult, error) {
	return c.Apply(raw), nil
}

// GetTx implements apiserver.Chain.
func (c *Chain) GetTx(_ context.Context, hash []byte) (*apiwire.TxResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.txs[strings.ToUpper(hex.EncodeToString(hash))], nil
}

// WaitTx implements apiserver.Chain: every tx accepted is in a block at
// once.
func (c *Chain) WaitTx(ctx context.Context, hash []byte) (*apiwire.TxResult, error) {
	return c.GetTx(ctx, hash)
}

// NextSequence implements apiserver.Chain.
func (c *Chain) NextSequence(a address.Address) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	acct, err := ledger.GetAccount(c.c.KV, a)
	return acct.Sequence, err
}

// Blocks implements apiserver.Chain.
func (c *Chain) Blocks(_ context.Context, height int64, limit int) ([]apiwire.BlockHeader, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if height <= 0 || height > int64(len(c.blocks)) {
		height = int64(len(c.blocks))
	}
	out := []apiwire.BlockHeader{}
	for h := height; h >= 1 && len(out) < limit; h-- {
		out = append(out, c.blocks[h-1].BlockHeader)
	}
	return out, nil
}

// Block implements apiserver.Chain.
func (c *Chain) Block(_ context.Context, height int64) (*apiwire.Block, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if height < 1 || height > int64(len(c.blocks)) {
		return nil, nil
	}
	return c.blocks[height-1], nil
}

// NewServer serves c's API (apiserver.New) and a blob gateway that lets
// anyone upload (its store in a temporary directory) from an
// httptest.Server, closed when the test ends.
func NewServer(tb testing.TB, c *Chain) *httptest.Server {
	tb.Helper()
	store, err := blob.OpenStore(tb.TempDir(), 64<<20)
	if err != nil {
		tb.Fatal(err)
	}
	gw := blob.NewHandler(store, nil)
	mux := http.NewServeMux()
	mux.Handle("/v1/blobs", gw)
	mux.Handle("/v1/blobs/", gw)
	mux.Handle("/", apiserver.New(c, apiserver.Options{}))
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	return srv
}
