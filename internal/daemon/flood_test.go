package daemon

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/chainclient"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestMempoolFlood floods a real node with minimum-fee transfers from 200
// accounts (issue 19) and shows what it does: blocks keep coming, an
// honest transfer sent in the middle of the flood commits within seconds,
// and the flood drains. CometBFT v1's mempool is first come, first served
// (no fee priority), so the flood's cost to others is its queue: bounded
// by the mempool's size (validator.Start: 50 000 txs, 256 MiB) and paid for
// at min_fee a tx on a real network.
func TestMempoolFlood(t *testing.T) {
	const senders, perSender = 200, 10
	names := []string{"alice"}
	for i := range senders {
		names = append(names, fmt.Sprintf("flood-%d", i))
	}
	home := t.TempDir()
	if _, err := validator.Init(home, validator.InitOptions{
		ChainID: lt.ChainID, Validators: 1, Genesis: lt.Genesis(1_000_000, names...), BlockTime: 50 * time.Millisecond,
	}); err != nil {
		t.Fatal(err)
	}
	d, err := Start(t.Context(), home, Options{APIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cl := chainclient.New(d.APIURL)
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := st.Height

	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for s := w; s < senders; s += 8 {
				k := lt.NewKey(names[1+s])
				for seq := range uint64(perSender) {
					if _, err := cl.BroadcastTx(ctx, k.Send(seq, bob.Addr, 1), false); err != nil {
						refused.Add(1)
						continue
					}
					accepted.Add(1)
				}
			}
		})
	}
	// An honest transfer in the middle of the flood.
	time.Sleep(200 * time.Millisecond)
	t0 := time.Now()
	res, err := cl.BroadcastTx(ctx, alice.Send(0, bob.Addr, 7), true)
	if err != nil || res.Code != 0 {
		t.Fatalf("honest transfer during the flood: %v %+v", err, res)
	}
	wait := time.Since(t0)
	wg.Wait()
	if accepted.Load() < senders*perSender/2 {
		t.Fatalf("the node took %d of %d flood txs (%d refused)", accepted.Load(), senders*perSender, refused.Load())
	}
	// The flood drains: bob ends with every accepted transfer and alice's.
	want := uint64(accepted.Load()) + 7
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := cl.Balance(ctx, bob.Addr)
		if err == nil && uint64(b.Balance) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob has %v, want %d after the flood", b, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	end, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d flood txs accepted, %d refused; the honest transfer committed in %v; blocks %d → %d", accepted.Load(), refused.Load(), wait, start, end.Height)
	if wait > 30*time.Second || end.Height <= start+1 {
		t.Fatalf("honest transfer took %v, blocks %d → %d", wait, start, end.Height)
	}
}
