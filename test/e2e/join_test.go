package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestJoinByStateSync: a network of two validators taking a snapshot every
// 10 blocks; a new home made with `gpunet init --join <node0's API>
// --genesis-hash <its genesis's hash>` starts with `gpunet node`, restores
// the latest snapshot (its block store starts past height 1: it did not
// replay the chain), follows the chain with the validators' app hashes, and
// accepts a tx. Bad input to --join (a URL that is no gpunet node, a wrong
// genesis hash, an initialised home) is refused and writes nothing.
func TestJoinByStateSync(t *testing.T) {
	parallel(t, weightLight)
	root := t.TempDir()
	keyHome := filepath.Join(root, "keys")
	var alice, bob keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", keyHome)
	gpunetJSON(t, &bob, "keys", "add", "bob", "--home", keyHome)
	var net struct {
		Homes []string `json:"homes"`
	}
	initNet(t, &net, "--validators", "2", "--home", filepath.Join(root, "net"), "--chain-id", "e2e-join",
		"--block-time", "200ms", "--snapshot-interval", "10", "--account", alice.Address+"=1000sync")

	book := newHashBook()
	names := []string{"node0", "node1"}
	apis := make([]string, 2)
	for i, h := range net.Homes {
		p := startProc(t, names[i], "node", "--home", h, "--output", "json")
		var info struct {
			API string `json:"api"`
		}
		p.jsonLine(60*time.Second, &info)
		apis[i] = info.API
		watch(t, book, names[i], info.API)
	}
	// A node answers status (which tx send asks first) from its first
	// block on: before it, "could not find validator set for height #0".
	waitUntil(t, time.Minute, "both nodes' first block", func() bool { return book.minHeight(names...) >= 1 })
	for i := range 3 {
		var tx txJSON
		gpunetJSON(t, &tx, "tx", "send", bob.Address, strconv.Itoa(i+1)+"sync", "--from", "alice", "--home", keyHome, "--node", apis[i%2])
		if tx.Code != 0 {
			t.Fatalf("transfer %d: %+v", i, tx)
		}
	}
	// A snapshot, with two blocks after it (the light client verifies the
	// snapshot's app hash from the header of the block after it, and that
	// block's commit from the next).
	var info apiwire.NetInfo
	waitUntil(t, 60*time.Second, "node0 serving a snapshot", func() bool {
		if err := getJSON(apis[0]+"/v1/net/info", &info); err != nil {
			return false
		}
		return len(info.Snapshots) > 0 && info.LatestHeight >= int64(info.Snapshots[0].Height)+2
	})
	gen, err := os.ReadFile(filepath.Join(net.Homes[0], "config", "genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(gen)
	hash := hex.EncodeToString(sum[:])
	if info.GenesisSHA256 != hash || info.ChainID != "e2e-join" || len(info.Peers) != 1 || info.Peers[0].RPCAddress == "" {
		t.Fatalf("net info: %+v, want chain e2e-join, genesis %s and node1 with its RPC address as a peer", info, hash)
	}

	// Bad input: each an error that says what is wrong, nothing written.
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<!doctype html><title>Not a node</title>"))
	}))
	defer html.Close()
	notNode := filepath.Join(root, "not-a-node")
	wantFail(t, 1, []string{"not a gpunet node", "text/html", "want 200 with JSON"}, "init", "--join", html.URL, "--home", notNode)
	wrongHash := filepath.Join(root, "wrong-hash")
	other := strings.Repeat("ab", 32)
	wantFail(t, 1, []string{hash, other, "--genesis-hash"}, "init", "--join", apis[0], "--genesis-hash", other, "--home", wrongHash)
	for _, h := range []string{notNode, wrongHash} {
		if _, err := os.Stat(h); !os.IsNotExist(err) {
			t.Errorf("%s was written (%v)", h, err)
		}
	}
	cfgBefore, _ := os.ReadFile(filepath.Join(net.Homes[1], validator.ConfigFile))
	wantFail(t, 1, []string{"already initialised"}, "init", "--join", apis[0], "--home", net.Homes[1])
	if cfgAfter, _ := os.ReadFile(filepath.Join(net.Homes[1], validator.ConfigFile)); string(cfgAfter) != string(cfgBefore) {
		t.Error("init --join changed an initialised home's config")
	}

	// The join.
	full := filepath.Join(root, "full")
	var joined validator.JoinResult
	gpunetJSON(t, &joined, "init", "--join", apis[0], "--genesis-hash", hash, "--home", full)
	if !joined.StateSync || joined.ChainID != "e2e-join" || len(joined.Peers) != 2 || len(joined.RPCServers) != 2 || joined.RPCServers[0] == joined.RPCServers[1] {
		t.Fatalf("init --join: %+v, want state sync from the two validators", joined)
	}
	joinStart := time.Now()
	p := startProc(t, "full", "node", "--home", full, "--output", "json")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(full, "logs", "cometbft.log"))
			t.Logf("--- the full node's logs/cometbft.log (tail):\n%s", tail(string(b), 12000))
		}
	})
	var fullInfo struct {
		API string `json:"api"`
	}
	p.jsonLine(60*time.Second, &fullInfo)
	cl := chainclient.New(fullInfo.API)
	target := book.maxHeight(names...)
	waitUntil(t, 120*time.Second, "the full node past the validators' height at its start", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := cl.Status(ctx)
		return err == nil && st.Height > target
	})
	t.Logf("the full node passed height %d %.1fs after its start", target, time.Since(joinStart).Seconds())
	// Watched only now: while restoring, it shows an empty state.
	w := watch(t, book, "full", fullInfo.API)
	from := w.firstHeight()
	waitUntil(t, 30*time.Second, "heights all three nodes reported", func() bool {
		return len(book.commonHeights(max(from, target+1), "node0", "node1", "full")) >= 3
	})
	book.check(t)

	// It restored a snapshot rather than replaying: its block store starts
	// after the snapshot's height, and its log says so.
	cfg, err := validator.LoadConfig(full)
	if err != nil {
		t.Fatal(err)
	}
	var rpc struct {
		Result struct {
			SyncInfo struct {
				EarliestBlockHeight string `json:"earliest_block_height"`
			} `json:"sync_info"`
		} `json:"result"`
	}
	if err := getJSON("http://"+cfg.RPC+"/status", &rpc); err != nil {
		t.Fatal(err)
	}
	if base, _ := strconv.ParseInt(rpc.Result.SyncInfo.EarliestBlockHeight, 10, 64); base <= 1 {
		t.Fatalf("the full node's block store starts at %q: it replayed the chain", rpc.Result.SyncInfo.EarliestBlockHeight)
	}
	logb, _ := os.ReadFile(filepath.Join(full, "logs", "cometbft.log"))
	if !strings.Contains(string(logb), "Snapshot restored") {
		t.Fatalf("the full node's log does not say it restored a snapshot:\n%s", tail(string(logb), 3000))
	}

	// A working node: a tx sent through it lands.
	var tx txJSON
	gpunetJSON(t, &tx, "tx", "send", bob.Address, "1sync", "--from", "alice", "--home", keyHome, "--node", fullInfo.API)
	if tx.Code != 0 || tx.Height <= 0 {
		t.Fatalf("transfer through the full node: %+v", tx)
	}
	if got := balance(t, bob.Address, "--node", apis[1]); got != 7_000_000 {
		t.Fatalf("bob has %d usync on node1, want 7sync", got)
	}
	book.check(t)
}

// getJSON GETs u and decodes its JSON body into v.
func getJSON(u string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &httpStatusError{resp.Status}
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

type httpStatusError struct{ status string }

func (e *httpStatusError) Error() string { return "HTTP " + e.status }
