package apibench

import (
	"context"
	"time"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/ledger"
)

// BuiltState is a state BuildState built.
type BuiltState struct {
	Height  int64  // the last block applied
	AppHash []byte // the app hash after it
	Txs     int    // txs in all its blocks
}

// BuildState builds into the Pebble directory dir the state this
// benchmark runs on, for o's size and seed (o.Validate fills in defaults):
// genesis, then every block through the ledger, signatures not verified.
// It is exported for benchmarks that need the same state (syncbench times
// how long building it takes against restoring it from a snapshot).
func BuildState(ctx context.Context, dir string, o Options, progress func(string, ...any)) (*BuiltState, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(string, ...any) {}
	}
	st, err := buildState(ctx, dir, o, benchParams(), market.Keys("api-sender", 64), time.Now().UTC().Add(-time.Minute), progress)
	if err != nil {
		return nil, err
	}
	return &BuiltState{Height: st.height, AppHash: st.appHash, Txs: st.txs}, nil
}

// ChainID is the chain id of the states BuildState builds.
const ChainID = chainID

// benchParams are the ledger parameters of the benchmark's state: no
// agents run to answer liveness or hardware challenges.
func benchParams() ledger.Params {
	params := ledger.DefaultParams()
	params.LivenessRatePPM = 0
	params.HWRatePPM = 0
	return params
}
