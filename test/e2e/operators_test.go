package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/validator"
)

// nodeJSON is the line `gpunet node --output json` prints once running.
type nodeJSON struct {
	API            string `json:"api"`
	NodeID         string `json:"node_id"`
	P2P            string `json:"p2p"`
	P2PListen      string `json:"p2p_listen"`
	RPC            string `json:"rpc"`
	AddrBookStrict bool   `json:"addr_book_strict"`
}

// TestOperatorsAcrossAddresses runs two nodes as two operators would on
// two machines, here two loopback addresses: a validator whose home init
// wrote on 127.0.0.2 (--listen), started with --external-address
// 127.0.0.5, and a full node on 127.0.0.3 that knows no peer until
// `gpunet node --persistent-peers` names the validator. The full node
// follows the chain with the validator's app hashes; both tell the
// external address as the validator's (its own net info, and the peer
// CometBFT's handshake told the full node); the validator's /metrics
// carries CometBFT's own (cometbft_consensus_height, cometbft_p2p_peers).
// init --join, given --listen, joins the pair on 127.0.0.4; with the full
// node stopped, a join whose only other RPC server cannot be reached says
// so. The full node, restarted without flags, finds its peer again from
// the config the flags were written to.
func TestOperatorsAcrossAddresses(t *testing.T) {
	parallel(t, weightLight)
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		l, err := net.Listen("tcp", ip+":0")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true: cannot listen on %s: %v", ip, err)
			}
			t.Skipf("cannot listen on %s (loopback is 127.0.0.1 alone here): %v", ip, err)
		}
		l.Close()
	}
	root := t.TempDir()
	val, full := filepath.Join(root, "validator"), filepath.Join(root, "full")
	var out struct{}
	initNet(t, &out, "--home", val, "--chain-id", "e2e-ops", "--block-time", "200ms", "--validator-stake", "0", "--listen", "127.0.0.2")
	// The full node: keys of its own from a one-validator init, the
	// network's genesis over the one init wrote, and no peer.
	initNet(t, &out, "--home", full, "--chain-id", "e2e-ops", "--block-time", "200ms", "--validator-stake", "0", "--listen", "127.0.0.3")
	gen, err := os.ReadFile(filepath.Join(val, "config", "genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "config", "genesis.json"), gen, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{val, full} {
		c := loadConfig(t, h)
		if len(c.PersistentPeers) != 0 || c.ExternalAddress != "" {
			t.Fatalf("%s: init wrote peers %v, external address %q", h, c.PersistentPeers, c.ExternalAddress)
		}
	}
	valCfg := loadConfig(t, val)
	for _, a := range []string{valCfg.API, valCfg.P2P, valCfg.RPC} {
		if !strings.HasPrefix(a, "127.0.0.2:") {
			t.Fatalf("init --listen 127.0.0.2 wrote %s", a)
		}
	}
	_, p2pPort, _ := net.SplitHostPort(valCfg.P2P)

	book := newHashBook()
	pv := startProc(t, "validator", "node", "--home", val, "--external-address", "127.0.0.5", "--output", "json")
	var vi nodeJSON
	pv.jsonLine(60*time.Second, &vi)
	advertised := vi.NodeID + "@127.0.0.5:" + p2pPort
	if vi.P2P != advertised || vi.P2PListen != valCfg.P2P || !strings.HasPrefix(vi.API, "http://127.0.0.2:") || vi.AddrBookStrict {
		t.Fatalf("validator: %+v, want p2p %s (listening on %s), its API on 127.0.0.2, a lax address book (loopback)", vi, advertised, valCfg.P2P)
	}
	if c := loadConfig(t, val); c.ExternalAddress != "127.0.0.5:"+p2pPort {
		t.Fatalf("--external-address was not written to the config: %q", c.ExternalAddress)
	}
	watch(t, book, "validator", vi.API)

	peer := vi.NodeID + "@" + valCfg.P2P
	pf := startProc(t, "full", "node", "--home", full, "--persistent-peers", peer, "--output", "json")
	var fi nodeJSON
	pf.jsonLine(60*time.Second, &fi)
	if !strings.HasPrefix(fi.API, "http://127.0.0.3:") {
		t.Fatalf("full node: %+v, want its API on 127.0.0.3", fi)
	}
	fw := watch(t, book, "full", fi.API)
	waitUntil(t, 60*time.Second, "the full node following the validator", func() bool {
		return len(book.commonHeights(3, "validator", "full")) >= 3
	})
	book.check(t)
	var fullNet, valNet apiwire.NetInfo
	if err := getJSON(fi.API+"/v1/net/info", &fullNet); err != nil {
		t.Fatal(err)
	}
	if len(fullNet.Peers) != 1 || fullNet.Peers[0].P2PAddress != advertised {
		t.Errorf("the full node's peers %+v: want the validator, as %s (its external address)", fullNet.Peers, advertised)
	}
	if err := getJSON(vi.API+"/v1/net/info", &valNet); err != nil {
		t.Fatal(err)
	}
	if valNet.P2PAddress != advertised {
		t.Errorf("the validator's net info says p2p_address %q, want %s", valNet.P2PAddress, advertised)
	}

	// CometBFT's metrics on the node's own /metrics.
	metrics := scrape(t, vi.API+"/metrics")
	if h := sample(metrics, `cometbft_consensus_height{chain_id="e2e-ops"}`); h < 3 {
		t.Errorf("cometbft_consensus_height{chain_id=\"e2e-ops\"} = %v, want at least 3", h)
	}
	if p := sample(metrics, `cometbft_p2p_peers{chain_id="e2e-ops"}`); p != 1 {
		t.Errorf("cometbft_p2p_peers{chain_id=\"e2e-ops\"} = %v, want 1", p)
	}
	if sample(metrics, "gpunet_consensus_height") < 3 {
		t.Errorf("/metrics lost gpunet's own metrics beside CometBFT's")
	}

	// init --join on a third address, once the validator serves a
	// snapshot: the pair's two RPC servers verify its header.
	waitUntil(t, 60*time.Second, "the validator serving a snapshot", func() bool {
		var info apiwire.NetInfo
		return getJSON(vi.API+"/v1/net/info", &info) == nil && len(info.Snapshots) > 0 && info.LatestHeight >= int64(info.Snapshots[0].Height)+2
	})
	var joined validator.JoinResult
	gpunetJSON(t, &joined, "init", "--join", vi.API, "--home", filepath.Join(root, "joined"), "--listen", "127.0.0.4")
	if !joined.StateSync || len(joined.RPCServers) != 2 || !strings.HasPrefix(joined.P2P, "127.0.0.4:") || !strings.HasPrefix(joined.API, "http://127.0.0.4:") {
		t.Errorf("init --join --listen 127.0.0.4: %+v", joined)
	}

	// The full node stops; its flags are in its config.
	if code := pf.stop(30 * time.Second); code != 0 {
		t.Fatalf("full node exited %d on SIGINT", code)
	}
	fw.stop()
	if c := loadConfig(t, full); !slices.Equal(c.PersistentPeers, []string{peer}) {
		t.Fatalf("the full node's config has persistent_peers %v, want [%s]", c.PersistentPeers, peer)
	}
	waitUntil(t, 30*time.Second, "the validator without peers", func() bool {
		var info apiwire.NetInfo
		return getJSON(vi.API+"/v1/net/info", &info) == nil && len(info.Peers) == 0
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	lonely := filepath.Join(root, "lonely")
	wantFail(t, 1, []string{"cannot reach the CometBFT RPC of", closed + " (--witness)", "connection refused", "port 26657", "two nodes", "nothing written"},
		"init", "--join", vi.API, "--home", lonely, "--witness", "http://"+closed)
	if _, err := os.Stat(lonely); !os.IsNotExist(err) {
		t.Errorf("a refused join wrote %s (%v)", lonely, err)
	}

	// Restarted without flags: the config brings the peer back.
	stopped := book.maxHeight("full")
	pf = startProc(t, "full again", "node", "--home", full, "--output", "json")
	pf.jsonLine(60*time.Second, &fi)
	watch(t, book, "full", fi.API)
	waitUntil(t, 60*time.Second, "the restarted full node past where it stopped", func() bool {
		return len(book.commonHeights(stopped+3, "validator", "full")) >= 2
	})
	book.check(t)
}

func loadConfig(t *testing.T, home string) *validator.Config {
	t.Helper()
	c, err := validator.LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// scrape GETs a /metrics page.
func scrape(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", u, resp.Status, err)
	}
	return string(b)
}

// sample is the value of the series named exactly series (name and
// labels) in a Prometheus text page; -1 when absent.
func sample(page, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}
