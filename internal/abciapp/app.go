// Package abciapp adapts the ledger to CometBFT's ABCI and persists its state
// in Pebble. It is the only package where ABCI types appear: it turns ledger
// errors into ABCI codes and ledger events into ABCI events, stages a block's
// changes in FinalizeBlock and writes them, with the app hash, in one synced
// batch in Commit. A crash at any point leaves the store at the last
// committed height; CometBFT's handshake replays what follows.
package abciapp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"
	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/ledger"
)

// DefaultCacheBytes is the app state's block cache unless Options says
// otherwise (Pebble's own default is 8 MiB).
const DefaultCacheBytes = 256 << 20

// Codespace names gpunet's codes in ABCI results.
const Codespace = "gpunet"

// AppVersion is the version of the state machine's rules.
const AppVersion = 1

// Options tune an App.
type Options struct {
	// CheckInvariants verifies the ledger's invariants after every block and
	// halts the node (FinalizeBlock fails) when one breaks.
	CheckInvariants bool
	Logger          *slog.Logger
	// CacheBytes sizes Pebble's block cache (0: DefaultCacheBytes). API
	// reads of a large state (a job, a page of jobs) miss a small cache
	// and decompress blocks from disk on every read.
	CacheBytes int64
	// ObserveBlock, when set, gets each block's tx count and the time the
	// ledger took to execute it (txs, scheduling and the rest of the
	// block's end; invariant checks not included).
	ObserveBlock func(txs int, d time.Duration)
	// Snapshots configures the state snapshots taken and served for
	// state sync (snapshot.go).
	Snapshots SnapshotOptions
}

// App is the ABCI application.
type App struct {
	abci.BaseApplication

	store  *Store
	state  *PebbleKV // the committed state: a.store.KV()
	ledger ledger.Ledger
	opts   Options
	sigs   *sigCache

	// Consensus connection state, touched by one goroutine at a time
	// (CometBFT serialises InitChain, FinalizeBlock and Commit).
	genesis       []ledger.Change // staged by InitChain until the first Commit
	pending       []ledger.Change // staged by FinalizeBlock until Commit
	pendingHeight int64
	// viewMu makes a view's snapshot and genesis layer agree: held for
	// writing while genesis is set and while it is committed.
	viewMu sync.RWMutex

	// Mempool state: an overlay of the committed state, rebuilt at Commit,
	// and the checker admitting txs to it.
	checkMu sync.Mutex
	check   *ledger.TxChecker

	dir   string       // the store's directory
	snaps *snapshotter // state sync (snapshot.go)

	closeOnce sync.Once
	closeErr  error
}

// OpenPebble opens the state store in dir (on fs; nil means the OS file
// system) the way a node does, with a block cache of cacheBytes. Pebble's
// default 8 MiB cache does not hold the hot part of a state with 100k
// providers: the scheduler then spends a third of its time decompressing
// blocks it read a moment before. The cache fills only as the state is read.
func OpenPebble(dir string, fs vfs.FS, cacheBytes int64) (*pebble.DB, error) {
	cache := pebble.NewCache(cacheBytes)
	defer cache.Unref() // the DB holds its own reference
	opts := &pebble.Options{Logger: QuietPebbleLogger{}, Cache: cache, FS: fs, MemTableSize: 32 << 20}
	// Bloom filters on every level: a block writes several keys that did
	// not exist before (a new job's record and index entries), and the
	// lattice hash needs each one's old value. Without filters, every such
	// miss searched each level's tables.
	opts.Levels = make([]pebble.LevelOptions, 7)
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	return pebble.Open(dir, opts)
}

// Open opens (or creates) the app state in dir.
func Open(dir string, opts Options) (*App, error) {
	if opts.CacheBytes == 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := discardUnfinishedRestore(dir, opts.Logger); err != nil {
		return nil, err
	}
	db, err := OpenPebble(dir, nil, opts.CacheBytes)
	if err != nil {
		return nil, fmt.Errorf("open app state in %s: %w", dir, err)
	}
	store, err := OpenStore(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open app state in %s: %w", dir, err)
	}
	if err := ledger.CheckRecordEncoding(store.KV()); err != nil {
		store.Close()
		return nil, fmt.Errorf("open app state in %s: %w", dir, err)
	}
	a := &App{store: store, state: store.KV(), opts: opts, sigs: newSigCache(sigCacheEntries, sigCacheKeys), dir: dir, snaps: newSnapshotter(opts.Snapshots, opts.Logger)}
	a.ledger.Verify = a.sigs.verify
	a.ledger.Txs = a.sigs
	// TEE evidence is verified offline with internal/attest: the ledger
	// defines the seam and imports no verifier (ledger/tee.go).
	a.ledger.Attest = attest.LedgerVerifier
	a.check = a.ledger.NewTxChecker(ledger.NewOverlay(a.committed()))
	return a, nil
}

// Close closes the store. Later calls do nothing.
func (a *App) Close() error {
	a.closeOnce.Do(func() {
		a.snaps.close()
		a.closeErr = a.store.Close()
	})
	return a.closeErr
}

func (a *App) committed() ledger.KV { return a.state }

// View returns a consistent read-only view of the committed state (with the
// genesis state before the first block is committed) and a function to
// release it.
func (a *App) View() (ledger.KV, func()) {
	if a.snaps.restoring.Load() {
		return emptyKV{}, func() {}
	}
	a.viewMu.RLock()
	kv, release := a.store.View()
	g := a.genesis
	a.viewMu.RUnlock()
	return layered(kv, g), release
}

// NextSequence returns the sequence the mempool expects in addr's next tx:
// the committed sequence plus the sender's txs waiting in the mempool.
func (a *App) NextSequence(addr address.Address) (uint64, error) {
	a.checkMu.Lock()
	defer a.checkMu.Unlock()
	acct, err := ledger.GetAccount(a.check.State(), addr)
	return acct.Sequence, err
}

// Info implements abci.Application.
func (a *App) Info(context.Context, *abci.InfoRequest) (*abci.InfoResponse, error) {
	kv := a.committed()
	resp := &abci.InfoResponse{Version: "gpunet", AppVersion: AppVersion}
	if ledger.ChainID(kv) == "" {
		return resp, nil // before genesis: CometBFT will call InitChain
	}
	hash, err := ledger.AppHash(kv)
	if err != nil {
		return nil, err
	}
	resp.LastBlockHeight = int64(ledger.Height(kv))
	resp.LastBlockAppHash = hash
	return resp, nil
}

// InitChain implements abci.Application.
func (a *App) InitChain(_ context.Context, req *abci.InitChainRequest) (*abci.InitChainResponse, error) {
	var g ledger.Genesis
	if err := json.Unmarshal(req.AppStateBytes, &g); err != nil {
		return nil, fmt.Errorf("genesis app_state: %w", err)
	}
	changes, hash, err := a.ledger.InitGenesis(a.committed(), req.ChainId, g)
	if err != nil {
		return nil, err
	}
	vals, err := genesisValidators(layered(a.committed(), changes), req.Validators)
	if err != nil {
		return nil, err
	}
	a.viewMu.Lock()
	a.genesis = changes
	a.viewMu.Unlock()
	a.resetCheckState()
	return &abci.InitChainResponse{AppHash: hash, Validators: vals}, nil
}

// CheckTx implements abci.Application. CometBFT calls it from each RPC
// handler at once; the mempool state takes one tx at a time.
func (a *App) CheckTx(_ context.Context, req *abci.CheckTxRequest) (*abci.CheckTxResponse, error) {
	// Decoding and the signature are functions of the tx's bytes alone,
	// and the signature the costliest check: do both before taking
	// checkMu, so that concurrent callers work in parallel and the lock
	// covers the state checks only. The prepared tx goes to the check
	// itself (and into the cache, where rechecks and DeliverTx find it).
	// A recheck's tx was prepared when it entered the mempool.
	var p ledger.PreparedTx
	if req.Type != abci.CHECK_TX_TYPE_RECHECK {
		p = a.ledger.Prepare(req.Tx)
	}
	a.checkMu.Lock()
	var r ledger.TxResult
	if req.Type == abci.CHECK_TX_TYPE_RECHECK {
		// After a block: a tx stays while a block would still take it
		// (ledger.TxChecker.Recheck), so that one whose message a block
		// made fail does not take its sender's later txs with it.
		r = a.check.Recheck(req.Tx)
	} else {
		r = a.check.CheckPrepared(p)
	}
	a.checkMu.Unlock()
	// No events: CometBFT v1.0's mempool and tx indexer ignore CheckTx's
	// (only broadcast_tx_sync's caller would see them), and the ledger
	// builds none for a check.
	if r.Err != nil {
		return &abci.CheckTxResponse{Code: r.Code(), Codespace: Codespace, Log: r.Err.Error()}, nil
	}
	return &abci.CheckTxResponse{Code: abci.CodeTypeOK, GasWanted: 1}, nil
}

// FinalizeBlock implements abci.Application.
func (a *App) FinalizeBlock(_ context.Context, req *abci.FinalizeBlockRequest) (*abci.FinalizeBlockResponse, error) {
	start := time.Now()
	base := layered(a.committed(), a.genesis)
	b := a.ledger.BeginBlock(base, ledger.BlockInfo{Height: req.Height, Time: req.Time, Seed: blockSeed(req.Hash),
		Votes: commitVotes(req.DecidedLastCommit), Misbehavior: misbehavior(req.Misbehavior)})
	prepared := a.sigs.verifyBlock(req.Txs, runtime.GOMAXPROCS(0), a.ledger.Prepare)
	results := make([]*abci.ExecTxResult, len(req.Txs))
	for i, tx := range req.Txs {
		var r ledger.TxResult
		if i < len(prepared) {
			r = b.DeliverPrepared(prepared[i])
		} else {
			r = b.DeliverTx(tx)
		}
		res := &abci.ExecTxResult{Code: r.Code(), Events: toABCIEvents(r.Events)}
		if r.Err != nil {
			res.Codespace = Codespace
			res.Log = r.Err.Error()
		}
		results[i] = res
	}
	changes, hash, err := b.End()
	if err != nil {
		return nil, fmt.Errorf("block %d: %w", req.Height, err)
	}
	if a.opts.ObserveBlock != nil {
		a.opts.ObserveBlock(len(req.Txs), time.Since(start))
	}
	if a.opts.CheckInvariants {
		if err := ledger.CheckInvariants(layered(base, changes)); err != nil {
			a.opts.Logger.Error("ledger invariant broken; halting", "height", req.Height, "err", err)
			return nil, fmt.Errorf("block %d: %w", req.Height, err)
		}
	}
	a.pending, a.pendingHeight = changes, req.Height
	return &abci.FinalizeBlockResponse{TxResults: results, AppHash: hash, Events: toABCIEvents(b.Events()), ValidatorUpdates: validatorUpdates(b.ValidatorUpdates())}, nil
}

// blockSeed derives the ledger's per-block randomness from the block hash,
// which every validator has and no one could know before the proposal.
func blockSeed(blockHash []byte) ledger.Hash {
	h := sha256.New()
	h.Write([]byte("gpunet/block-seed/v1\x00"))
	h.Write(blockHash)
	var s ledger.Hash
	h.Sum(s[:0])
	return s
}

// Commit implements abci.Application: it writes the staged block in one
// synced batch.
func (a *App) Commit(context.Context, *abci.CommitRequest) (*abci.CommitResponse, error) {
	if a.genesis != nil {
		a.viewMu.Lock()
		defer a.viewMu.Unlock()
	}
	if err := a.store.Commit(true, a.genesis, a.pending); err != nil {
		return nil, fmt.Errorf("commit block %d: %w", a.pendingHeight, err)
	}
	// genesis is written only under viewMu (held above when it is set):
	// View reads it concurrently.
	if a.genesis != nil {
		a.genesis = nil
	}
	a.pending = nil
	a.resetCheckState()
	a.takeSnapshot(uint64(a.pendingHeight))
	return &abci.CommitResponse{}, nil
}

func (a *App) resetCheckState() {
	a.checkMu.Lock()
	a.check = a.ledger.NewTxChecker(ledger.NewOverlay(layered(a.committed(), a.genesis)))
	a.checkMu.Unlock()
}

// Query implements abci.Application. Paths: /account/ADDR, /params, /supply.
// Values are JSON.
func (a *App) Query(_ context.Context, req *abci.QueryRequest) (*abci.QueryResponse, error) {
	kv, release := a.View()
	defer release()
	v, err := QueryState(kv, req.Path)
	if err != nil {
		return &abci.QueryResponse{Code: ledger.CodeOf(err), Codespace: Codespace, Log: err.Error()}, nil
	}
	return &abci.QueryResponse{Value: v, Height: int64(ledger.Height(kv))}, nil
}

// QueryState answers a query path against kv with JSON.
func QueryState(kv ledger.KV, path string) ([]byte, error) {
	switch {
	case strings.HasPrefix(path, "/account/"):
		addr, err := address.Parse(strings.TrimPrefix(path, "/account/"))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", err, ledger.ErrInvalidAddress)
		}
		acct, err := ledger.GetAccount(kv, addr)
		if err != nil {
			return nil, err
		}
		return json.Marshal(acct)
	case path == "/params":
		p, err := ledger.GetParams(kv)
		if err != nil {
			return nil, err
		}
		return json.Marshal(p)
	case path == "/supply":
		return json.Marshal(map[string]uint64{"supply": ledger.Supply(kv), "treasury": ledger.Treasury(kv)})
	}
	return nil, fmt.Errorf("unknown query path %q (known: /account/ADDR, /params, /supply): %w", path, ledger.ErrInvalidMsg)
}

func toABCIEvents(evs []ledger.Event) []abci.Event {
	if len(evs) == 0 {
		return nil
	}
	out := make([]abci.Event, len(evs))
	for i, e := range evs {
		attrs := make([]abci.EventAttribute, len(e.Attrs))
		for j, at := range e.Attrs {
			attrs[j] = abci.EventAttribute{Key: at.Key, Value: at.Value, Index: true}
		}
		out[i] = abci.Event{Type: e.Type, Attributes: attrs}
	}
	return out
}

// QuietPebbleLogger keeps Pebble's routine messages (WAL recovery after a
// crash, compactions) off the terminal; fatal errors still panic.
type QuietPebbleLogger struct{}

// Infof implements pebble.Logger.
func (QuietPebbleLogger) Infof(string, ...any) {}

// Errorf implements pebble.Logger.
func (QuietPebbleLogger) Errorf(string, ...any) {}

// Fatalf implements pebble.Logger.
func (QuietPebbleLogger) Fatalf(format string, args ...any) {
	panic(errors.New("pebble: " + fmt.Sprintf(format, args...)))
}
