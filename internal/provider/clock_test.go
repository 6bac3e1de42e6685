package provider_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiserver/apiservertest"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/clock/clocktest"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
)

// flakyChain is a node that can be taken down: while down, every call
// fails as an unreachable node's would.
type flakyChain struct {
	*chainclient.Client
	down  atomic.Bool
	calls atomic.Int32 // calls made while down
}

var errDown = errors.New("node down (test)")

func (f *flakyChain) Provider(ctx context.Context, a address.Address) (*apiwire.ProviderBody, error) {
	if f.down.Load() {
		f.calls.Add(1)
		return nil, errDown
	}
	return f.Client.Provider(ctx, a)
}

// TestAgentWaitsOnItsClock runs an agent on a fake clock against an
// in-memory chain: while the node is down it retries after 1, 2, 4, 5, 5
// s of its clock (the backoff from Poll, doubling, capped at 5 s) and not
// a moment sooner; once the node is back it registers at the next retry
// and then reads the chain at each tick of its Poll. Nothing sleeps.
func TestAgentWaitsOnItsClock(t *testing.T) {
	home := t.TempDir()
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.AddUnencrypted("p1")
	if err != nil {
		t.Fatal(err)
	}
	g := lt.Genesis(0)
	g.Params.LivenessRatePPM = 0
	g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Address, Balance: 100_000_000_000})
	c := apiservertest.NewChain(t, g)
	srv := apiservertest.NewServer(t, c)
	chain := &flakyChain{Client: chainclient.New(srv.URL)}
	chain.down.Store(true)
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	const poll = time.Second
	a := provider.New(provider.Options{
		Key: k, Chain: chain, Region: "eu", Executors: []string{"wasm"}, Poll: poll, Clock: clk,
		Sandboxes: map[string]sandbox.Executor{"wasm": fake.New(nil).WithName("wasm")},
		Inventory: &hwinfo.Inventory{CPUModel: "test", CPUCores: 4, RAMBytes: 8 << 30, DiskFreeBytes: 100 << 30, OS: "linux", Arch: "amd64"},
		Figures:   figures(),
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitTimer := func(what string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := clk.WaitTimers(wctx, 1); err != nil {
			t.Fatalf("the agent never waited on its clock %s: %v", what, err)
		}
	}

	waitTimer("after its first try")
	for i, backoff := range []time.Duration{1, 2, 4, 5, 5} {
		backoff *= time.Second
		if got := chain.calls.Load(); got != int32(i+1) {
			t.Fatalf("before retry %d: %d tries, want %d", i+1, got, i+1)
		}
		if st := a.Status(); st.Connected || st.LastError == "" {
			t.Errorf("while the node is down: status %+v, want disconnected with the error", st)
		}
		clk.Advance(backoff - time.Millisecond)
		if got := chain.calls.Load(); got != int32(i+1) {
			t.Fatalf("retry %d came %v early", i+1, time.Millisecond)
		}
		clk.Advance(time.Millisecond)
		waitTimer("between retries")
	}

	// Back up: the next retry registers and stakes, then the agent
	// serves on its ticker.
	chain.down.Store(false)
	clk.Advance(5 * time.Second)
	waitTimer("once connected")
	st := a.Status()
	if !st.Connected || !st.Registered || !st.Online || st.Stake == 0 {
		t.Fatalf("after the node came back: status %+v, want connected, registered, online, staked", st)
	}
	if want := clk.Now().UTC(); !st.UpdatedAt.Equal(want) {
		t.Errorf("status updated at %v, want the agent's clock's %v", st.UpdatedAt, want)
	}

	// The provider unbonds some stake behind the agent's back; the
	// agent's status shows it after one tick of its Poll.
	p, err := chain.Client.Provider(t.Context(), k.Address)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Client.SendMsg(t.Context(), k, 0, &ledger.MsgUnstake{Amount: 1}); err != nil {
		t.Fatal(err)
	}
	if got := a.Status().Stake; got != p.Record.Stake {
		t.Fatalf("stake %d changed before a tick, want %d", got, p.Record.Stake)
	}
	clk.Advance(poll)
	deadline := time.Now().Add(10 * time.Second)
	for a.Status().Stake != p.Record.Stake-1 {
		if time.Now().After(deadline) {
			t.Fatalf("after a tick: stake %d, want %d", a.Status().Stake, p.Record.Stake-1)
		}
		time.Sleep(time.Millisecond) // the agent's refresh runs on its own goroutine
	}
}
