package validator

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/gpunet/gpunet/internal/ledger"
)

// ConfigFile is where a home keeps its node configuration, relative to the
// home.
const ConfigFile = "config/gpunet.yaml"

// Config is a node's own configuration (CometBFT's is derived from it at
// start). Addresses are host:port.
type Config struct {
	ChainID string `yaml:"chain_id"`
	Moniker string `yaml:"moniker"`
	// API is where the HTTP API (and later the dashboard) listens.
	API string `yaml:"api"`
	// P2P is CometBFT's peer-to-peer listen address.
	P2P string `yaml:"p2p"`
	// ExternalAddress is the host:port other nodes dial for this node's
	// p2p (CometBFT's p2p.external_address): what it tells its peers and
	// joining nodes. Empty: P2P.
	ExternalAddress string `yaml:"external_address,omitempty"`
	// RPC is CometBFT's own RPC listen address; empty disables it.
	RPC string `yaml:"rpc,omitempty"`
	// PersistentPeers are "nodeid@host:port" of the other validators.
	PersistentPeers []string `yaml:"persistent_peers,omitempty"`
	// Seeds are "nodeid@host:port" of nodes asked for more peers
	// (CometBFT's p2p.seeds).
	Seeds []string `yaml:"seeds,omitempty"`
	// AddrBookStrict and AllowDuplicateIP, when set, are CometBFT's
	// p2p.addr_book_strict and p2p.allow_duplicate_ip; unset, they follow
	// the addresses (P2PPolicy).
	AddrBookStrict   *bool `yaml:"addr_book_strict,omitempty"`
	AllowDuplicateIP *bool `yaml:"allow_duplicate_ip,omitempty"`
	// SnapshotInterval takes a state snapshot, for nodes joining by state
	// sync, at every height that is a multiple of it; 0 takes none.
	SnapshotInterval uint64 `yaml:"snapshot_interval,omitempty"`
	// SnapshotKeepRecent is how many snapshots are kept (0: 2).
	SnapshotKeepRecent int `yaml:"snapshot_keep_recent,omitempty"`
	// StateSync, when enabled, restores the latest snapshot peers offer
	// on the first start, instead of replaying the chain from genesis.
	StateSync StateSyncConfig `yaml:"state_sync,omitempty"`
	// BlockTime is the pause after each block (CometBFT's timeout_commit).
	BlockTime Duration `yaml:"block_time"`
	// CheckInvariants checks the ledger's invariants after every block and
	// halts on a violation.
	CheckInvariants bool `yaml:"check_invariants"`
	// Devnet marks a home made by `gpunet devnet`, which it may reset.
	Devnet bool `yaml:"devnet,omitempty"`
	// LogLevel is CometBFT's log level in logs/cometbft.log: debug, info, error.
	LogLevel string `yaml:"log_level,omitempty"`
	// MaxBlobBytes is the largest blob the node's gateway stores (0: 4 GiB).
	MaxBlobBytes int64 `yaml:"max_blob_bytes,omitempty"`
	// APIToken, when set, lets whoever presents it act with the node's
	// own keyring through the API (submitting a job from the dashboard).
	// Reads never need it. Without it those actions are off.
	APIToken string `yaml:"api_token,omitempty"`
	// CORSOrigins lists the web origins allowed to call the API from a
	// browser ("*" for any). Empty, the default, allows none.
	CORSOrigins []string `yaml:"cors_origins,omitempty"`
	// AdvertiseAPI is the URL other nodes and clients reach this node's
	// API at (empty: http://<api>). Jobs and results record it as where
	// their data was put (data_at).
	AdvertiseAPI string `yaml:"advertise_api,omitempty"`
	// PeerAPIs are other nodes' API URLs: the nodes its blob gateway may
	// fetch a missing blob from, and asks for more nodes (GET
	// /v1/net/peers).
	PeerAPIs []string `yaml:"peer_apis,omitempty"`
	// BlobRetention is how long the gateway keeps a finished job's blobs
	// (0: 7 days); outputs their owner fetched go sooner (docs/blobs.md).
	BlobRetention Duration `yaml:"blob_retention,omitempty"`
	// What the gateway keeps that no job references yet (docs/blobs.md,
	// "Quotas"): an account 1 GiB for every BlobUSyncPerGiB usync it
	// holds on the ledger (0: 1 SYNC), at most BlobAccountMaxBytes (0:
	// 16 GiB; -1: its allowance alone), and all accounts together at most
	// BlobUnreferencedMaxBytes (0: 64 GiB; -1: no bound).
	BlobUSyncPerGiB          uint64 `yaml:"blob_usync_per_gib,omitempty"`
	BlobAccountMaxBytes      int64  `yaml:"blob_account_max_bytes,omitempty"`
	BlobUnreferencedMaxBytes int64  `yaml:"blob_unreferenced_max_bytes,omitempty"`
}

// DefaultBlobRetention is a node's blob_retention when its config sets
// none.
const DefaultBlobRetention = 7 * 24 * time.Hour

// APIURL is the URL other nodes and clients reach the API at:
// AdvertiseAPI, or http://<api>.
func (c *Config) APIURL() string {
	if c.AdvertiseAPI != "" {
		return strings.TrimRight(c.AdvertiseAPI, "/")
	}
	return "http://" + c.API
}

// Retention is BlobRetention, or DefaultBlobRetention when unset.
func (c *Config) Retention() time.Duration {
	if c.BlobRetention > 0 {
		return time.Duration(c.BlobRetention)
	}
	return DefaultBlobRetention
}

// Duration is a time.Duration written as "1s", "200ms" in YAML.
type Duration time.Duration

// MarshalYAML implements yaml.BytesMarshaler's text form.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// UnmarshalYAML accepts "1s", "250ms".
func (d *Duration) UnmarshalYAML(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("block_time %q: %w (use e.g. 1s or 200ms)", s, err)
	}
	*d = Duration(v)
	return nil
}

// Validate checks the fields a node needs.
func (c *Config) Validate() error {
	if c.ChainID == "" {
		return errors.New("chain_id is empty")
	}
	for name, addr := range map[string]string{"api": c.API, "p2p": c.P2P} {
		if err := checkHostPort(addr); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if c.RPC != "" {
		if err := checkHostPort(c.RPC); err != nil {
			return fmt.Errorf("rpc: %w", err)
		}
	}
	if c.ExternalAddress != "" {
		if err := checkDialAddr(c.ExternalAddress); err != nil {
			return fmt.Errorf("external_address: %w", err)
		}
	}
	for _, l := range []struct {
		key   string
		peers []string
	}{{"persistent_peers", c.PersistentPeers}, {"seeds", c.Seeds}} {
		for _, p := range l.peers {
			if _, err := peerAddr(p); err != nil {
				return fmt.Errorf("%s: %w", l.key, err)
			}
		}
	}
	if c.MaxBlobBytes < 0 {
		return fmt.Errorf("max_blob_bytes %d is negative", c.MaxBlobBytes)
	}
	for name, v := range map[string]int64{"blob_account_max_bytes": c.BlobAccountMaxBytes, "blob_unreferenced_max_bytes": c.BlobUnreferencedMaxBytes} {
		if v < -1 {
			return fmt.Errorf("%s %d: want bytes, 0 for the default or -1 for no bound", name, v)
		}
	}
	if c.APIToken != "" && (len(c.APIToken) < 16 || strings.ContainsAny(c.APIToken, " \t\r\n")) {
		return fmt.Errorf("api_token: want at least 16 characters without spaces (e.g. the output of `openssl rand -hex 16`)")
	}
	for _, o := range c.CORSOrigins {
		if o != "*" && !strings.HasPrefix(o, "http://") && !strings.HasPrefix(o, "https://") {
			return fmt.Errorf("cors_origins: %q: want \"*\" or an origin like https://example.com", o)
		}
	}
	if c.AdvertiseAPI != "" && !ledger.ValidDataAt(c.AdvertiseAPI) {
		return fmt.Errorf("advertise_api %q: want the http(s) URL this node's API is reached at, like http://203.0.113.7:8080 (at most %d bytes)", c.AdvertiseAPI, ledger.MaxDataAtLen)
	}
	for _, p := range c.PeerAPIs {
		if p == "" || !ledger.ValidDataAt(p) {
			return fmt.Errorf("peer_apis: %q: want another node's API URL, like http://203.0.113.8:8080", p)
		}
	}
	if c.BlobRetention < 0 {
		return fmt.Errorf("blob_retention %s is negative", time.Duration(c.BlobRetention))
	}
	if c.SnapshotKeepRecent < 0 {
		return fmt.Errorf("snapshot_keep_recent %d is negative", c.SnapshotKeepRecent)
	}
	if err := c.StateSync.validate(); err != nil {
		return fmt.Errorf("state_sync: %w", err)
	}
	if c.BlockTime < Duration(10*time.Millisecond) || c.BlockTime > Duration(time.Minute) {
		return fmt.Errorf("block_time %s out of range [10ms, 1m]", time.Duration(c.BlockTime))
	}
	return nil
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w (want host:port)", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("address %q: bad port", addr)
	}
	return nil
}

// LoadConfig reads home's config.
func LoadConfig(home string) (*Config, error) {
	path := filepath.Join(home, ConfigFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is not a gpunet home (no %s): run `gpunet init --home %s` or `gpunet devnet --home %s`: %w", home, ConfigFile, home, home, err)
	}
	if err != nil {
		return nil, err
	}
	var c Config
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// SaveConfig writes c to home atomically.
func SaveConfig(home string, c *Config) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	path := filepath.Join(home, ConfigFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// FreeAddr returns a loopback host:port that was free a moment ago (see
// FreeAddrOn).
func FreeAddr() (string, error) { return FreeAddrOn("127.0.0.1") }
