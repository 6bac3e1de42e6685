package e2e

import (
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/testnet"
)

// TestNetnsChainCommitsWithDelay runs four validators, each in its own
// namespace at its own address, with 40 ms ± 5 ms one way between any two
// (80 ms a round trip): the chain keeps committing, every node reports the
// same app hash at the heights they share, and a transfer sent through one
// node from a consumer's host shows on another.
func TestNetnsChainCommitsWithDelay(t *testing.T) {
	parallel(t, weightLight)
	root := t.TempDir()
	keyHome := root + "/keys"
	var alice, bob keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", keyHome)
	gpunetJSON(t, &bob, "keys", "add", "bob", "--home", keyHome)
	c := upTestnet(t, testnet.ClusterOptions{
		Net:        testnet.Options{Delay: 40 * time.Millisecond, Jitter: 5 * time.Millisecond},
		Dir:        root + "/net",
		Validators: 4,
		Hosts:      []string{"consumer"},
		BlockTime:  300 * time.Millisecond,
		InitArgs:   []string{"--account", alice.Address + "=1000sync"},
	})
	names := []string{"node0", "node1", "node2", "node3"}
	book := newHashBook()
	for _, n := range c.Nodes {
		watchNode(t, book, n)
	}
	start := time.Now()
	waitUntil(t, 60*time.Second, "all four validators at height 5", func() bool { return book.minHeight(names...) >= 5 })
	h0, t0 := book.minHeight(names...), time.Now()
	waitUntil(t, 60*time.Second, "10 more blocks", func() bool { return book.minHeight(names...) >= h0+10 })
	perBlock := time.Since(t0) / time.Duration(book.minHeight(names...)-h0)
	t.Logf("4 validators, 40±5 ms one way: height 5 after %s, then %s a block (block time 300ms)", t0.Sub(start).Round(time.Millisecond), perBlock.Round(time.Millisecond))

	var tx txJSON
	onHostJSON(t, c, "consumer", &tx, "tx", "send", bob.Address, "5sync", "--from", "alice", "--home", keyHome, "--node", c.Node("node1").API)
	if tx.Code != 0 || tx.Height <= 0 {
		t.Fatalf("transfer through node1: %+v", tx)
	}
	waitUntil(t, 30*time.Second, "node3 past the transfer's block", func() bool { return book.minHeight("node3") >= tx.Height })
	var b balanceJSON
	onHostJSON(t, c, "consumer", &b, "query", "balance", bob.Address, "--node", c.Node("node3").API)
	if b.Balance != 5_000_000 {
		t.Errorf("bob's balance on node3: %d, want 5000000", b.Balance)
	}
	book.check(t)
	if len(book.commonHeights(1, names...)) == 0 {
		t.Errorf("no height reported by all four nodes")
	}
	if s := c.Stats(); s.Forwarded == 0 {
		t.Errorf("router forwarded nothing: %+v", s)
	}
}

// watchNode records a node's status in book until the test ends.
func watchNode(t *testing.T, book *hashBook, n *testnet.Node) {
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if st, err := n.Status(t.Context()); err == nil {
				book.record(n.Name, st.Height, st.AppHash)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}
