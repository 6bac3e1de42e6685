package apibench

import (
	"path/filepath"
	"time"

	cmtcfg "github.com/cometbft/cometbft/config"
	sm "github.com/cometbft/cometbft/state"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/validator"
)

// resumeOn makes the chain of home resume on the built state: its genesis
// starts at the next height, with the state's app hash, now.
func resumeOn(home string, st *apiState) error {
	gen, err := cmttypes.GenesisDocFromFile(filepath.Join(home, "config", "genesis.json"))
	if err != nil {
		return err
	}
	gen.InitialHeight, gen.AppHash = st.height+1, st.appHash
	gen.GenesisTime = time.Now().UTC().Truncate(time.Millisecond)
	if err := gen.ValidateAndComplete(); err != nil {
		return err
	}
	if err := gen.SaveAs(filepath.Join(home, "config", "genesis.json")); err != nil {
		return err
	}
	return bootstrapConsensusState(home, gen)
}

// bootstrapConsensusState saves CometBFT's state at genesis (height 0 of
// a chain whose first block is gen.InitialHeight, over the app hash the
// built state has), as state sync would. Without it, CometBFT's handshake
// finds an app already past genesis, skips InitChain, and never saves a
// state to start from.
func bootstrapConsensusState(home string, gen *cmttypes.GenesisDoc) error {
	db, err := validator.QuietDBProvider(&cmtcfg.DBContext{ID: "state", Config: cmtcfg.DefaultConfig().SetRoot(home)})
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := sm.MakeGenesisState(gen)
	if err != nil {
		return err
	}
	return sm.NewStore(db, sm.StoreOptions{}).Bootstrap(st)
}
