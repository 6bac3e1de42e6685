package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestFourValidators runs four validators of equal power: the chain goes on
// with one down, halts without forking with two down, and all four catch up
// and agree once both are back.
func TestFourValidators(t *testing.T) {
	parallel(t, weightHeavy)
	root := t.TempDir()
	keyHome := filepath.Join(root, "keys")
	var alice, bob keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", keyHome)
	gpunetJSON(t, &bob, "keys", "add", "bob", "--home", keyHome)
	var net struct {
		ChainID string   `json:"chain_id"`
		Homes   []string `json:"homes"`
	}
	initNet(t, &net, "--validators", "4", "--home", filepath.Join(root, "net"),
		"--chain-id", "e2e", "--block-time", "200ms", "--account", alice.Address+"=1000sync")
	if net.ChainID != "e2e" || len(net.Homes) != 4 {
		t.Fatalf("init: %+v, want chain e2e and 4 homes", net)
	}

	book := newHashBook()
	names := []string{"node0", "node1", "node2", "node3"}
	nodes := make([]*proc, 4)
	watchers := make([]*watcher, 4)
	apis := make([]string, 4)
	start := func(i int) {
		t.Helper()
		nodes[i] = startProc(t, names[i], "node", "--home", net.Homes[i], "--output", "json")
		var info struct {
			ChainID string `json:"chain_id"`
			Moniker string `json:"moniker"`
			API     string `json:"api"`
		}
		nodes[i].jsonLine(60*time.Second, &info)
		if info.ChainID != "e2e" || info.Moniker != names[i] {
			t.Fatalf("%s printed %+v", names[i], info)
		}
		apis[i] = info.API
		watchers[i] = watch(t, book, names[i], info.API)
	}
	stop := func(i int) {
		nodes[i].kill()
		watchers[i].stop()
	}
	for i := range nodes {
		start(i)
	}
	waitUntil(t, 60*time.Second, "all four validators at height 3", func() bool { return book.minHeight(names...) >= 3 })
	st := status(t, "--home", net.Homes[0])
	if st.ChainID != "e2e" || len(st.Validators) != 4 {
		t.Fatalf("status: chain %q with %d validators, want e2e with 4", st.ChainID, len(st.Validators))
	}

	// One down: 30 of 40 votes is more than 2/3, blocks go on.
	stop(3)
	three := names[:3]
	h := book.maxHeight(three...)
	waitUntil(t, 30*time.Second, "3 more blocks with node3 down", func() bool { return book.minHeight(three...) >= h+3 })
	var tx txJSON
	gpunetJSON(t, &tx, "tx", "send", bob.Address, "5sync", "--from", "alice", "--home", keyHome, "--node", apis[1])
	if tx.Code != 0 || tx.Height <= 0 {
		t.Fatalf("transfer with 3 of 4 validators: %+v", tx)
	}

	// Two down: 20 of 40 votes is not enough, no block commits (one already
	// being committed at the kill may still land).
	stop(2)
	two := names[:2]
	time.Sleep(500 * time.Millisecond)
	halted := book.maxHeight(two...)
	seen := book.minHeight(two...)
	time.Sleep(3 * time.Second)
	if now := book.maxHeight(two...); now > halted+1 {
		t.Fatalf("with 2 of 4 validators the chain went from height %d to %d", halted, now)
	}
	for _, i := range []int{0, 1} {
		if s := status(t, "--node", apis[i]); s.Height < seen || s.Height > halted+1 {
			t.Fatalf("%s reports height %d while halted at %d", names[i], s.Height, halted)
		}
	}
	book.check(t)

	// Both back: all four catch up, go on, and agree.
	start(2)
	start(3)
	waitUntil(t, 60*time.Second, "all four validators past the halt", func() bool { return book.minHeight(names...) >= halted+3 })
	waitUntil(t, 30*time.Second, "a height that all four report", func() bool { return len(book.commonHeights(halted+2, names...)) > 0 })
	book.check(t)
	t.Logf("halted at height %d; all four then agreed on heights %v; %d heights seen by several nodes, no disagreement",
		halted, book.commonHeights(halted+2, names...), book.compared)

	for i := range nodes {
		// alice paid the transfer and the chain's minimum fee (gpunet init
		// writes the default parameters).
		for who, want := range map[string]uint64{alice.Address: 995_000_000 - ledger.DefaultParams().MinFee, bob.Address: 5_000_000} {
			if got := balance(t, who, "--home", keyHome, "--node", apis[i]); got != want {
				t.Errorf("%s: balance of %s is %d, want %d", names[i], who, got, want)
			}
		}
	}
}
