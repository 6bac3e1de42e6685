package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// fakeChain is a Chain over an in-memory ledger: every tx it is given is
// applied as a block of its own at once.
type fakeChain struct {
	t  testing.TB
	mu sync.Mutex
	c  *lt.Chain
	// seq is each key's next sequence.
	seq    map[address.Address]uint64
	blocks []*apiwire.Block
	txs    map[string]*apiwire.TxResult
}

// Test keys: a consumer and five CPU providers.
var (
	consumerKey  = lt.NewKey("consumer")
	providerKeys = []lt.Key{lt.NewKey("p1"), lt.NewKey("p2"), lt.NewKey("p3"), lt.NewKey("p4"), lt.NewKey("p5")}
)

// newFakeChain returns a chain with five staked providers (p1…p5, the
// last offline) and jobs submitted by the consumer: jobs 1-3 placed (job
// 2 then cancelled), job 4 too big for anyone (queued).
func newFakeChain(t testing.TB) *fakeChain { t.Helper(); return newFakeChainWith(t, nil) }

// newFakeChainWith is newFakeChain with edit applied to its genesis.
func newFakeChainWith(t testing.TB, edit func(*ledger.Genesis)) *fakeChain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "consumer", "p1", "p2", "p3", "p4", "p5")
	g.Params.LivenessRatePPM = 0
	if edit != nil {
		edit(&g)
	}
	f := &fakeChain{t: t, c: lt.NewChain(t, g), seq: map[address.Address]uint64{}, txs: map[string]*apiwire.TxResult{}}
	for i, k := range providerKeys {
		pi := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
		pi.Region = []string{"eu", "us-east", "eu", "ap-south", "eu"}[i]
		f.send(k, &ledger.MsgRegisterProvider{ProviderInfo: pi})
		f.send(k, &ledger.MsgStake{Amount: 10_000_000})
	}
	f.send(providerKeys[4], &ledger.MsgSetProviderStatus{Online: false})
	for i := 1; i <= 3; i++ {
		f.send(consumerKey, &ledger.MsgSubmitJob{Spec: lt.WasmJob(fmt.Sprintf("job%d", i), 1_000_000, 60), ConsumerKey: lt.AgeKey("consumer")})
	}
	f.send(consumerKey, &ledger.MsgCancelJob{JobID: 2})
	big := lt.WasmJob("big", 1_000_000, 60)
	big.Memory = 1 << 40
	f.send(consumerKey, &ledger.MsgSubmitJob{Spec: big, ConsumerKey: lt.AgeKey("consumer")})
	return f
}

// send applies msg from k as a block and fails the test if it fails.
func (f *fakeChain) send(k lt.Key, msg ledger.Msg) {
	f.t.Helper()
	raw := k.Tx(lt.ChainID, f.seq[k.Addr], 0, msg)
	f.seq[k.Addr]++
	if res := f.apply(raw); res.Code != 0 {
		f.t.Fatalf("%T: %s", msg, res.Log)
	}
}

func (f *fakeChain) apply(raw []byte) *apiwire.TxResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := f.c.ApplyBlock(f.t, raw)[0]
	h := sha256.Sum256(raw)
	hash := strings.ToUpper(hex.EncodeToString(h[:]))
	tr := &apiwire.TxResult{Hash: hash, Height: f.c.Height, Code: res.Code(), Events: res.Events}
	if res.Err != nil {
		tr.Log = res.Err.Error()
	}
	f.txs[hash] = tr
	b := &apiwire.Block{
		BlockHeader: apiwire.BlockHeader{Height: f.c.Height, Time: f.c.Now(), Hash: fmt.Sprintf("%064X", f.c.Height), NumTxs: 1, Size: len(raw)},
		Txs:         []apiwire.BlockTx{{Hash: hash, Size: len(raw), Code: tr.Code, Log: tr.Log, Events: tr.Events}},
		Events:      []ledger.Event{},
	}
	if tx, err := ledger.DecodeTx(raw); err == nil {
		b.Txs[0].Type, b.Txs[0].Sender = tx.Msg.Type().String(), tx.Sender().String()
		b.Txs[0].Msg, _ = json.Marshal(tx.Msg)
	}
	f.blocks = append(f.blocks, b)
	return tr
}

func (f *fakeChain) Status(context.Context) (*apiwire.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, _ := ledger.AppHash(f.c.KV)
	return &apiwire.Status{ChainID: lt.ChainID, Moniker: "fake", Height: f.c.Height, AppHash: hex.EncodeToString(h), LatestBlockTime: f.c.Now(),
		Validators: []apiwire.Validator{{Address: "AB", PubKey: "CD", VotingPower: 10}}}, nil
}

func (f *fakeChain) View() (ledger.KV, func()) {
	f.mu.Lock()
	return f.c.KV, f.mu.Unlock
}

func (f *fakeChain) BroadcastTx(_ context.Context, raw []byte) (*apiwire.TxResult, error) {
	return f.apply(raw), nil
}

func (f *fakeChain) GetTx(_ context.Context, hash []byte) (*apiwire.TxResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.txs[strings.ToUpper(hex.EncodeToString(hash))], nil
}

func (f *fakeChain) WaitTx(ctx context.Context, hash []byte) (*apiwire.TxResult, error) {
	return f.GetTx(ctx, hash)
}

func (f *fakeChain) NextSequence(a address.Address) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	acct, err := ledger.GetAccount(f.c.KV, a)
	return acct.Sequence, err
}

func (f *fakeChain) Blocks(_ context.Context, height int64, limit int) ([]apiwire.BlockHeader, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if height <= 0 || height > int64(len(f.blocks)) {
		height = int64(len(f.blocks))
	}
	out := []apiwire.BlockHeader{}
	for h := height; h >= 1 && len(out) < limit; h-- {
		out = append(out, f.blocks[h-1].BlockHeader)
	}
	return out, nil
}

func (f *fakeChain) Block(_ context.Context, height int64) (*apiwire.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if height < 1 || height > int64(len(f.blocks)) {
		return nil, nil
	}
	return f.blocks[height-1], nil
}
