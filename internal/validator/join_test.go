package validator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cometbft/cometbft/light/provider"
	"github.com/cometbft/cometbft/privval"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/apiwire"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// fakeNet is a network as a joining node sees it: a node's API (GET
// /v1/net/info and /v1/genesis) and CometBFT RPC servers serving signed
// headers, in memory.
type fakeNet struct {
	srv  *httptest.Server
	hash string // the genesis's SHA-256
	doc  *cmttypes.GenesisDoc
	// info is what the API answers; tests may change it before joining.
	info apiwire.NetInfo
	// chain is the network's blocks; rpc serves them at the addresses
	// info names (127.0.0.1:26657 and the peer's 127.0.0.2:26657).
	chain chain
	rpc   rpcNet
}

// fakeNode starts a fakeNet of one validator (whose key signs the
// blocks); with snapshots its node offers the header at height 40.
func fakeNode(t *testing.T, snapshots bool) *fakeNet {
	t.Helper()
	netHome := t.TempDir()
	if _, err := Init(netHome, InitOptions{ChainID: "joinme", Validators: 1, Genesis: lt.Genesis(5, "alice"), BlockTime: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	gen, err := os.ReadFile(filepath.Join(netHome, "config/genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := cmttypes.GenesisDocFromJSON(gen)
	if err != nil {
		t.Fatal(err)
	}
	pv := privval.LoadFilePV(filepath.Join(netHome, "config/priv_validator_key.json"), filepath.Join(netHome, "data/priv_validator_state.json"))
	sum := sha256.Sum256(gen)
	f := &fakeNet{hash: hex.EncodeToString(sum[:]), doc: doc}
	f.chain = newSigner(t, doc, pv.Key.PrivKey).extend(t, nil, 50, "real")
	f.rpc = rpcNet{"127.0.0.1:26657": f.chain, "127.0.0.2:26657": f.chain}
	f.info = apiwire.NetInfo{ChainID: "joinme", GenesisSHA256: f.hash, NodeID: strings.Repeat("ab", 20),
		P2PAddress: strings.Repeat("ab", 20) + "@0.0.0.0:26656", RPCAddress: "127.0.0.1:26657", BlockTime: "200ms",
		Peers:        []apiwire.NetPeer{{NodeID: strings.Repeat("cd", 20), P2PAddress: strings.Repeat("cd", 20) + "@127.0.0.2:26656", RPCAddress: "127.0.0.2:26657"}},
		LatestHeight: 50, LatestHash: hex.EncodeToString(f.chain[50].Hash()), TrustHeight: 50, TrustHash: hex.EncodeToString(f.chain[50].Hash()), SnapshotInterval: 20}
	if snapshots {
		f.info.Snapshots = []apiwire.SnapshotInfo{{Height: 40, Format: 1, Chunks: 1}}
		f.info.TrustHeight, f.info.TrustHash = 40, hex.EncodeToString(f.chain[40].Hash())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/net/info", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(f.info)
	})
	mux.HandleFunc("GET /v1/genesis", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(gen)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// options are JoinOptions for joining f through its API.
func (f *fakeNet) options() JoinOptions {
	return JoinOptions{URL: f.srv.URL, newProvider: f.rpc.newProvider}
}

func TestJoin(t *testing.T) {
	f := fakeNode(t, true)
	srv, hash := f.srv, f.hash
	home := filepath.Join(t.TempDir(), "full")
	o := f.options()
	o.GenesisSHA256 = strings.ToUpper(hash)
	res, err := Join(t.Context(), home, o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.Split(strings.TrimPrefix(srv.URL, "http://"), ":")[0]
	wantPeers := []string{strings.Repeat("ab", 20) + "@" + host + ":26656", strings.Repeat("cd", 20) + "@127.0.0.2:26656"}
	if c.ChainID != "joinme" || strings.Join(c.PersistentPeers, ",") != strings.Join(wantPeers, ",") ||
		len(c.PeerAPIs) != 1 || c.PeerAPIs[0] != srv.URL || time.Duration(c.BlockTime) != 200*time.Millisecond || c.SnapshotInterval != 20 {
		t.Fatalf("config: %+v", c)
	}
	ss := c.StateSync
	if !ss.Enable || ss.TrustHeight != 40 || ss.TrustHash != fmt.Sprintf("%X", f.chain[40].Hash()) || strings.Join(ss.RPCServers, ",") != "127.0.0.1:26657,127.0.0.2:26657" {
		t.Fatalf("state sync: %+v", ss)
	}
	if !res.StateSync || res.GenesisSHA256 != hash || res.NodeID == "" || !strings.HasPrefix(c.Moniker, "full-") || res.VerifiedFrom != "the genesis" {
		t.Fatalf("result: %+v, moniker %q", res, c.Moniker)
	}
	gen, _ := os.ReadFile(filepath.Join(home, "config/genesis.json"))
	if sum := sha256.Sum256(gen); hex.EncodeToString(sum[:]) != hash {
		t.Fatal("genesis not written byte for byte")
	}
	for _, f := range []string{"config/priv_validator_key.json", "config/node_key.json", "data/priv_validator_state.json"} {
		if _, err := os.Stat(filepath.Join(home, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Again into the same home: refused, and the home is unchanged.
	before, _ := os.ReadFile(filepath.Join(home, ConfigFile))
	if _, err := Join(t.Context(), home, f.options()); err == nil || !strings.Contains(err.Error(), "already initialised") {
		t.Fatalf("second join: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(home, ConfigFile)); string(after) != string(before) {
		t.Fatal("second join changed the config")
	}
}

func TestJoinWithoutSnapshots(t *testing.T) {
	f := fakeNode(t, false)
	f.rpc = nil         // not asked: without snapshots there is no header to trust
	home := t.TempDir() // exists, empty: allowed
	o := f.options()
	o.URL += "/"
	res, err := Join(t.Context(), home, o)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := LoadConfig(home)
	if res.StateSync || c.StateSync.Enable || len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "replay") {
		t.Fatalf("without snapshots: %+v, notes %q", c.StateSync, res.Notes)
	}
}

// TestJoinRefusesWhatIsNoNode: a URL that is no gpunet node, and a genesis
// other than the one asked for, are refused with an error that says what
// was expected, and nothing is written.
func TestJoinRefusesWhatIsNoNode(t *testing.T) {
	f := fakeNode(t, true)
	srv, hash := f.srv, f.hash
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>hello</body></html>"))
	}))
	defer html.Close()
	wrongJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"hello":"world"}`))
	}))
	defer wrongJSON.Close()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	other := strings.Repeat("0", 64)
	for _, tc := range []struct {
		name, url, hash string
		want            []string
	}{
		{"html page", html.URL, "", []string{"not a gpunet node", "text/html", "want 200 with JSON"}},
		{"404", notFound.URL, "", []string{"not a gpunet node", "404"}},
		{"wrong json", wrongJSON.URL, "", []string{"not a gpunet node", "hello"}},
		{"connection refused", closed.URL, "", []string{"cannot reach", "gpunet node"}},
		{"not a URL", "localhost:8080", "", []string{"want the http(s) URL"}},
		{"wrong genesis hash", srv.URL, other, []string{hash, other, "--genesis-hash", "nothing written"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "full")
			_, err := Join(t.Context(), home, JoinOptions{URL: tc.url, GenesisSHA256: tc.hash, newProvider: f.rpc.newProvider})
			if err == nil {
				t.Fatal("joined")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(home); !os.IsNotExist(err) {
				t.Errorf("home written: %v", err)
			}
		})
	}
}

// TestJoinRefusesForgedChain: a join node that serves the real genesis but
// the header and RPC servers of another chain with the same chain id (and
// the same genesis app state, other validators) is refused, naming the
// servers that lied; so is one that lies about the header only, and bad
// --trust-*/--witness flags. Nothing is written. With --witness, a join
// node that names no peer is joined.
func TestJoinRefusesForgedChain(t *testing.T) {
	f := fakeNode(t, true)
	forged := newSigner(t, f.doc, genKeys(1)...).extend(t, nil, 50, "forged")
	f.rpc["127.0.0.66:26657"], f.rpc["127.0.0.67:26657"] = forged, forged
	honest := f.info
	for _, tc := range []struct {
		name string
		edit func(info *apiwire.NetInfo, o *JoinOptions)
		want []string
	}{
		{"another chain's header and servers", func(info *apiwire.NetInfo, o *JoinOptions) {
			info.RPCAddress, info.Peers[0].RPCAddress = "127.0.0.66:26657", "127.0.0.67:26657"
			info.TrustHash = hex.EncodeToString(forged[40].Hash())
		}, []string{"refusing", "127.0.0.66:26657 (rpc_address of " + f.srv.URL + ")", "127.0.0.67:26657", "another chain with the same chain id", "nothing written"}},
		{"another chain's header", func(info *apiwire.NetInfo, o *JoinOptions) {
			info.TrustHash = hex.EncodeToString(forged[40].Hash())
		}, []string{"refusing", f.srv.URL + " says the block at height 40", "lied"}},
		{"a witness on another chain", func(info *apiwire.NetInfo, o *JoinOptions) {
			info.Peers = nil
			o.Witnesses = []string{"127.0.0.66:26657"}
		}, []string{"refusing", "127.0.0.66:26657 (--witness)", "another chain"}},
		{"no witness", func(info *apiwire.NetInfo, o *JoinOptions) { info.Peers = nil }, []string{"refusing", "--witness", "--trust-hash"}},
		{"trust height without hash", func(info *apiwire.NetInfo, o *JoinOptions) { o.TrustHeight = 20 }, []string{"--trust-height and --trust-hash go together"}},
		{"bad trust hash", func(info *apiwire.NetInfo, o *JoinOptions) { o.TrustHeight, o.TrustHash = 20, "abc" }, []string{"--trust-hash", "64 hex digits"}},
		{"bad witness", func(info *apiwire.NetInfo, o *JoinOptions) { o.Witnesses = []string{"nowhere"} }, []string{"--witness", "CometBFT RPC"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.info = honest
			f.info.Peers = slices.Clone(honest.Peers)
			o := f.options()
			o.GenesisSHA256 = f.hash
			tc.edit(&f.info, &o)
			home := filepath.Join(t.TempDir(), "full")
			_, err := Join(t.Context(), home, o)
			if err == nil {
				t.Fatal("joined")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if _, err := os.Stat(home); !os.IsNotExist(err) {
				t.Errorf("home written: %v", err)
			}
		})
	}

	// A join node that names no peer, with a witness given: joined, and
	// the witness is one of the RPC servers.
	f.info = honest
	f.info.Peers = nil
	o := f.options()
	o.Witnesses = []string{"http://127.0.0.2:26657"}
	home := filepath.Join(t.TempDir(), "full")
	res, err := Join(t.Context(), home, o)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.RPCServers, ",") != "127.0.0.1:26657,http://127.0.0.2:26657" || res.TrustHeight != 40 {
		t.Fatalf("joined with a witness: %+v", res)
	}
	// Pinned, with the join node alone: joined, the join node named twice.
	o = f.options()
	o.TrustHeight, o.TrustHash = 20, hex.EncodeToString(f.chain[20].Hash())
	home = filepath.Join(t.TempDir(), "full")
	if res, err = Join(t.Context(), home, o); err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.RPCServers, ",") != "127.0.0.1:26657,127.0.0.1:26657" || !strings.Contains(res.VerifiedFrom, "pinned at height 20") || len(res.Notes) == 0 {
		t.Fatalf("joined with a pinned header: %+v", res)
	}
}

// TestJoinNetOptions: init --join's --listen, --external-address and
// --persistent-peers land in the joined home's config, the peers besides
// the network's, and the result says where the node will listen.
func TestJoinNetOptions(t *testing.T) {
	f := fakeNode(t, true)
	home := filepath.Join(t.TempDir(), "full")
	extra := strings.Repeat("ef", 20) + "@198.51.100.9:26656"
	o := f.options()
	o.Net = NetOptions{Listen: "127.0.0.2", ExternalAddress: "127.0.0.3", PersistentPeers: []string{extra}}
	res, err := Join(t.Context(), home, o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{c.API, c.P2P, c.RPC} {
		if !strings.HasPrefix(a, "127.0.0.2:") {
			t.Errorf("address %s is not on --listen 127.0.0.2", a)
		}
	}
	if _, port, _ := strings.Cut(c.P2P, ":"); c.ExternalAddress != "127.0.0.3:"+port {
		t.Errorf("external_address %q, want 127.0.0.3 with the p2p port of %s", c.ExternalAddress, c.P2P)
	}
	if len(c.PersistentPeers) != 3 || c.PersistentPeers[2] != extra {
		t.Errorf("persistent_peers %v, want the network's two and %s", c.PersistentPeers, extra)
	}
	if res.P2P != c.P2P || res.RPC != c.RPC || res.API != "http://"+c.API || res.ExternalAddress != c.ExternalAddress || len(res.Peers) != 3 {
		t.Errorf("result %+v does not say the config's addresses %+v", res, c)
	}
	bad := f.options()
	bad.Net = NetOptions{ExternalAddress: "0.0.0.0"}
	if _, err := Join(t.Context(), filepath.Join(t.TempDir(), "bad"), bad); err == nil || !strings.Contains(err.Error(), "--external-address") {
		t.Errorf("join with --external-address 0.0.0.0: %v", err)
	}
}

// TestJoinSaysWhenRPCUnreachable: when the CometBFT RPC servers state
// sync needs do not answer (real connections, refused), init --join says
// it cannot reach them, which ports it needs, and what to do, and writes
// nothing.
func TestJoinSaysWhenRPCUnreachable(t *testing.T) {
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	joinRPC, peerRPC := closed(), closed()
	f := fakeNode(t, true)
	f.info.RPCAddress, f.info.Peers[0].RPCAddress = joinRPC, peerRPC
	for _, tc := range []struct {
		name string
		// reachable are the servers that answer (from f.chain); the
		// others are dialled for real.
		reachable []string
		want      []string
	}{
		{"none answers", nil, []string{"refusing to join: cannot reach the CometBFT RPC of", joinRPC + " (rpc_address of " + f.srv.URL + ")", peerRPC, "connection refused",
			"port 26657", "two nodes", "--rpc 0.0.0.0:26657", "--witness", "nothing written"}},
		{"only the join node answers", []string{joinRPC}, []string{"no other CometBFT RPC server confirmed it", "cannot reach the CometBFT RPC of", peerRPC, "connection refused",
			"two nodes", "--witness", "--trust-height", "nothing written"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.options()
			o.newProvider = func(chainID, addr string) (provider.Provider, error) {
				if slices.Contains(tc.reachable, addr) {
					return f.chain.serve(chainID), nil
				}
				return httpProvider(chainID, addr)
			}
			home := filepath.Join(t.TempDir(), "full")
			_, err := Join(t.Context(), home, o)
			if err == nil {
				t.Fatal("joined")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if _, err := os.Stat(home); !os.IsNotExist(err) {
				t.Errorf("home written: %v", err)
			}
		})
	}
}

// TestLoopbackFromAfar: a loopback RPC address named by a join node that
// is not on loopback is one this machine cannot reach.
func TestLoopbackFromAfar(t *testing.T) {
	for _, tc := range []struct {
		join, addr string
		want       bool
	}{
		{"http://203.0.113.7:26680", "127.0.0.1:26657", true},
		{"http://203.0.113.7:26680", "http://localhost:26657", true},
		{"http://203.0.113.7:26680", "[::1]:26657", true},
		{"http://203.0.113.7:26680", "203.0.113.8:26657", false},
		{"http://127.0.0.1:26680", "127.0.0.1:26657", false},
		{"http://localhost:26680", "127.0.0.2:26657", false},
	} {
		if got := loopbackFromAfar(tc.join, tc.addr); got != tc.want {
			t.Errorf("loopbackFromAfar(%s, %s) = %v, want %v", tc.join, tc.addr, got, tc.want)
		}
	}
}
