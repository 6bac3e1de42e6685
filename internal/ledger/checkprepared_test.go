package ledger_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// countingMemo counts the lookups and insertions of a ledger.TxCache.
type countingMemo struct {
	*lt.TxMemo
	gets, puts atomic.Int64
}

func (m *countingMemo) Get(key [32]byte) *ledger.Tx {
	m.gets.Add(1)
	return m.TxMemo.Get(key)
}

func (m *countingMemo) Put(key [32]byte, raw []byte, tx *ledger.Tx) {
	m.puts.Add(1)
	m.TxMemo.Put(key, raw, tx)
}

// TestCheckPreparedMatchesCheck: a check handed the tx Ledger.Prepare made
// of its bytes answers exactly as Check does, leaves the same mempool
// state, and neither looks the tx up in the cache nor decodes it again;
// a check's result carries no events (a block's still do).
func TestCheckPreparedMatchesCheck(t *testing.T) {
	alice, bob := lt.NewKey("alice"), lt.NewKey("bob")
	g := lt.Genesis(1000, "alice", "bob")
	// The smallest limit governance allows, so that a job tx that passes
	// every stateless check is too large.
	g.Params.MaxTxBytes = 512
	job := lt.WasmJob(strings.Repeat("j", 200), 10, 60)
	large := alice.Tx(lt.ChainID, 2, 0, &ledger.MsgSubmitJob{Spec: job, ConsumerKey: lt.AgeKey("alice"), InputBlob: strings.Repeat("a", 300)})
	if len(large) <= 512 {
		t.Fatalf("the large tx is %d bytes, want more than 512", len(large))
	}
	bad := alice.Send(1, bob.Addr, 1)
	bad = bytes.Clone(bad)
	bad[len(bad)-1] ^= 1
	txs := [][]byte{
		alice.Send(0, bob.Addr, 10),
		alice.Send(0, bob.Addr, 10), // replayed: bad sequence
		alice.Send(5, bob.Addr, 1),  // ahead
		bad,                         // bad signature
		[]byte("junk"),              // does not decode
		alice.Tx("elsewhere", 1, 0, &ledger.MsgSend{To: bob.Addr, Amount: 1}), // wrong chain
		large,                         // too large for the params
		alice.Send(1, bob.Addr, 5000), // message fails: not enough funds
		alice.Send(1, bob.Addr, 20),
		bob.Send(0, alice.Addr, 1),
	}

	// What each tx must get: every step of the ante step is reached on the
	// prepared path (nil: admitted).
	wantErr := []*ledger.Error{nil, ledger.ErrBadSequence, ledger.ErrBadSequence, ledger.ErrBadSignature, nil,
		ledger.ErrWrongChainID, ledger.ErrTxTooLarge, ledger.ErrInsufficientFunds, nil, nil}

	plain := lt.NewChain(t, g)
	prepared := lt.NewChain(t, g)
	memo := &countingMemo{TxMemo: lt.NewTxMemo()}
	prepared.L.Txs = memo
	plainChk := plain.L.NewTxChecker(ledger.NewOverlay(plain.KV))
	preChk := prepared.L.NewTxChecker(ledger.NewOverlay(prepared.KV))
	for i, raw := range txs {
		want := plainChk.Check(raw)
		p := prepared.L.Prepare(raw)
		gets, puts := memo.gets.Load(), memo.puts.Load()
		got := preChk.CheckPrepared(p)
		if fmt.Sprint(got.Err) != fmt.Sprint(want.Err) || got.Code() != want.Code() {
			t.Fatalf("tx %d: CheckPrepared says %v (code %d), Check %v (code %d)", i, got.Err, got.Code(), want.Err, want.Code())
		}
		if wantErr[i] != nil && got.Code() != wantErr[i].Code {
			t.Fatalf("tx %d: %v (code %d), want code %d", i, got.Err, got.Code(), wantErr[i].Code)
		}
		if got.Events != nil || want.Events != nil {
			t.Fatalf("tx %d: a check's result carries events: %v, %v", i, got.Events, want.Events)
		}
		// A tx that passed Prepare is neither looked up nor decoded again
		// (a Put would mean it was); one that failed is checked in full.
		var uncached ledger.Ledger
		if _, err := uncached.PrepareTx(raw); err == nil {
			if g, p := memo.gets.Load()-gets, memo.puts.Load()-puts; g != 0 || p != 0 {
				t.Fatalf("tx %d: CheckPrepared looked the prepared tx up %d times and cached it %d times", i, g, p)
			}
		}
	}
	if a, b := plainChk.State().Changes(), preChk.State().Changes(); !reflect.DeepEqual(a, b) {
		t.Fatalf("the mempool states differ:\n%v\n%v", a, b)
	}
	if n := len(plainChk.State().Changes()); n == 0 {
		t.Fatal("no tx was admitted")
	}

	// A block's transfer still reports its event.
	res := plain.ApplyBlock(t, txs[0])
	if res[0].Err != nil || len(res[0].Events) != 1 || res[0].Events[0].Type != "transfer" {
		t.Fatalf("DeliverTx of a transfer: %v, events %v; want one transfer event", res[0].Err, res[0].Events)
	}
}

// TestDeliverPreparedMatchesDeliverTx: a block whose txs Ledger.Prepare
// made ahead (as abciapp's FinalizeBlock does on all cores) gives every tx
// the result DeliverTx gives it, events included, and the same app hash.
func TestDeliverPreparedMatchesDeliverTx(t *testing.T) {
	alice, bob := lt.NewKey("alice"), lt.NewKey("bob")
	g := lt.Genesis(1000, "alice", "bob")
	bad := bytes.Clone(alice.Send(2, bob.Addr, 1))
	bad[len(bad)-1] ^= 1
	txs := [][]byte{
		alice.Send(0, bob.Addr, 10), alice.Send(0, bob.Addr, 10), alice.Send(5, bob.Addr, 1), bad, []byte("junk"),
		alice.Tx("elsewhere", 1, 0, &ledger.MsgSend{To: bob.Addr, Amount: 1}),
		alice.Send(1, bob.Addr, 5000), // the message fails; sequence and fee are charged
		alice.Send(2, bob.Addr, 20), bob.Send(0, alice.Addr, 1),
	}
	plain := lt.NewChain(t, g)
	want := plain.ApplyBlock(t, txs...)

	prepared := lt.NewChain(t, g)
	pre := make([]ledger.PreparedTx, len(txs))
	for i, raw := range txs {
		pre[i] = prepared.L.Prepare(raw)
	}
	b := prepared.L.BeginBlock(prepared.KV, ledger.BlockInfo{Height: 1, Time: lt.BlockTime(1), Seed: lt.BlockSeed(1)})
	for i := range txs {
		got := b.DeliverPrepared(pre[i])
		if fmt.Sprint(got.Err) != fmt.Sprint(want[i].Err) || !reflect.DeepEqual(got.Events, want[i].Events) {
			t.Fatalf("tx %d: DeliverPrepared gives %v %v, DeliverTx %v %v", i, got.Err, got.Events, want[i].Err, want[i].Events)
		}
	}
	_, hash, err := b.End()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hash, plain.Hash) {
		t.Fatalf("app hash %x, DeliverTx's %x", hash, plain.Hash)
	}
	if want[0].Err != nil || want[6].Code() != ledger.ErrInsufficientFunds.Code || len(want[7].Events) != 1 {
		t.Fatalf("the block does not exercise what it should: %v, %v, %v", want[0].Err, want[6].Err, want[7].Events)
	}
}
