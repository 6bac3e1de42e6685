package abciapp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

var alice, bob = lt.NewKey("alice"), lt.NewKey("bob")

func openApp(t *testing.T, dir string) *App {
	t.Helper()
	a, err := Open(dir, Options{CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func initChain(t *testing.T, a *App) []byte {
	t.Helper()
	st, _ := json.Marshal(lt.Genesis(1000, "alice", "bob"))
	res, err := a.InitChain(t.Context(), &abci.InitChainRequest{ChainId: lt.ChainID, AppStateBytes: st})
	if err != nil {
		t.Fatal(err)
	}
	return res.AppHash
}

func finalize(t *testing.T, a *App, h int64, txs ...[]byte) *abci.FinalizeBlockResponse {
	t.Helper()
	res, err := a.FinalizeBlock(t.Context(), &abci.FinalizeBlockRequest{Height: h, Time: lt.BlockTime(h), Txs: txs})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func commit(t *testing.T, a *App) {
	t.Helper()
	if _, err := a.Commit(t.Context(), &abci.CommitRequest{}); err != nil {
		t.Fatal(err)
	}
}

func info(t *testing.T, a *App) *abci.InfoResponse {
	t.Helper()
	r, err := a.Info(t.Context(), &abci.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBlocksPersistAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	a := openApp(t, dir)
	if got := info(t, a).LastBlockHeight; got != 0 {
		t.Fatalf("fresh app height = %d", got)
	}
	initChain(t, a)
	r1 := finalize(t, a, 1, alice.Send(0, bob.Addr, 10))
	if r1.TxResults[0].Code != 0 {
		t.Fatalf("tx failed: %s", r1.TxResults[0].Log)
	}
	commit(t, a)
	r2 := finalize(t, a, 2, alice.Send(1, bob.Addr, 5), []byte("junk"))
	if r2.TxResults[1].Code != ledger.ErrDecode.Code || r2.TxResults[1].Codespace != Codespace {
		t.Fatalf("junk: code %d codespace %q", r2.TxResults[1].Code, r2.TxResults[1].Codespace)
	}
	commit(t, a)
	// A block finalized but never committed (a crash before Commit) is not
	// in the store: the node restarts at height 2 and CometBFT replays 3.
	r3 := finalize(t, a, 3, alice.Send(2, bob.Addr, 1))
	a.Close()

	b, err := Open(dir, Options{CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	in := info(t, b)
	if in.LastBlockHeight != 2 || !bytes.Equal(in.LastBlockAppHash, r2.AppHash) {
		t.Fatalf("after restart: height %d hash %x, want 2 %x", in.LastBlockHeight, in.LastBlockAppHash, r2.AppHash)
	}
	again := finalize(t, b, 3, alice.Send(2, bob.Addr, 1))
	if !bytes.Equal(again.AppHash, r3.AppHash) {
		t.Fatalf("replayed block 3: hash %x, want %x", again.AppHash, r3.AppHash)
	}
	commit(t, b)
	kv, release := b.View()
	defer release()
	acct, _ := ledger.GetAccount(kv, bob.Addr)
	if acct.Balance != 1016 {
		t.Fatalf("bob = %d, want 1016", acct.Balance)
	}
}

func TestGenesisReplayedIfNeverCommitted(t *testing.T) {
	dir := t.TempDir()
	a := openApp(t, dir)
	h1 := initChain(t, a)
	// Reads between InitChain and the first commit see the genesis state.
	kv, release := a.View()
	acct, _ := ledger.GetAccount(kv, alice.Addr)
	hash, _ := ledger.AppHash(kv)
	release()
	if acct.Balance != 1000 || !bytes.Equal(hash, h1) {
		t.Fatalf("view before the first commit: balance %d hash %x, want 1000 %x", acct.Balance, hash, h1)
	}
	a.Close()
	b := openApp(t, dir)
	if got := info(t, b).LastBlockHeight; got != 0 {
		t.Fatalf("height %d, want 0: genesis must not persist before the first commit", got)
	}
	if h2 := initChain(t, b); !bytes.Equal(h1, h2) {
		t.Fatalf("genesis hash differs on replay: %x vs %x", h1, h2)
	}
}

func TestTwoAppsAgree(t *testing.T) {
	a, b := openApp(t, t.TempDir()), openApp(t, t.TempDir())
	var last [2][]byte
	for i, app := range []*App{a, b} {
		initChain(t, app)
		for h := int64(1); h <= 5; h++ {
			last[i] = finalize(t, app, h, alice.Send(uint64(h-1), bob.Addr, uint64(h))).AppHash
			commit(t, app)
		}
	}
	if !bytes.Equal(last[0], last[1]) {
		t.Fatalf("app hashes differ: %x vs %x", last[0], last[1])
	}
}

// TestCheckTxCodes checks that each class of bad tx reaches CometBFT with
// its stable code, the gpunet codespace and a message, and changes nothing.
func TestCheckTxCodes(t *testing.T) {
	a := openApp(t, t.TempDir())
	initChain(t, a)
	finalize(t, a, 1)
	commit(t, a)
	good := alice.Send(0, bob.Addr, 10)
	for _, tc := range []struct {
		name string
		tx   []byte
		code uint32
	}{
		{"garbage", []byte{0xde, 0xad, 0xbe, 0xef}, 1},
		{"truncated", good[:40], 1},
		{"oversized", append([]byte{1}, make([]byte, 300<<10)...), 2},
		{"wrong chain", alice.Tx("elsewhere", 0, 0, &ledger.MsgSend{To: bob.Addr, Amount: 1}), 3},
		{"bad signature", append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1), 4},
		{"out of order", alice.Send(3, bob.Addr, 1), 5},
		{"overspend", alice.Send(0, bob.Addr, 5000), 6},
		{"zero amount", alice.Send(0, bob.Addr, 0), 7},
	} {
		res, err := a.CheckTx(t.Context(), &abci.CheckTxRequest{Tx: tc.tx, Type: abci.CHECK_TX_TYPE_CHECK})
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != tc.code || res.Codespace != Codespace || res.Log == "" {
			t.Errorf("%s: code %d codespace %q log %q, want code %d", tc.name, res.Code, res.Codespace, res.Log, tc.code)
		}
	}
	if n := a.check.State().Len(); n != 0 {
		t.Fatalf("rejected txs staged %d writes in the mempool state", n)
	}
	if res, _ := a.CheckTx(t.Context(), &abci.CheckTxRequest{Tx: good}); res.Code != 0 {
		t.Fatalf("good tx: %s", res.Log)
	}
	// The replayed tx is rejected once the first is pending.
	if res, _ := a.CheckTx(t.Context(), &abci.CheckTxRequest{Tx: good}); res.Code != ledger.ErrBadSequence.Code || !strings.Contains(res.Log, "already used") {
		t.Fatalf("replay: code %d %q", res.Code, res.Log)
	}
}

func TestQuery(t *testing.T) {
	a := openApp(t, t.TempDir())
	initChain(t, a)
	finalize(t, a, 1)
	commit(t, a)
	r, _ := a.Query(context.Background(), &abci.QueryRequest{Path: "/account/" + alice.Addr.String()})
	var acct ledger.Account
	if r.Code != 0 || json.Unmarshal(r.Value, &acct) != nil || acct.Balance != 1000 {
		t.Fatalf("account query: code %d value %s", r.Code, r.Value)
	}
	r, _ = a.Query(context.Background(), &abci.QueryRequest{Path: "/account/gpu1nope"})
	if r.Code != ledger.ErrInvalidAddress.Code {
		t.Fatalf("bad address: code %d", r.Code)
	}
	r, _ = a.Query(context.Background(), &abci.QueryRequest{Path: "/nothing"})
	if r.Code == 0 || !strings.Contains(r.Log, "/account/ADDR") {
		t.Fatalf("unknown path: %d %q", r.Code, r.Log)
	}
}

// TestSigCacheOnlyRemembersValid: a key is kept expanded only once a
// signature by it verified, and the keys kept stay bounded.
func TestSigCacheOnlyRemembersValid(t *testing.T) {
	c := newSigCache(2, 2)
	tx, _ := ledger.DecodeTx(alice.Send(0, bob.Addr, 1))
	sb, _ := tx.SignBytes()
	bad := bytes.Clone(tx.Signature)
	bad[0] ^= 1
	if c.verify(tx.PubKey, sb, bad) {
		t.Fatal("invalid signature accepted")
	}
	if n := c.keys.len(); n != 0 {
		t.Fatalf("an invalid signature left %d keys in the cache", n)
	}
	// Each is verified twice: the second uses the expanded key.
	for range 2 {
		if !c.verify(tx.PubKey, sb, tx.Signature) {
			t.Fatal("valid signature rejected")
		}
	}
	for range 2 {
		if c.verify(tx.PubKey, sb, bad) {
			t.Fatal("invalid signature accepted")
		}
	}
	for i := 0; i < 5; i++ { // eviction keeps it bounded
		tx2, _ := ledger.DecodeTx(lt.NewKey(fmt.Sprint("k", i)).Send(0, bob.Addr, 1))
		sb2, _ := tx2.SignBytes()
		c.verify(tx2.PubKey, sb2, tx2.Signature)
	}
	if n := c.keys.len(); n > 4 {
		t.Fatalf("cache holds %d keys, max 2 per generation", n)
	}
}

// The cache must answer exactly as crypto/ed25519 does, on valid
// signatures, tampered ones and arbitrary bytes.
func TestSigCacheMatchesStdlib(t *testing.T) {
	c := newSigCache(1<<10, 1<<10)
	for i := 0; i < 200; i++ {
		k := lt.NewKey(string(rune('a' + i%26)))
		msg := []byte{byte(i), byte(i >> 8), 7}
		sig := ed25519.Sign(k.Priv, msg)
		pub := k.Priv.Public().(ed25519.PublicKey)
		cases := [][3][]byte{
			{pub, msg, sig},
			{pub, append(msg, 1), sig},
			{pub, msg, append(append([]byte{}, sig[:63]...), sig[63]^0x80)},
			{append(append([]byte{}, pub[:31]...), pub[31]^1), msg, sig},
		}
		for j, tc := range cases {
			want := ed25519.Verify(tc[0], tc[1], tc[2])
			if got := c.verify(tc[0], tc[1], tc[2]); got != want {
				t.Fatalf("key %d case %d: got %v, crypto/ed25519 says %v", i, j, got, want)
			}
		}
	}
}

func FuzzSigCacheMatchesStdlib(f *testing.F) {
	k := lt.NewKey("fuzz")
	msg := []byte("hello")
	f.Add([]byte(k.Priv.Public().(ed25519.PublicKey)), msg, ed25519.Sign(k.Priv, msg))
	f.Add(make([]byte, 32), msg, make([]byte, 64))
	f.Fuzz(func(t *testing.T, pub, msg, sig []byte) {
		if len(pub) != 32 || len(sig) != 64 {
			return
		}
		c := newSigCache(4, 4)
		want := ed25519.Verify(pub, msg, sig)
		if got := c.verify(pub, msg, sig); got != want {
			t.Fatalf("got %v, crypto/ed25519 says %v", got, want)
		}
	})
}
