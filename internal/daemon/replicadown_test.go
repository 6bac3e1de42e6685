package daemon

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// blockChain is a downChain whose blocks are given: Block answers them,
// and Subscribe sends their heights.
type blockChain struct {
	witnessChain
	blocks map[int64]*apiwire.Block
}

func (c *blockChain) Subscribe(ctx context.Context, _ string) (<-chan int64, error) {
	out := make(chan int64, len(c.blocks))
	for h := range int64(len(c.blocks)) {
		out <- h + 1
	}
	close(out)
	return out, nil
}

func (c *blockChain) Block(_ context.Context, h int64) (*apiwire.Block, error) {
	return c.blocks[h], nil
}

// TestDownReporterFollowsReports: another validator's report of a
// replica, in a block, makes it a suspect here (so this node confirms
// it); a refused report, another message's event and a malformed one do
// not.
func TestDownReporterFollowsReports(t *testing.T) {
	p1, p2 := address.FromPubKey(make([]byte, 32)), address.FromPubKey(append(make([]byte, 31), 1))
	ev := func(service, provider string) ledger.Event {
		return ledger.Event{Type: "service_replica_reported_down", Attrs: []ledger.Attr{{Key: "service", Value: service}, {Key: "provider", Value: provider}}}
	}
	typ := ledger.MsgTypeReportReplicaDown.String()
	c := &blockChain{blocks: map[int64]*apiwire.Block{
		1: {Txs: []apiwire.BlockTx{
			{Type: typ, Events: []ledger.Event{ev("7", p1.String())}},
			{Type: typ, Code: 24, Events: []ledger.Event{ev("8", p1.String())}},
			{Type: "attest_served", Events: []ledger.Event{ev("9", p1.String())}},
		}},
		2: {Txs: []apiwire.BlockTx{
			{Type: typ, Events: []ledger.Event{ev("0", p2.String()), ev("10", "gpu1nonsense"), ev("11", p2.String())}},
		}},
	}}
	_, key, _ := ed25519.GenerateKey(nil)
	d := newDownReporter(key, "c", c, &sync.Mutex{}, slog.New(slog.DiscardHandler))
	heights, _ := c.Subscribe(t.Context(), "")
	d.follow(t.Context(), heights)
	var got []ledger.ServedReplica
	for len(d.suspects) > 0 {
		got = append(got, <-d.suspects)
	}
	want := []ledger.ServedReplica{{ServiceID: 7, Provider: p1}, {ServiceID: 11, Provider: p2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("suspects %v, want %v", got, want)
	}
	if h := d.height.Load(); h != 2 {
		t.Errorf("height %d, want 2", h)
	}
}

// TestDownReporterBounded: suspects beyond the queue are dropped rather
// than waited for; a replica being checked is not taken again, one
// checked is taken again only after its pause; and the replicas
// remembered are bounded.
func TestDownReporterBounded(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	d := newDownReporter(key, "c", nil, &sync.Mutex{}, slog.New(slog.DiscardHandler))
	p := address.FromPubKey(make([]byte, 32))
	for i := range downQueue + 10 {
		d.suspect(uint64(i+1), p) // never blocks
	}
	if len(d.suspects) != downQueue {
		t.Fatalf("queued %d, want %d", len(d.suspects), downQueue)
	}
	r := ledger.ServedReplica{ServiceID: 1, Provider: p}
	if !d.take(r) || d.take(r) {
		t.Fatal("a replica being checked was taken twice")
	}
	d.done(r, -time.Second) // its pause is over
	if !d.take(r) {
		t.Fatal("not taken again after its pause")
	}
	for i := range downMaxRecent {
		d.take(ledger.ServedReplica{ServiceID: uint64(i + 2), Provider: p})
	}
	if n := len(d.recent); n > downMaxRecent {
		t.Fatalf("%d replicas remembered, at most %d", n, downMaxRecent)
	}
	if d.take(ledger.ServedReplica{ServiceID: 1 << 40, Provider: p}) {
		t.Fatal("taken with no room to remember it")
	}
}
