package apibench

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// apiState is what the built state holds, for the load to ask about.
type apiState struct {
	height    int64
	appHash   []byte
	txs       int
	states    map[string]int
	providers []market.Key
	consumers []market.Key
	lastJob   uint64
}

// MarshalJSON keeps what a later run needs of a kept state (the keys are
// derived again).
func (s *apiState) MarshalJSON() ([]byte, error) {
	return json.Marshal(apiStateJSON{s.height, s.appHash, s.txs, s.states, s.lastJob})
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *apiState) UnmarshalJSON(b []byte) error {
	var j apiStateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	s.height, s.appHash, s.txs, s.states, s.lastJob = j.Height, j.AppHash, j.Txs, j.States, j.LastJob
	return nil
}

type apiStateJSON struct {
	Height  int64          `json:"height"`
	AppHash []byte         `json:"app_hash"`
	Txs     int            `json:"txs"`
	States  map[string]int `json:"states"`
	LastJob uint64         `json:"last_job"`
}

// prepareState puts the state in a fresh validator home: a copy of the one
// o.StateDir keeps for this size, seed and code, or one built now (and
// kept there, when o.StateDir is set). Building sets res.SetupSeconds.
func prepareState(ctx context.Context, home string, o Options, params ledger.Params, senders []market.Key, res *Result, progress func(string, ...any)) (*apiState, error) {
	t0 := time.Now()
	cached := ""
	if o.StateDir != "" {
		fp, err := stateFingerprint(ctx, o.Seed, params, senders)
		if err != nil {
			return nil, fmt.Errorf("fingerprint of the state's encoding: %w", err)
		}
		cached = filepath.Join(o.StateDir, fmt.Sprintf("api-state-%dp-%dj-%dc-seed%d-%s", o.Providers, o.Jobs, o.Consumers, o.Seed, fp))
		if meta, err := os.ReadFile(filepath.Join(cached, "built.json")); err == nil {
			progress("copying the state built earlier in %s…", cached)
			st := &apiState{}
			if err := json.Unmarshal(meta, st); err != nil {
				return nil, fmt.Errorf("%s: %w", cached, err)
			}
			if err := copyDir(filepath.Join(cached, "home"), home); err != nil {
				return nil, err
			}
			st.providers, st.consumers = market.Keys("provider", o.Providers), market.Keys("consumer", o.Consumers)
			return st, nil
		}
	}
	if _, err := validator.Init(home, validator.InitOptions{ChainID: chainID, Validators: 1, Genesis: ledger.Genesis{Params: params}, BlockTime: o.BlockTime,
		SnapshotInterval: -1}); err != nil { // no state snapshots: writing one (gpunet bench statesync's subject) would land in the load
		return nil, err
	}
	progress("building the state: %d providers, %d jobs…", o.Providers, o.Jobs)
	st, err := buildState(ctx, filepath.Join(home, "data", "app"), o, params, senders, time.Now().UTC().Add(-time.Minute), progress)
	if err != nil {
		return nil, fmt.Errorf("build the state: %w", err)
	}
	res.SetupSeconds = time.Since(t0).Seconds()
	if cached != "" {
		progress("keeping a copy of the state in %s", cached)
		if err := copyDir(home, filepath.Join(cached, "home")); err != nil {
			return nil, err
		}
		meta, _ := json.Marshal(st)
		if err := os.WriteFile(filepath.Join(cached, "built.json"), meta, 0o644); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// stateFingerprint names the code that builds a state: the app hash of a
// tiny state built the same way at a fixed time. A change to the ledger's
// encoding, its key layout, its rules or this builder changes it, so a
// state kept by older code is never reused: it would not be what this code
// builds, and might not even decode.
func stateFingerprint(ctx context.Context, seed uint64, params ledger.Params, senders []market.Key) (string, error) {
	dir, err := os.MkdirTemp("", "gpunet-bench-api-fp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	o := Options{Providers: 20, Jobs: 200, Consumers: 4, Seed: seed}
	st, err := buildState(ctx, dir, o, params, senders, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), func(string, ...any) {})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(st.appHash[:6]), nil
}

// copyDir copies the regular files under src to dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !e.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		fi, err := in.Stat()
		if err != nil {
			return err
		}
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
