package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/validator"
)

// TestByzantineDoubleSigner runs four validators of equal power, one of
// them Byzantine: node3's validator key runs in two processes at once (a
// twin with its own node key, ports and empty signing state), so the key
// can sign two different votes or proposals at one height. With three
// honest validators (30 of 40 votes) the chain must go on, every node
// must report one app hash per height, and a transfer must commit.
func TestByzantineDoubleSigner(t *testing.T) {
	root := t.TempDir()
	keyHome := filepath.Join(root, "keys")
	var alice, bob keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", keyHome)
	gpunetJSON(t, &bob, "keys", "add", "bob", "--home", keyHome)
	var net struct {
		Homes []string `json:"homes"`
	}
	gpunetJSON(t, &net, "init", "--validators", "4", "--home", filepath.Join(root, "net"),
		"--chain-id", "e2e", "--block-time", "200ms", "--account", alice.Address+"=1000sync")
	if len(net.Homes) != 4 {
		t.Fatalf("init wrote %d homes, want 4", len(net.Homes))
	}

	// The twin: node3's home (validator key, genesis, fresh signing
	// state) with a node key and ports of its own.
	twin := filepath.Join(root, "twin")
	if err := os.CopyFS(twin, os.DirFS(net.Homes[3])); err != nil {
		t.Fatal(err)
	}
	spare := filepath.Join(root, "spare")
	gpunet(t, "init", "--home", spare, "--chain-id", "spare")
	nodeKey, err := os.ReadFile(filepath.Join(spare, "config/node_key.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(twin, "config/node_key.json"), nodeKey, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := validator.LoadConfig(twin)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Moniker = "node3-twin"
	for _, p := range []*string{&cfg.API, &cfg.P2P, &cfg.RPC} {
		if *p, err = validator.FreeAddr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := validator.SaveConfig(twin, cfg); err != nil {
		t.Fatal(err)
	}

	book := newHashBook()
	names := []string{"node0", "node1", "node2", "node3", "node3-twin"}
	homes := append(append([]string{}, net.Homes...), twin)
	apis := make([]string, len(names))
	for i, name := range names {
		p := startProc(t, name, "node", "--home", homes[i], "--output", "json")
		var info struct {
			API string `json:"api"`
		}
		p.jsonLine(60*time.Second, &info)
		apis[i] = info.API
		watch(t, book, name, info.API)
	}
	honest := names[:3]
	waitUntil(t, 60*time.Second, "the honest validators at height 3", func() bool { return book.minHeight(honest...) >= 3 })
	h := book.minHeight(honest...)
	// Long enough for the twin to catch up and sign alongside node3.
	waitUntil(t, 90*time.Second, "15 more blocks with a double-signing validator", func() bool { return book.minHeight(honest...) >= h+15 })
	var tx txJSON
	gpunetJSON(t, &tx, "tx", "send", bob.Address, "5sync", "--from", "alice", "--home", keyHome, "--node", apis[0])
	if tx.Code != 0 || tx.Height <= 0 {
		t.Fatalf("transfer with a double-signing validator: %+v", tx)
	}
	waitUntil(t, 30*time.Second, "a height all honest nodes report after the transfer", func() bool {
		return len(book.commonHeights(tx.Height+1, honest...)) > 0
	})
	book.check(t)
	for _, i := range []int{0, 1, 2} {
		if got := balance(t, bob.Address, "--home", keyHome, "--node", apis[i]); got != 5_000_000 {
			t.Errorf("%s: bob's balance %d, want 5000000", names[i], got)
		}
	}
	t.Logf("heights %d → %d with node3's key in two processes (node3 at %d, twin at %d); %d heights compared, no disagreement",
		h, book.maxHeight(honest...), book.maxHeight("node3"), book.maxHeight("node3-twin"), book.compared)
}
