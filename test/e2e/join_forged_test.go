package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestJoinForgedChain: two running networks with the same chain id, the
// real one (two validators) and a forged one (another validator, and an
// account with 1,000,000 SYNC). A lying join node (a proxy here) serves
// the real network's genesis, so that --genesis-hash matches, but answers
// /v1/net/info with what it likes; `gpunet init --join PROXY --genesis-hash
// H` must refuse every lie that would put the new node on the forged
// chain, name the source that lied, and write nothing:
//   - the forged network's header and RPC servers;
//   - the real RPC servers but a header of the forged chain;
//   - a peer whose RPC is the forged chain's;
//   - no peer at all (the join node alone vouches for its header): refused
//     until --witness names another node's RPC, and then joined.
func TestJoinForgedChain(t *testing.T) {
	parallel(t, weightLight)
	root := t.TempDir()
	keyHome := filepath.Join(root, "keys")
	var alice keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", keyHome)
	var real struct {
		Homes []string `json:"homes"`
	}
	initNet(t, &real, "--validators", "2", "--home", filepath.Join(root, "real"), "--chain-id", "e2e-forge",
		"--block-time", "200ms", "--snapshot-interval", "10", "--account", alice.Address+"=1000sync")
	forgedHome := filepath.Join(root, "forged")
	var forgedNet struct{}
	initNet(t, &forgedNet, "--validators", "1", "--home", forgedHome, "--chain-id", "e2e-forge",
		"--block-time", "200ms", "--snapshot-interval", "10", "--account", alice.Address+"=1000000sync")

	start := func(name, home string) string {
		p := startProc(t, name, "node", "--home", home, "--output", "json")
		var info struct {
			API string `json:"api"`
		}
		p.jsonLine(60*time.Second, &info)
		return info.API
	}
	apis := []string{start("node0", real.Homes[0]), start("node1", real.Homes[1])}
	forgedAPI := start("forged", forgedHome)
	// Each serving a snapshot, with two blocks after it.
	netInfo := func(api string, peers int) apiwire.NetInfo {
		var info apiwire.NetInfo
		waitUntil(t, 90*time.Second, api+" serving a snapshot", func() bool {
			if err := getJSON(api+"/v1/net/info", &info); err != nil {
				return false
			}
			return len(info.Snapshots) > 0 && info.LatestHeight >= int64(info.Snapshots[0].Height)+2 && len(info.Peers) == peers
		})
		return info
	}
	honest, forged := netInfo(apis[0], 1), netInfo(forgedAPI, 0)
	gen, err := os.ReadFile(filepath.Join(real.Homes[0], "config", "genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(gen)
	hash := hex.EncodeToString(sum[:])
	if honest.ChainID != forged.ChainID || forged.GenesisSHA256 == hash || honest.Peers[0].RPCAddress == "" {
		t.Fatalf("networks: real %+v, forged %+v: want the same chain id, other genesis files, and node1's RPC known", honest, forged)
	}
	rpcOf := func(home string) string {
		c, err := validator.LoadConfig(home)
		if err != nil {
			t.Fatal(err)
		}
		return c.RPC
	}
	node1RPC, forgedRPC := rpcOf(real.Homes[1]), rpcOf(forgedHome)

	// The lying join node: the real genesis, byte for byte, and whatever
	// net info the case sets.
	var mu sync.Mutex
	var lie apiwire.NetInfo
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/genesis", func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(apis[0] + "/v1/genesis")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		io.Copy(w, resp.Body)
	})
	mux.HandleFunc("GET /v1/net/info", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		info := lie
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(info)
	})
	proxy := httptest.NewServer(mux)
	defer proxy.Close()
	set := func(edit func(info *apiwire.NetInfo)) {
		mu.Lock()
		defer mu.Unlock()
		lie = honest
		lie.Peers = slices.Clone(honest.Peers)
		edit(&lie)
	}

	for i, tc := range []struct {
		name string
		edit func(info *apiwire.NetInfo)
		want []string
	}{
		{"the forged network's header and RPC servers", func(info *apiwire.NetInfo) {
			*info = forged
			info.GenesisSHA256 = hash
		}, []string{"refusing to join", forgedRPC, "rpc_address of " + proxy.URL, "another chain with the same chain id", "nothing written"}},
		{"a header of the forged chain", func(info *apiwire.NetInfo) {
			info.TrustHash = forged.LatestHash
		}, []string{"refusing to join", proxy.URL + " says the block at height", "lied", "nothing written"}},
		{"a peer on the forged chain", func(info *apiwire.NetInfo) {
			info.Peers[0].RPCAddress = forgedRPC
		}, []string{"refusing to join", forgedRPC, "RPC of peer", "another chain with the same chain id", "nothing written"}},
		{"no other RPC server", func(info *apiwire.NetInfo) {
			info.Peers = nil
		}, []string{"refusing to join", "--witness", "--trust-hash", "nothing written"}},
	} {
		set(tc.edit)
		home := filepath.Join(root, "lied", string(rune('a'+i)))
		r := wantFail(t, 1, tc.want, "init", "--join", proxy.URL, "--genesis-hash", hash, "--home", home)
		t.Logf("%s: %s", tc.name, strings.TrimSpace(r.stderr))
		if _, err := os.Stat(home); !os.IsNotExist(err) {
			t.Errorf("%s: %s was written (%v)", tc.name, home, err)
		}
	}

	// The same join node that names no peer, with node1's RPC as a
	// witness: joined, from the real chain's header.
	set(func(info *apiwire.NetInfo) { info.Peers = nil })
	var joined validator.JoinResult
	gpunetJSON(t, &joined, "init", "--join", proxy.URL, "--genesis-hash", hash, "--witness", "http://"+node1RPC, "--home", filepath.Join(root, "witnessed"))
	if !joined.StateSync || joined.TrustHeight != honest.TrustHeight || !strings.EqualFold(joined.TrustHash, honest.TrustHash) ||
		len(joined.RPCServers) != 2 || joined.RPCServers[1] != "http://"+node1RPC || joined.VerifiedFrom != "the genesis" {
		t.Fatalf("init --join with --witness: %+v, want the real header at %d (%s) via the join node's RPC and node1's", joined, honest.TrustHeight, honest.TrustHash)
	}
}
