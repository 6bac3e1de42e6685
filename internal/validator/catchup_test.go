package validator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rpccore "github.com/cometbft/cometbft/rpc/core"
)

// TestBroadcastWaitsWhileCatchingUp: a node still syncing the chain
// refuses txs (CometBFT's ErrEndpointClosedCatchingUp); BroadcastTx holds
// the tx and sends it once the node has caught up, within a bound, and
// says plainly when it has not.
func TestBroadcastWaitsWhileCatchingUp(t *testing.T) {
	calls := 0
	err := whileCatchingUp(context.Background(), 5*time.Second, func() error {
		if calls++; calls < 3 {
			return rpccore.ErrEndpointClosedCatchingUp
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("caught up at the third try: err %v after %d tries", err, calls)
	}
	other := errors.New("mempool is full")
	if err := whileCatchingUp(context.Background(), 5*time.Second, func() error { return other }); err != other {
		t.Fatalf("another error: %v, want it as it is", err)
	}
	start := time.Now()
	err = whileCatchingUp(context.Background(), 300*time.Millisecond, func() error { return rpccore.ErrEndpointClosedCatchingUp })
	if err == nil || !strings.Contains(err.Error(), "still catching up") || time.Since(start) > 2*time.Second {
		t.Fatalf("never caught up: %v after %s", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := whileCatchingUp(ctx, time.Minute, func() error { return rpccore.ErrEndpointClosedCatchingUp }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
