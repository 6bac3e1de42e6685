package ledgerbench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble"
	dbm "github.com/cometbft/cometbft-db"
	"github.com/cometbft/cometbft/abci/example/kvstore"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtcfg "github.com/cometbft/cometbft/config"
	cmtlog "github.com/cometbft/cometbft/libs/log"
	nm "github.com/cometbft/cometbft/node"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	"github.com/cometbft/cometbft/proxy"

	"github.com/gpunet/gpunet/internal/abciapp"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// benchChainID is the chain id of both phases' chains.
const benchChainID = "gpunet-bench"

// initHome writes a one-validator home (keys, genesis, config) with
// validator.Init, exactly as `gpunet init` would.
func initHome(home string, g ledger.Genesis, blockTime time.Duration) error {
	_, err := validator.Init(home, validator.InitOptions{
		ChainID:    benchChainID,
		Validators: 1,
		Genesis:    g,
		BlockTime:  max(blockTime, time.Millisecond),
	})
	return err
}

// cometConfig mirrors validator's node configuration (cmtConfig in
// internal/validator/node.go) for a lone validator, with CometBFT's RPC
// listening on rpcAddr (host:port; empty turns it off), the block time given,
// and a mempool that holds at least txs (so that no tx is ever turned away).
func cometConfig(home, rpcAddr string, blockTime time.Duration, txs int) (*cmtcfg.Config, error) {
	p2pAddr, err := validator.FreeAddr()
	if err != nil {
		return nil, err
	}
	cfg := cmtcfg.DefaultConfig()
	cfg.SetRoot(home)
	cfg.Moniker = "bench"
	cfg.P2P.ListenAddress = "tcp://" + p2pAddr
	cfg.P2P.AddrBookStrict = false
	cfg.P2P.AllowDuplicateIP = true
	cfg.P2P.PexReactor = false
	cfg.RPC.ListenAddress = ""
	if rpcAddr != "" {
		cfg.RPC.ListenAddress = "tcp://" + rpcAddr
	}
	cfg.GRPC.ListenAddress = ""
	cfg.Instrumentation.Prometheus = false
	cfg.Consensus.TimeoutCommit = blockTime
	cfg.Consensus.TimeoutPropose = clamp(3*blockTime, 500*time.Millisecond, 3*time.Second)
	cfg.Consensus.TimeoutPrevote = clamp(blockTime, 200*time.Millisecond, time.Second)
	cfg.Consensus.TimeoutPrecommit = clamp(blockTime, 200*time.Millisecond, time.Second)
	cfg.Consensus.PeerGossipSleepDuration = 20 * time.Millisecond
	cfg.Mempool.Size = max(50000, txs)
	cfg.Mempool.CacheSize = max(100000, 2*txs)
	cfg.Mempool.MaxTxsBytes = 256 << 20
	if err := cfg.ValidateBasic(); err != nil {
		return nil, fmt.Errorf("cometbft config: %w", err)
	}
	return cfg, nil
}

func clamp(v, lo, hi time.Duration) time.Duration { return max(lo, min(v, hi)) }

// benchNode is a running CometBFT node and the stores it leaves open.
type benchNode struct {
	*nm.Node
	// rpcAddr is where CometBFT's RPC listens (host:port), if it does.
	rpcAddr string
	// CometBFT v1.0.1 never closes the tx indexer's store (node.OnStop
	// closes the block, state and evidence stores only); left open, its
	// background compactions crash the process once the home is removed.
	// Each is guarded: see validator.GuardDB.
	leaked []dbm.DB
}

// startNode starts a CometBFT node on home running app in process, with its
// RPC listening on a free loopback port when rpc is set. Both
// phases use the unsynchronised local client (as validator.Start does for
// the ledger): the apps' CheckTx may run beside FinalizeBlock, and CometBFT
// itself serialises consensus calls and holds the mempool lock across
// Commit and the recheck that follows it.
func startNode(ctx context.Context, home string, rpc bool, blockTime time.Duration, txs int, app abci.Application) (*benchNode, error) {
	var rpcAddr string
	if rpc {
		a, err := validator.FreeAddr()
		if err != nil {
			return nil, err
		}
		rpcAddr = a
	}
	cfg, err := cometConfig(home, rpcAddr, blockTime, txs)
	if err != nil {
		return nil, err
	}
	pv := privval.LoadFilePV(cfg.PrivValidatorKeyFile(), cfg.PrivValidatorStateFile())
	nodeKey, err := p2p.LoadNodeKey(cfg.NodeKeyFile())
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	bn := &benchNode{rpcAddr: rpcAddr}
	dbProvider := func(c *cmtcfg.DBContext) (dbm.DB, error) {
		db, err := validator.QuietDBProvider(c)
		if err == nil && c.ID == "tx_index" {
			g := validator.GuardDB(db)
			bn.leaked = append(bn.leaked, g)
			return g, nil
		}
		return db, err
	}
	n, err := nm.NewNode(ctx, cfg, pv, nodeKey,
		proxy.NewUnsyncLocalClientCreator(app),
		nm.DefaultGenesisDocProviderFunc(cfg),
		dbProvider,
		nm.DefaultMetricsProvider(cfg.Instrumentation),
		cmtlog.NewNopLogger(),
	)
	if err != nil {
		bn.closeLeaked()
		return nil, fmt.Errorf("create cometbft node in %s: %w", home, err)
	}
	bn.Node = n
	if err := n.Start(); err != nil {
		bn.closeLeaked()
		return nil, fmt.Errorf("start cometbft node in %s: %w", home, err)
	}
	return bn, nil
}

// stop stops the node and closes the stores it leaves open.
func (n *benchNode) stop() error {
	var err error
	if n.IsRunning() {
		err = n.Stop()
		n.Wait()
	}
	return errors.Join(err, n.closeLeaked())
}

func (n *benchNode) closeLeaked() error {
	var errs []error
	for _, db := range n.leaked {
		errs = append(errs, db.Close())
	}
	n.leaked = nil
	return errors.Join(errs...)
}

// openKVStore opens CometBFT's kvstore example app persisting in dir, as
// kvstore.NewPersistentApplication does (Pebble, default options) but with
// Pebble's logging quiet.
func openKVStore(dir string) (*kvstore.Application, error) {
	db, err := dbm.NewPebbleDBWithOpts("kvstore", dir, &pebble.Options{Logger: abciapp.QuietPebbleLogger{}})
	if err != nil {
		return nil, fmt.Errorf("open kvstore app in %s: %w", dir, err)
	}
	return kvstore.NewApplication(db), nil
}

func appDir(home string) string { return filepath.Join(home, "data", "app") }
