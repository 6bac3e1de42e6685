package chainclient_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// startChain runs a one-validator node whose genesis has params p and
// funds the named keys; it returns a client of its API and the keyring.
func startChain(t *testing.T, p ledger.Params, names ...string) (*chainclient.Client, *keys.Keyring) {
	t.Helper()
	home := t.TempDir()
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	g := ledger.Genesis{Params: p}
	for _, n := range names {
		k, err := kr.Add(n)
		if err != nil {
			t.Fatal(err)
		}
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Address, Balance: 1_000_000_000})
	}
	if _, err := validator.Init(home, validator.InitOptions{ChainID: "chainclient-test", Validators: 1, Genesis: g, BlockTime: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	api, err := validator.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(context.Background(), home, daemon.Options{APIAddr: api})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	return chainclient.New(api), kr
}

// TestSendMsgPaysTheChainsMinFee: on a chain whose params.min_fee is above
// 0, a tx sent with fee 0 requested is accepted and pays exactly min_fee;
// a higher requested fee is paid as asked. Before SendMsg read the
// parameter, every client (agent, job commands) sent fee 0 and a chain
// with a minimum refused them all (code 10).
func TestSendMsgPaysTheChainsMinFee(t *testing.T) {
	p := ledger.DefaultParams()
	p.MinFee = 1234
	cl, kr := startChain(t, p, "alice", "bob")
	alice, err := kr.Get("alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := kr.Get("bob")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if got, err := cl.MinFee(ctx, false); err != nil || got != p.MinFee {
		t.Fatalf("MinFee = %d, %v; want %d", got, err, p.MinFee)
	}

	// The chain does refuse fee 0: the test would pass without SendMsg's
	// fee floor otherwise.
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw := &ledger.Tx{ChainID: st.ChainID, Sequence: 0, Fee: 0, Msg: &ledger.MsgSend{To: bob.Address, Amount: 1}}
	if err := raw.Sign(alice.PrivateKey()); err != nil {
		t.Fatal(err)
	}
	b, err := raw.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var txErr *chainclient.TxError
	if _, err := cl.BroadcastTx(ctx, b, true); !errors.As(err, &txErr) || txErr.Result.Code != ledger.ErrInsufficientFee.Code {
		t.Fatalf("raw tx with fee 0: err %v, want code %d (insufficient fee)", err, ledger.ErrInsufficientFee.Code)
	}

	for _, tc := range []struct {
		ask, want uint64
	}{
		{0, p.MinFee},
		{p.MinFee - 1, p.MinFee},
		{5000, 5000},
	} {
		before, err := cl.Balance(ctx, alice.Address)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.SendMsg(ctx, alice, tc.ask, &ledger.MsgSend{To: bob.Address, Amount: 10}); err != nil {
			t.Fatalf("SendMsg with fee %d on a chain with min_fee %d: %v", tc.ask, p.MinFee, err)
		}
		after, err := cl.Balance(ctx, alice.Address)
		if err != nil {
			t.Fatal(err)
		}
		if got := before.Balance - after.Balance - 10; got != tc.want {
			t.Errorf("fee %d requested: paid %d, want %d", tc.ask, got, tc.want)
		}
	}
}
