package validator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// fakeNode serves what a node of the network in netHome answers at GET
// /v1/net/info and /v1/genesis.
func fakeNode(t *testing.T, snapshots bool) (*httptest.Server, string) {
	t.Helper()
	netHome := t.TempDir()
	if _, err := Init(netHome, InitOptions{ChainID: "joinme", Validators: 1, Genesis: lt.Genesis(5, "alice"), BlockTime: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	gen, err := os.ReadFile(filepath.Join(netHome, "config/genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(gen)
	info := apiwire.NetInfo{ChainID: "joinme", GenesisSHA256: hex.EncodeToString(sum[:]), NodeID: strings.Repeat("ab", 20),
		P2PAddress: strings.Repeat("ab", 20) + "@0.0.0.0:26656", RPCAddress: "127.0.0.1:26657", BlockTime: "200ms",
		Peers:        []apiwire.NetPeer{{NodeID: strings.Repeat("cd", 20), P2PAddress: strings.Repeat("cd", 20) + "@127.0.0.2:26656", RPCAddress: "127.0.0.2:26657"}},
		LatestHeight: 50, LatestHash: strings.Repeat("EF", 32), TrustHeight: 50, TrustHash: strings.Repeat("EF", 32), SnapshotInterval: 20}
	if snapshots {
		info.Snapshots = []apiwire.SnapshotInfo{{Height: 40, Format: 1, Chunks: 1}}
		info.TrustHeight, info.TrustHash = 40, strings.Repeat("12", 32)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/net/info", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(info)
	})
	mux.HandleFunc("GET /v1/genesis", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(gen)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, info.GenesisSHA256
}

func TestJoin(t *testing.T) {
	srv, hash := fakeNode(t, true)
	home := filepath.Join(t.TempDir(), "full")
	res, err := Join(t.Context(), home, JoinOptions{URL: srv.URL, GenesisSHA256: strings.ToUpper(hash)})
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
	if !ss.Enable || ss.TrustHeight != 40 || ss.TrustHash != strings.Repeat("12", 32) || strings.Join(ss.RPCServers, ",") != "127.0.0.1:26657,127.0.0.2:26657" {
		t.Fatalf("state sync: %+v", ss)
	}
	if !res.StateSync || res.GenesisSHA256 != hash || res.NodeID == "" || !strings.HasPrefix(c.Moniker, "full-") {
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
	if _, err := Join(t.Context(), home, JoinOptions{URL: srv.URL}); err == nil || !strings.Contains(err.Error(), "already initialised") {
		t.Fatalf("second join: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(home, ConfigFile)); string(after) != string(before) {
		t.Fatal("second join changed the config")
	}
}

func TestJoinWithoutSnapshots(t *testing.T) {
	srv, _ := fakeNode(t, false)
	home := t.TempDir() // exists, empty: allowed
	res, err := Join(t.Context(), home, JoinOptions{URL: srv.URL + "/"})
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
	srv, hash := fakeNode(t, true)
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
			_, err := Join(t.Context(), home, JoinOptions{URL: tc.url, GenesisSHA256: tc.hash})
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
