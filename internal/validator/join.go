package validator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// Joining a running network (`gpunet init --join URL`): the home of a full
// node, written from what a node of the network tells over its API (GET
// /v1/net/info and /v1/genesis). A full node is a home whose consensus key
// is not in the validator set; it follows the chain, serves the API, and
// may later bond stake to become a validator.

// JoinOptions describe the home Join writes.
type JoinOptions struct {
	// URL is the API of any node of the network (http://host:port).
	URL string
	// GenesisSHA256, when set, is the hex SHA-256 the genesis file must
	// have (learnt from someone trusted, not from the node asked).
	GenesisSHA256 string
	// Moniker names the node (default: "full-" and the start of its node
	// id).
	Moniker string
	// TrustHeight and TrustHash (hex), both or neither, pin a header of
	// the network learnt from someone trusted: the header state sync
	// will trust is verified from it instead of from the genesis, and no
	// RPC server but the join node's is needed.
	TrustHeight int64
	TrustHash   string
	// Witnesses are CometBFT RPC addresses (host:port or
	// http://host:port) of other nodes of the network, asked besides
	// those the join node names.
	Witnesses []string
	// Net is where the node listens (Listen's host, default 127.0.0.1,
	// with free ports, or the addresses given) and whom it dials besides
	// the network's nodes (PersistentPeers are added to theirs).
	Net NetOptions
	// Client makes the requests (default: one with a 15 s timeout).
	Client *http.Client

	// newProvider makes the light client's provider for an RPC address
	// (default: CometBFT's RPC provider; tests serve headers in memory).
	newProvider newProviderFunc
}

// JoinResult says what Join wrote.
type JoinResult struct {
	ChainID       string   `json:"chain_id"`
	Home          string   `json:"home"`
	NodeID        string   `json:"node_id"`
	GenesisSHA256 string   `json:"genesis_sha256"`
	Peers         []string `json:"persistent_peers"`
	// StateSync is true when the node will restore a snapshot at its
	// first start (the network serves snapshots); TrustHeight is the
	// header it trusts.
	StateSync   bool     `json:"state_sync"`
	TrustHeight int64    `json:"trust_height,omitempty"`
	TrustHash   string   `json:"trust_hash,omitempty"`
	RPCServers  []string `json:"rpc_servers,omitempty"`
	// VerifiedFrom says what the header was verified from by CometBFT's
	// light client: the genesis, or the header the user pinned.
	VerifiedFrom string `json:"verified_from,omitempty"`
	// Notes are things the user should know (one RPC server used twice,
	// no snapshots to restore).
	Notes []string `json:"notes,omitempty"`
	// API is the URL the node will advertise for its API; P2P and RPC
	// are where CometBFT will listen, and ExternalAddress what it
	// tells peers to dial when set.
	API             string `json:"api"`
	P2P             string `json:"p2p"`
	RPC             string `json:"rpc"`
	ExternalAddress string `json:"external_address,omitempty"`
}

// maxGenesisBytes bounds the genesis file Join accepts.
const maxGenesisBytes = 64 << 20

// Join writes home as a full node of the network whose node serves
// o.URL. It fetches and checks everything before writing anything; an
// error leaves no home behind (nor any part of one). When the network
// serves snapshots, the header state sync will trust is first verified
// with CometBFT's light client from the genesis (or o's pinned header)
// and checked against every RPC server the node will ask
// (verifyJoinTrust): the join node chooses that header and names those
// servers, and must not be able to choose the chain.
func Join(ctx context.Context, home string, o JoinOptions) (*JoinResult, error) {
	for _, f := range []string{ConfigFile, "config/genesis.json", "config/priv_validator_key.json", "config/node_key.json", "data/app"} {
		if _, err := os.Stat(filepath.Join(home, f)); err == nil {
			return nil, fmt.Errorf("%s is already initialised (it has %s): remove it or choose another --home", home, f)
		}
	}
	base, err := joinURL(o.URL)
	if err != nil {
		return nil, err
	}
	pin, err := joinPin(o.TrustHeight, o.TrustHash)
	if err != nil {
		return nil, err
	}
	if err := o.Net.Check(); err != nil {
		return nil, err
	}
	for _, w := range o.Witnesses {
		if _, err := rpcURL(w); err != nil {
			return nil, fmt.Errorf("--witness %q: want a node's CometBFT RPC, like http://203.0.113.8:26657 (%v)", w, err)
		}
	}
	hc := o.Client
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	var info apiwire.NetInfo
	if _, err := getNode(ctx, hc, base, "/v1/net/info", 1<<20, &info); err != nil {
		return nil, err
	}
	if err := checkNetInfo(&info); err != nil {
		return nil, fmt.Errorf("%s/v1/net/info: %w", base, err)
	}
	gen, err := getNode(ctx, hc, base, "/v1/genesis", maxGenesisBytes, nil)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(gen)
	got := hex.EncodeToString(sum[:])
	if want := strings.ToLower(strings.TrimSpace(o.GenesisSHA256)); want != "" && want != got {
		return nil, fmt.Errorf("the genesis of %s has SHA-256 %s, not %s (--genesis-hash): it is another network, or the hash is wrong; nothing written", base, got, want)
	}
	if info.GenesisSHA256 != "" && !strings.EqualFold(info.GenesisSHA256, got) {
		return nil, fmt.Errorf("%s sent a genesis with SHA-256 %s but says its genesis is %s; nothing written", base, got, info.GenesisSHA256)
	}
	doc, err := cmttypes.GenesisDocFromJSON(gen)
	if err != nil {
		return nil, fmt.Errorf("%s/v1/genesis is not a genesis document: %w", base, err)
	}
	if doc.ChainID != info.ChainID {
		return nil, fmt.Errorf("%s/v1/genesis is chain %q but the node says it is on %q", base, doc.ChainID, info.ChainID)
	}

	c, res, sources := joinConfig(base, &info, o.Witnesses)
	res.Home, res.GenesisSHA256 = home, got
	if sources != nil {
		claim, _ := hex.DecodeString(info.TrustHash) // checked by checkNetInfo
		t, err := verifyJoinTrust(ctx, &trustCheck{joinURL: base, doc: doc, sources: sources, pin: pin,
			height: info.TrustHeight, hash: claim, newProvider: o.newProvider})
		if err != nil {
			return nil, err
		}
		c.StateSync = StateSyncConfig{Enable: true, RPCServers: t.servers, TrustHeight: t.height, TrustHash: fmt.Sprintf("%X", t.hash)}
		res.StateSync, res.TrustHeight, res.TrustHash, res.RPCServers, res.VerifiedFrom = true, t.height, c.StateSync.TrustHash, t.servers, t.root
		res.Notes = append(res.Notes, t.notes...)
	} else if pin != nil || len(o.Witnesses) > 0 {
		res.Notes = append(res.Notes, "--trust-height/--trust-hash and --witness check state sync's header; without snapshots there is none (the node verifies every block from the genesis)")
	}
	listen := "127.0.0.1"
	if o.Net.Listen != "" {
		listen, _ = listenHost(o.Net.Listen) // checked by Check
	}
	for _, p := range []*string{&c.API, &c.P2P, &c.RPC} {
		if *p, err = FreeAddrOn(listen); err != nil {
			if o.Net.Listen != "" {
				err = fmt.Errorf("--listen %q: %w", o.Net.Listen, err)
			}
			return nil, err
		}
	}
	homeNet := o.Net
	homeNet.Listen = ""
	if homeNet.PersistentPeers != nil {
		homeNet.PersistentPeers = slices.Concat(c.PersistentPeers, homeNet.PersistentPeers)
	}
	if err := homeNet.Apply(c); err != nil {
		return nil, err
	}
	res.Peers = c.PersistentPeers
	res.API, res.P2P, res.RPC, res.ExternalAddress = c.APIURL(), c.P2P, c.RPC, c.ExternalAddress
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("the config made from %s's answers: %w", base, err)
	}

	// Write. From here an error removes what was written.
	created, err := createHome(home)
	if err != nil {
		return nil, err
	}
	cleanup := func() {
		for _, p := range created {
			os.RemoveAll(p)
		}
	}
	nodeID, err := writeNodeKeys(home)
	if err == nil {
		res.NodeID = nodeID
		if o.Moniker != "" {
			c.Moniker = o.Moniker
		} else {
			c.Moniker = "full-" + nodeID[:8]
		}
		err = os.WriteFile(filepath.Join(home, "config/genesis.json"), gen, 0o600)
	}
	if err == nil {
		err = SaveConfig(home, c)
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	return res, nil
}

// joinURL checks the URL given to --join.
func joinURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--join %q: want the http(s) URL of a gpunet node's API, like http://203.0.113.7:8080 (gpunet node prints it as api:)", s)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"), nil
}

// getNode GETs base+path from a node's API: the body (at most max bytes),
// decoded into v when v is not nil. Its errors say what was expected of a
// gpunet node.
func getNode(ctx context.Context, hc *http.Client, base, path string, max int64, v any) ([]byte, error) {
	u := base + path
	notNode := func(why string) error {
		return fmt.Errorf("%s is not a gpunet node's API: GET %s %s, want 200 with JSON (the API a node prints as api:, e.g. http://127.0.0.1:8080)", base, u, why)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s (%w): is it a gpunet node's API, and is the node running?", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, notNode("answered " + resp.Status)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return nil, notNode(fmt.Sprintf("answered %q", resp.Header.Get("Content-Type")))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if int64(len(b)) > max {
		return nil, notNode(fmt.Sprintf("sent more than %d bytes", max))
	}
	if v != nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return nil, notNode(fmt.Sprintf("answered JSON that is not a node's answer (%v)", err))
		}
	}
	return b, nil
}

// checkNetInfo checks what a node said of itself.
func checkNetInfo(info *apiwire.NetInfo) error {
	if info.ChainID == "" {
		return errors.New("no chain_id")
	}
	if _, err := peerAddr(info.P2PAddress); err != nil {
		return fmt.Errorf("p2p_address: %w", err)
	}
	if info.RPCAddress == "" {
		return errors.New("rpc_address is empty: the node has CometBFT's RPC off, and a joining node's light client needs it")
	}
	if err := checkHostPort(info.RPCAddress); err != nil {
		return fmt.Errorf("rpc_address: %w", err)
	}
	if info.BlockTime != "" {
		if _, err := time.ParseDuration(info.BlockTime); err != nil {
			return fmt.Errorf("block_time: %w", err)
		}
	}
	if len(info.Snapshots) > 0 {
		if info.TrustHeight <= 0 {
			return errors.New("snapshots but no trust_height")
		}
		if b, err := hex.DecodeString(info.TrustHash); err != nil || len(b) != 32 {
			return fmt.Errorf("trust_hash %q is not a block hash", info.TrustHash)
		}
	}
	return nil
}

// peerAddr checks an id@host:port address.
func peerAddr(s string) (string, error) {
	id, hp, ok := strings.Cut(s, "@")
	if !ok {
		return "", fmt.Errorf("%q: want id@host:port", s)
	}
	if b, err := hex.DecodeString(id); err != nil || len(b) != 20 {
		return "", fmt.Errorf("%q: the node id is not 40 hex digits", s)
	}
	if err := checkHostPort(hp); err != nil {
		return "", err
	}
	return s, nil
}

// withHost replaces an unspecified host (0.0.0.0, ::) in host:port, or in
// id@host:port, by host.
func withHost(addr, host string) string {
	id, hp, hasID := strings.Cut(addr, "@")
	if !hasID {
		hp, id = addr, ""
	}
	h, port, err := net.SplitHostPort(hp)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
		hp = net.JoinHostPort(host, port)
	}
	if hasID {
		return id + "@" + hp
	}
	return hp
}

// joinPin checks --trust-height and --trust-hash: nil when neither is
// given.
func joinPin(height int64, hash string) (*trustPin, error) {
	hash = strings.TrimSpace(hash)
	if height == 0 && hash == "" {
		return nil, nil
	}
	if height <= 0 || hash == "" {
		return nil, errors.New("--trust-height and --trust-hash go together: a height > 0 and the 64 hex digits of the block hash there, from someone you trust")
	}
	b, err := hex.DecodeString(hash)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("--trust-hash %q: want the 64 hex digits of the block hash at --trust-height", hash)
	}
	return &trustPin{height: height, hash: b}, nil
}

// maxPeerRPCs bounds how many of the join node's peers' RPC servers are
// asked for headers (besides the join node's and --witness).
const maxPeerRPCs = 4

// joinConfig is the config of a full node of info's network: its peers
// and the API it joined through; and, when the network serves snapshots,
// the RPC servers (the join node's, some of its peers', the witnesses)
// whose headers state sync will use once verifyJoinTrust has checked
// them (nil when it serves none).
func joinConfig(base string, info *apiwire.NetInfo, witnesses []string) (*Config, *JoinResult, []rpcSource) {
	u, _ := url.Parse(base)
	host := u.Hostname()
	res := &JoinResult{ChainID: info.ChainID}
	c := &Config{ChainID: info.ChainID, LogLevel: "info", PeerAPIs: []string{base}, SnapshotInterval: info.SnapshotInterval}
	c.BlockTime = Duration(time.Second)
	if d, err := time.ParseDuration(info.BlockTime); err == nil && d > 0 {
		c.BlockTime = Duration(d)
	}
	c.PersistentPeers = []string{withHost(info.P2PAddress, host)}
	var srcs []rpcSource
	seen := map[string]bool{}
	add := func(s rpcSource) {
		u, err := rpcURL(s.addr)
		if err != nil || seen[u] {
			return
		}
		seen[u] = true
		srcs = append(srcs, s)
	}
	add(rpcSource{addr: withHost(info.RPCAddress, host), from: "rpc_address of " + base, join: true})
	peerRPCs := 0
	for _, p := range info.Peers {
		if a, err := peerAddr(p.P2PAddress); err == nil && !slices.Contains(c.PersistentPeers, a) && p.NodeID != info.NodeID {
			c.PersistentPeers = append(c.PersistentPeers, a)
		}
		if p.RPCAddress != "" && checkHostPort(p.RPCAddress) == nil && peerRPCs < maxPeerRPCs && p.NodeID != info.NodeID {
			n := len(srcs)
			add(rpcSource{addr: p.RPCAddress, from: fmt.Sprintf("RPC of peer %.12s as %s names it", p.NodeID, base)})
			if len(srcs) > n {
				peerRPCs++
			}
		}
	}
	for _, w := range witnesses {
		add(rpcSource{addr: w, from: "--witness"})
	}
	res.Peers = c.PersistentPeers
	if len(info.Snapshots) == 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%s serves no state snapshots (snapshot_interval %d): the node will replay the chain from genesis", base, info.SnapshotInterval))
		return c, res, nil
	}
	return c, res, srcs
}

// createHome makes home's directories and returns the paths to remove to
// undo it: home itself when it did not exist, else the directories made
// in it.
func createHome(home string) ([]string, error) {
	var created []string
	_, err := os.Stat(home)
	fresh := errors.Is(err, os.ErrNotExist)
	if fresh {
		created = []string{home}
	}
	for _, d := range []string{"config", "data", "logs"} {
		p := filepath.Join(home, d)
		if _, err := os.Stat(p); !fresh && errors.Is(err, os.ErrNotExist) {
			created = append(created, p)
		}
		if err := os.MkdirAll(p, 0o700); err != nil {
			for _, c := range created {
				os.RemoveAll(c)
			}
			return nil, err
		}
	}
	return created, nil
}

// writeNodeKeys writes a new consensus key and node key into home and
// returns the node id.
func writeNodeKeys(home string) (string, error) {
	pv, err := privval.GenFilePV(filepath.Join(home, "config/priv_validator_key.json"), filepath.Join(home, "data/priv_validator_state.json"), func() (crypto.PrivKey, error) { return ed25519.GenPrivKey(), nil })
	if err != nil {
		return "", err
	}
	pv.Save()
	nk, err := p2p.LoadOrGenNodeKey(filepath.Join(home, "config/node_key.json"))
	if err != nil {
		return "", err
	}
	return string(nk.ID()), nil
}
