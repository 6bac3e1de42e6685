package validator

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	cmtcfg "github.com/cometbft/cometbft/config"

	"github.com/gpunet/gpunet/internal/abciapp"
)

// StateSyncConfig is how a new node restores a snapshot (CometBFT's
// statesync section). The light client checks the snapshot's app hash
// against headers it verifies from TrustHeight/TrustHash, through two
// RPC servers.
type StateSyncConfig struct {
	Enable bool `yaml:"enable,omitempty"`
	// RPCServers are CometBFT RPC addresses (host:port or URLs) of two or
	// more nodes of the network; CometBFT wants two at least.
	RPCServers []string `yaml:"rpc_servers,omitempty"`
	// TrustHeight and TrustHash name a header trusted by other means (the
	// node it was taken from at `gpunet init --join`).
	TrustHeight int64  `yaml:"trust_height,omitempty"`
	TrustHash   string `yaml:"trust_hash,omitempty"`
	// TrustPeriod is how long a trusted header may be used (0: a week).
	TrustPeriod Duration `yaml:"trust_period,omitempty"`
}

// DefaultTrustPeriod is the state sync trust period unless configured.
const DefaultTrustPeriod = 7 * 24 * time.Hour

func (s *StateSyncConfig) validate() error {
	if !s.Enable {
		return nil
	}
	if len(s.RPCServers) < 2 {
		return fmt.Errorf("rpc_servers: %d given, want at least 2 (the same address twice if the network has one node)", len(s.RPCServers))
	}
	for _, a := range s.RPCServers {
		if _, err := rpcURL(a); err != nil {
			return fmt.Errorf("rpc_servers: %w", err)
		}
	}
	if s.TrustHeight <= 0 {
		return errors.New("trust_height: want a height > 0")
	}
	if b, err := hex.DecodeString(s.TrustHash); err != nil || len(b) != 32 {
		return fmt.Errorf("trust_hash %q: want the 64 hex digits of the block hash at trust_height", s.TrustHash)
	}
	if s.TrustPeriod < 0 {
		return errors.New("trust_period is negative")
	}
	return nil
}

// rpcURL turns host:port or a URL into the URL CometBFT's light client
// dials.
func rpcURL(a string) (string, error) {
	if u, err := url.Parse(a); err == nil && u.Scheme != "" && u.Host != "" {
		return a, nil
	}
	if err := checkHostPort(a); err != nil {
		return "", err
	}
	return "http://" + a, nil
}

// DefaultSnapshotInterval is the snapshot interval `gpunet init` writes for
// a block time: every 100 blocks on a chain of 1 s blocks or slower (a
// snapshot every few minutes), and about every 4 s on faster local chains
// (20 blocks at 200 ms), so that a node can join a devnet or a test
// network by state sync within seconds.
func DefaultSnapshotInterval(blockTime time.Duration) uint64 {
	if blockTime >= time.Second || blockTime <= 0 {
		return 100
	}
	return uint64(max(10, min(100, int64(4*time.Second/blockTime))))
}

// stateSyncConfig puts c's seeds and state sync settings into CometBFT's
// config.
func stateSyncConfig(cfg *cmtcfg.Config, c *Config) {
	cfg.P2P.Seeds = strings.Join(c.Seeds, ",")
	ss := c.StateSync
	if !ss.Enable {
		return
	}
	cfg.StateSync.Enable = true
	cfg.StateSync.RPCServers = nil
	for _, a := range ss.RPCServers {
		u, _ := rpcURL(a) // checked by Validate
		cfg.StateSync.RPCServers = append(cfg.StateSync.RPCServers, u)
	}
	cfg.StateSync.TrustHeight = ss.TrustHeight
	cfg.StateSync.TrustHash = ss.TrustHash
	cfg.StateSync.TrustPeriod = time.Duration(ss.TrustPeriod)
	if cfg.StateSync.TrustPeriod == 0 {
		cfg.StateSync.TrustPeriod = DefaultTrustPeriod
	}
	// CometBFT's least: peers' snapshot lists arrive within a second or
	// two; it looks again every DiscoveryTime while it has none.
	cfg.StateSync.DiscoveryTime = 5 * time.Second
}

// snapshotOptions are the app's snapshot settings for home.
func snapshotOptions(home string, c *Config) abciapp.SnapshotOptions {
	return abciapp.SnapshotOptions{
		Dir:        filepath.Join(home, "data", "snapshots"),
		Interval:   c.SnapshotInterval,
		KeepRecent: c.SnapshotKeepRecent,
	}
}

func initSnapshotInterval(o InitOptions) uint64 {
	switch {
	case o.SnapshotInterval < 0:
		return 0
	case o.SnapshotInterval == 0:
		return DefaultSnapshotInterval(o.BlockTime)
	}
	return uint64(o.SnapshotInterval)
}
