package validator

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	dbm "github.com/cometbft/cometbft-db"
	abci "github.com/cometbft/cometbft/abci/types"
	cmtcfg "github.com/cometbft/cometbft/config"
	nm "github.com/cometbft/cometbft/node"
	sm "github.com/cometbft/cometbft/state"
	"github.com/cometbft/cometbft/store"
)

// Opening a node's stores. CometBFT panics on stores it finds inconsistent
// (a block store behind its state, a state behind its blocks: what a
// damaged write-ahead log leaves, since Pebble drops a garbled tail
// silently), and its own errors name neither the file nor a remedy. This
// file turns both into errors that say which file, what state it is in
// and what to do.

// remedy says what to do about a damaged file under home.
func remedy(home string) string {
	return fmt.Sprintf("restore %s from a backup taken while the node was stopped, or, on a devnet, start afresh with `gpunet devnet --reset --home %s`",
		filepath.Join(home, "data"), home)
}

// storeOpener is the DB provider Start gives CometBFT: it remembers every
// store it opens, so that a failed start closes them, and its errors name
// the store's directory and a remedy.
type storeOpener struct {
	home   string
	opened []dbm.DB
}

func (o *storeOpener) open(c *cmtcfg.DBContext) (dbm.DB, error) {
	db, err := QuietDBProvider(c)
	if err != nil {
		dir := filepath.Join(c.Config.DBDir(), c.ID+".db")
		return nil, fmt.Errorf("CometBFT's %s store %s cannot be opened (%w): it is damaged or not a %s database; %s",
			c.ID, dir, err, c.Config.DBBackend, remedy(o.home))
	}
	o.opened = append(o.opened, db)
	return db, nil
}

// closeAll closes every store opened so far.
func (o *storeOpener) closeAll() {
	for _, db := range o.opened {
		db.Close()
	}
	o.opened = nil
}

// genesisProvider is CometBFT's genesis provider with errors that name the
// file and a remedy.
func genesisProvider(home string, cfg *cmtcfg.Config) nm.GenesisDocProvider {
	load := nm.DefaultGenesisDocProviderFunc(cfg)
	return func() (nm.ChecksummedGenesisDoc, error) {
		g, err := load()
		if err != nil {
			return g, fmt.Errorf("genesis file %s is not a valid genesis document (%w): copy the network's genesis.json there again, byte for byte, or, on a devnet, start afresh with `gpunet devnet --reset --home %s`",
				cfg.GenesisFile(), err, home)
		}
		return g, nil
	}
}

// newNode calls create, turning a panic into an error that reports the
// heights of the block store, the state and the app, so that the one out
// of step (the damaged one) is named.
func newNode(home string, cfg *cmtcfg.Config, o *storeOpener, app abci.Application, create func() (*nm.Node, error)) (n *nm.Node, err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		o.closeAll()
		err = fmt.Errorf("the node's stores in %s are inconsistent (CometBFT: %v): %s; %s",
			filepath.Join(home, "data"), r, describeStores(cfg, app), remedy(home))
	}()
	return create()
}

// describeStores reports the height each of the node's stores is at.
func describeStores(cfg *cmtcfg.Config, app abci.Application) string {
	o := &storeOpener{}
	defer o.closeAll()
	dir := cfg.DBDir()
	blocks := "unreadable"
	if db, err := o.open(&cmtcfg.DBContext{ID: "blockstore", Config: cfg}); err == nil {
		if h, err := safely(func() (int64, error) { return store.NewBlockStore(db).Height(), nil }); err == nil {
			blocks = fmt.Sprintf("at height %d", h)
		}
	}
	state := "unreadable"
	if db, err := o.open(&cmtcfg.DBContext{ID: "state", Config: cfg}); err == nil {
		if h, err := safely(func() (int64, error) {
			s, err := sm.NewStore(db, sm.StoreOptions{}).Load()
			return s.LastBlockHeight, err
		}); err == nil {
			state = fmt.Sprintf("at height %d", h)
		}
	}
	appH := "unreadable"
	if info, err := app.Info(context.Background(), &abci.InfoRequest{}); err == nil {
		appH = fmt.Sprintf("at height %d", info.LastBlockHeight)
	}
	return fmt.Sprintf("block store %s %s, state %s %s, app %s; the one behind the others is damaged",
		filepath.Join(dir, "blockstore.db"), blocks, filepath.Join(dir, "state.db"), state, appH)
}

// safely calls f, turning a panic into an error.
func safely(f func() (int64, error)) (v int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New(fmt.Sprint(r))
		}
	}()
	return f()
}
