package validator

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble"
	dbm "github.com/cometbft/cometbft-db"
	cmtcfg "github.com/cometbft/cometbft/config"
	cmtlog "github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/mempool"
	nm "github.com/cometbft/cometbft/node"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/privval"
	"github.com/cometbft/cometbft/proxy"
	"github.com/cometbft/cometbft/rpc/client/local"
	rpccore "github.com/cometbft/cometbft/rpc/core"
	coretypes "github.com/cometbft/cometbft/rpc/core/types"
	cmttypes "github.com/cometbft/cometbft/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/abciapp"
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Node is a running validator.
type Node struct {
	home   string
	cfg    *Config
	app    *abciapp.App
	cmt    *nm.Node
	rpc    *local.Local
	logOut io.Closer
	log    *slog.Logger

	closeTxIndex func()
	blocks       blockCache
	halt         *haltWatch
}

// StartOptions tune Start.
type StartOptions struct {
	Logger *slog.Logger
	// CheckInvariants forces invariant checks on, whatever the config says.
	CheckInvariants bool
	// CometLog, when set, receives CometBFT's log instead of
	// home/logs/cometbft.log.
	CometLog io.Writer
	// ObserveBlock, when set, gets each block's tx count and the ledger's
	// time executing it (abciapp.Options.ObserveBlock).
	ObserveBlock func(txs int, d time.Duration)
	// Metrics, when set, receives CometBFT's own metrics (consensus, p2p,
	// mempool, state, block store, block sync, state sync), named
	// cometbft_*; it must be a registry of this start's own. Unset,
	// CometBFT keeps none.
	Metrics prometheus.Registerer
}

// Start runs the validator of home until ctx ends or Stop is called.
func Start(ctx context.Context, home string, o StartOptions) (*Node, error) {
	c, err := LoadConfig(home)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := cmtConfig(home, c)
	if err := cfg.ValidateBasic(); err != nil {
		return nil, fmt.Errorf("cometbft config: %w", err)
	}
	var logW io.Writer = o.CometLog
	var logC io.Closer
	if logW == nil {
		f, err := os.OpenFile(filepath.Join(home, "logs/cometbft.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		logW, logC = f, f
	}
	cmtLogger := cmtlog.NewTMLogger(cmtlog.NewSyncWriter(logW))
	lvl := c.LogLevel
	if lvl == "" {
		lvl = "info"
	}
	if opt, err := cmtlog.AllowLevel(lvl); err == nil {
		cmtLogger = cmtlog.NewFilter(cmtLogger, opt)
	}
	// Wrapped outside the level filter: the failure must be seen whatever
	// the log level.
	halt := newHaltWatch()
	cmtLogger = haltLogger{Logger: cmtLogger, watch: halt}

	app, err := abciapp.Open(filepath.Join(home, "data/app"), abciapp.Options{
		CheckInvariants: c.CheckInvariants || o.CheckInvariants,
		Logger:          o.Logger,
		ObserveBlock:    o.ObserveBlock,
		Snapshots:       snapshotOptions(home, c),
	})
	if err != nil {
		closeIf(logC)
		return nil, err
	}
	pv := privval.LoadFilePV(cfg.PrivValidatorKeyFile(), cfg.PrivValidatorStateFile())
	nodeKey, err := p2p.LoadNodeKey(cfg.NodeKeyFile())
	if err != nil {
		app.Close()
		closeIf(logC)
		return nil, fmt.Errorf("node key: %w", err)
	}
	// CometBFT v1.0.1 never closes its tx index store; remember it and
	// close it in Stop, or a node cannot be restarted in the same process.
	var txIndex dbm.DB
	stores := &storeOpener{home: home}
	dbProvider := func(c *cmtcfg.DBContext) (dbm.DB, error) {
		db, err := stores.open(c)
		if err == nil && c.ID == "tx_index" {
			txIndex = GuardDB(db)
			return txIndex, nil
		}
		return db, err
	}
	closeTxIndex := func() {
		if txIndex != nil {
			txIndex.Close()
		}
	}
	metrics := nm.DefaultMetricsProvider(cfg.Instrumentation) // off: no-op metrics
	if o.Metrics != nil {
		metrics = cometMetrics(o.Metrics)
	}
	n, err := newNode(home, cfg, stores, app, func() (*nm.Node, error) {
		return nm.NewNode(ctx, cfg, pv, nodeKey,
			proxy.NewUnsyncLocalClientCreator(app),
			genesisProvider(home, cfg),
			dbProvider,
			metrics,
			cmtLogger,
		)
	})
	if err != nil {
		stores.closeAll() // the tx index among them
		app.Close()
		closeIf(logC)
		return nil, fmt.Errorf("create cometbft node: %w", err)
	}
	if err := n.Start(); err != nil {
		closeTxIndex()
		app.Close()
		closeIf(logC)
		return nil, fmt.Errorf("start cometbft node: %w", err)
	}
	node := &Node{home: home, cfg: c, app: app, cmt: n, rpc: local.New(n), logOut: logC, log: o.Logger, closeTxIndex: closeTxIndex, halt: halt}
	return node, nil
}

// QuietDBProvider opens CometBFT's stores like its default provider does,
// with Pebble's routine logging (WAL recovery after a crash) kept quiet.
func QuietDBProvider(ctx *cmtcfg.DBContext) (dbm.DB, error) {
	if ctx.Config.DBBackend != string(dbm.PebbleDBBackend) {
		return cmtcfg.DefaultDBProvider(ctx)
	}
	return dbm.NewPebbleDBWithOpts(ctx.ID, ctx.Config.DBDir(), &pebble.Options{Logger: abciapp.QuietPebbleLogger{}})
}

func closeIf(c io.Closer) {
	if c != nil {
		c.Close()
	}
}

func cmtConfig(home string, c *Config) *cmtcfg.Config {
	cfg := cmtcfg.DefaultConfig()
	cfg.SetRoot(home)
	cfg.Moniker = c.Moniker
	cfg.P2P.ListenAddress = "tcp://" + c.P2P
	cfg.P2P.PersistentPeers = strings.Join(c.PersistentPeers, ",")
	cfg.P2P.ExternalAddress = c.ExternalAddress
	cfg.P2P.AddrBookStrict, cfg.P2P.AllowDuplicateIP = c.P2PPolicy()
	cfg.P2P.PexReactor = len(c.PersistentPeers) > 0 || len(c.Seeds) > 0
	stateSyncConfig(cfg, c)
	cfg.P2P.PersistentPeersMaxDialPeriod = 2 * time.Second
	if c.RPC != "" {
		cfg.RPC.ListenAddress = "tcp://" + c.RPC
	} else {
		cfg.RPC.ListenAddress = ""
	}
	cfg.GRPC.ListenAddress = ""
	// CometBFT's metrics go to the node's own /metrics (StartOptions.
	// Metrics), not to a listener of CometBFT's.
	cfg.Instrumentation.Prometheus = false
	bt := time.Duration(c.BlockTime)
	cfg.Consensus.TimeoutCommit = bt
	// Scale the round timeouts with the block time so fast local chains
	// recover quickly from a missing validator, within CometBFT's bounds.
	cfg.Consensus.TimeoutPropose = clamp(3*bt, 500*time.Millisecond, 3*time.Second)
	cfg.Consensus.TimeoutPrevote = clamp(bt, 200*time.Millisecond, time.Second)
	cfg.Consensus.TimeoutPrecommit = clamp(bt, 200*time.Millisecond, time.Second)
	cfg.Consensus.PeerGossipSleepDuration = 20 * time.Millisecond
	cfg.Mempool.Size = 50000
	cfg.Mempool.CacheSize = 100000
	cfg.Mempool.MaxTxsBytes = 256 << 20
	return cfg
}

func clamp(v, lo, hi time.Duration) time.Duration { return max(lo, min(v, hi)) }

// Stop stops the node and closes its stores.
func (n *Node) Stop() error {
	var errs []error
	if n.cmt.IsRunning() {
		errs = append(errs, n.cmt.Stop())
		n.cmt.Wait()
	}
	n.closeTxIndex()
	errs = append(errs, n.app.Close())
	if n.logOut != nil {
		errs = append(errs, n.logOut.Close())
	}
	return errors.Join(errs...)
}

// Config returns the node's configuration.
func (n *Node) Config() *Config { return n.cfg }

// Home returns the node's home.
func (n *Node) Home() string { return n.home }

// View returns a consistent read-only view of the committed ledger state.
func (n *Node) View() (ledger.KV, func()) { return n.app.View() }

// NextSequence returns the sequence addr's next tx must carry, counting its
// txs waiting in the mempool.
func (n *Node) NextSequence(addr address.Address) (uint64, error) { return n.app.NextSequence(addr) }

// Status reports the node's view of the chain. Height and app hash are the
// app's last committed pair: the state after executing block Height.
func (n *Node) Status(ctx context.Context) (*apiwire.Status, error) {
	st, err := n.rpc.Status(ctx)
	if err != nil {
		return nil, err
	}
	kv, release := n.View()
	height := int64(ledger.Height(kv))
	hash, err := ledger.AppHash(kv)
	release()
	if err != nil {
		return nil, err
	}
	s := &apiwire.Status{
		ChainID:         st.NodeInfo.Network,
		Moniker:         st.NodeInfo.Moniker,
		NodeID:          string(st.NodeInfo.DefaultNodeID),
		Height:          height,
		AppHash:         strings.ToUpper(hex.EncodeToString(hash)),
		LatestBlockTime: st.SyncInfo.LatestBlockTime,
		CatchingUp:      st.SyncInfo.CatchingUp,
		Peers:           n.cmt.Switch().Peers().Size(),
	}
	perPage := 100
	vals, err := n.rpc.Validators(ctx, nil, nil, &perPage)
	switch {
	case err != nil && st.SyncInfo.LatestBlockHeight == 0:
		// No block yet, and CometBFT has no validator set to serve for
		// height 0: a node that just started is not an error.
		return s, nil
	case err != nil:
		return nil, err
	}
	for _, v := range vals.Validators {
		s.Validators = append(s.Validators, apiwire.Validator{
			Address:     v.Address.String(),
			PubKey:      hex.EncodeToString(v.PubKey.Bytes()),
			VotingPower: v.VotingPower,
		})
	}
	return s, nil
}

// BroadcastTx submits a tx to the mempool and returns CheckTx's verdict.
// A node still syncing the chain (block sync or state sync: CometBFT
// takes no txs then) holds the tx until it has caught up, for at most
// catchUpWait or until ctx ends: a node that just joined, or fell behind
// on a busy machine, is a moment from taking it, and its caller should
// not have to know (CI runs under load: "endpoint is closed while node
// is catching up" on a full node past height 3).
func (n *Node) BroadcastTx(ctx context.Context, tx []byte) (*apiwire.TxResult, error) {
	var r *coretypes.ResultBroadcastTx
	err := whileCatchingUp(ctx, catchUpWait, func() (err error) {
		r, err = n.rpc.BroadcastTxSync(ctx, tx)
		return err
	})
	var invalid mempool.ErrInvalidTx
	switch {
	case errors.As(err, &invalid):
		return &apiwire.TxResult{Hash: fmt.Sprintf("%X", cmttypes.Tx(tx).Hash()), Code: invalid.Code, Codespace: invalid.Codespace, Log: invalid.Log}, nil
	case errors.Is(err, mempool.ErrTxInCache):
		return nil, fmt.Errorf("%w: tx %X was already submitted recently", apiwire.ErrDuplicateTx, cmttypes.Tx(tx).Hash())
	case err != nil:
		return nil, err
	}
	return &apiwire.TxResult{Hash: r.Hash.String(), Code: r.Code, Codespace: r.Codespace, Log: r.Log}, nil
}

// catchUpWait bounds how long BroadcastTx holds a tx for a node that is
// catching up.
const catchUpWait = 30 * time.Second

// whileCatchingUp calls try until it returns anything but CometBFT's
// refusal of a node that is catching up, waiting a little longer each
// time, for at most wait in all or until ctx ends; then it says the node
// is still catching up.
func whileCatchingUp(ctx context.Context, wait time.Duration, try func() error) error {
	deadline := time.Now().Add(wait)
	delay := 50 * time.Millisecond
	for {
		err := try()
		if !errors.Is(err, rpccore.ErrEndpointClosedCatchingUp) {
			return err
		}
		if time.Now().Add(delay).After(deadline) {
			return fmt.Errorf("this node is still catching up with the chain after %s and takes no txs until it has: try again shortly, or send it to another node", wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("this node is catching up with the chain and takes no txs until it has: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// GetTx returns an included tx's result, or nil if it is not (yet) in a
// block.
func (n *Node) GetTx(ctx context.Context, hash []byte) (*apiwire.TxResult, error) {
	r, err := n.rpc.Tx(ctx, hash, false)
	if err != nil {
		if strings.Contains(err.Error(), "not found") {
			return nil, nil
		}
		return nil, err
	}
	res := &apiwire.TxResult{Hash: r.Hash.String(), Height: r.Height, Code: r.TxResult.Code, Codespace: r.TxResult.Codespace, Log: r.TxResult.Log}
	for _, e := range r.TxResult.Events {
		ev := ledger.Event{Type: e.Type}
		for _, a := range e.Attributes {
			ev.Attrs = append(ev.Attrs, ledger.Attr{Key: a.Key, Value: a.Value})
		}
		res.Events = append(res.Events, ev)
	}
	return res, nil
}

// WaitTx waits until the tx with hash is in a block, or ctx ends.
func (n *Node) WaitTx(ctx context.Context, hash []byte) (*apiwire.TxResult, error) {
	delay := 10 * time.Millisecond
	for {
		r, err := n.GetTx(ctx, hash)
		if err != nil || r != nil {
			return r, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("tx %X not included yet: %w", hash, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// Mempool returns the number of txs waiting in the mempool.
func (n *Node) Mempool() int { return n.cmt.Mempool().Size() }

// MempoolTxs returns up to max of the txs waiting in the mempool, in the
// order a proposer would take them (for diagnostics: what waits and why).
func (n *Node) MempoolTxs(max int) [][]byte {
	var out [][]byte
	for _, tx := range n.cmt.Mempool().ReapMaxTxs(max) {
		out = append(out, tx)
	}
	return out
}

// Height returns the height of the latest block in the block store.
func (n *Node) Height() int64 { return n.cmt.BlockStore().Height() }

// Subscribe returns a channel of new-block heights; it closes when ctx ends
// or the node stops.
func (n *Node) Subscribe(ctx context.Context, client string) (<-chan int64, error) {
	sub, err := n.cmt.EventBus().Subscribe(ctx, client, cmttypes.EventQueryNewBlock, 64)
	if err != nil {
		return nil, err
	}
	out := make(chan int64, 64)
	go func() {
		defer close(out)
		defer n.cmt.EventBus().Unsubscribe(context.Background(), client, cmttypes.EventQueryNewBlock)
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.Canceled():
				return
			case m := <-sub.Out():
				if ev, ok := m.Data().(cmttypes.EventDataNewBlock); ok {
					select {
					case out <- ev.Block.Height:
					default:
					}
				}
			}
		}
	}()
	return out, nil
}
