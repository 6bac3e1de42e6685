// Package syncbench is the state sync benchmark (`gpunet bench statesync`):
// how long a node takes to join by restoring a snapshot of a large state,
// against replaying the chain that built it.
//
// Replay (the baseline, measured in the same run): the API benchmark's
// state (apibench.BuildState: --providers providers registered and staked,
// --jobs jobs through their lives) is built block by block through the
// ledger into a fresh app's Pebble store. That is what a node replaying the
// chain executes, minus what replay adds on top: the signatures (the
// builder does not verify them; one verification is timed here and
// multiplied by the txs, a stated extrapolation), CometBFT's block store
// and fetching the blocks from peers (not counted: the replay figure is a
// lower bound).
//
// State sync: the app opened on that state executes one more block and
// commits it with a snapshot interval that falls on it, so the real code
// writes the snapshot in the background (the Commit's own time is
// reported: blocks are not held up). A fresh app is then offered the
// snapshot with the source's app hash as the trusted one, and given every
// chunk in order through the ABCI calls, as CometBFT's syncer does
// (OfferSnapshot, then LoadSnapshotChunk on the source and
// ApplySnapshotChunk on the new app for each chunk; the last one checks the
// app hash and the ledger's invariants). The restored app must report the
// source's height and app hash. CometBFT's own share (snapshot discovery,
// 5 s; the light client's header checks; transfer at the network's speed)
// is not counted; the snapshot's size is reported.
package syncbench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/gpunet/gpunet/internal/abciapp"
	"github.com/gpunet/gpunet/internal/bench/apibench"
	"github.com/gpunet/gpunet/internal/bench/measure"
)

// Defaults of Options: the state.
const (
	DefaultProviders = apibench.DefaultProviders
	DefaultJobs      = apibench.DefaultJobs
	DefaultConsumers = apibench.DefaultConsumers
	DefaultSeed      = apibench.DefaultSeed
)

// Options tune a run. Zero fields take the defaults.
type Options struct {
	Providers, Jobs, Consumers int
	Seed                       uint64
	// ChunkBytes is the snapshot's chunk size (0: the node's default).
	ChunkBytes int
	// Home, if set, keeps the run's stores under it; else a temp dir,
	// removed after.
	Home     string
	Progress io.Writer
}

// Validate fills in defaults and checks the rest.
func (o *Options) Validate() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Providers, DefaultProviders)
	def(&o.Jobs, DefaultJobs)
	def(&o.Consumers, DefaultConsumers)
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	if o.Providers < 1 || o.Jobs < 100 || o.Consumers < 1 {
		return errors.New("--providers and --consumers must be at least 1, --jobs at least 100")
	}
	if o.ChunkBytes < 0 || o.ChunkBytes > abciapp.MaxSnapshotChunkBytes {
		return fmt.Errorf("--chunk-bytes %d out of range [0, %d]", o.ChunkBytes, abciapp.MaxSnapshotChunkBytes)
	}
	return nil
}

// Result is a run's figures.
type Result struct {
	Date       time.Time `json:"date"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	Providers  int       `json:"providers"`
	Jobs       int       `json:"jobs"`
	Height     int64     `json:"height"`
	Txs        int       `json:"txs"`

	// BuildSeconds is the ledger executing every block of the chain
	// (signatures not verified); SigVerifyUs one ed25519 verification;
	// ReplaySeconds their sum over the chain's txs: the replay estimate.
	BuildSeconds  float64 `json:"build_seconds"`
	BuildCPU      float64 `json:"build_cpu_seconds"` // the process's CPU time in it
	SigVerifyUs   float64 `json:"sig_verify_us"`
	ReplaySeconds float64 `json:"replay_seconds"`

	// CommitMs is the Commit that started the snapshot; SnapshotSeconds
	// the background writing of it.
	CommitMs        float64 `json:"commit_ms"`
	SnapshotSeconds float64 `json:"snapshot_seconds"`
	Keys            uint64  `json:"keys"`
	Chunks          uint32  `json:"chunks"`
	SnapshotBytes   int64   `json:"snapshot_bytes"` // as sent (compressed)

	// LoadSeconds is LoadSnapshotChunk on the source for every chunk;
	// ApplySeconds ApplySnapshotChunk for all but the last; VerifySeconds
	// the last (its entries, the app hash check and the invariants);
	// RestoreSeconds all of it with OfferSnapshot.
	LoadSeconds    float64 `json:"load_seconds"`
	ApplySeconds   float64 `json:"apply_seconds"`
	VerifySeconds  float64 `json:"verify_seconds"`
	RestoreSeconds float64 `json:"restore_seconds"`
	RestoreCPU     float64 `json:"restore_cpu_seconds"`

	// Speedup is ReplaySeconds / RestoreSeconds; SpeedupLedgerOnly
	// BuildSeconds / RestoreSeconds (replay without signatures);
	// SpeedupCPU the same as SpeedupLedgerOnly in CPU time, the figure to
	// compare on a machine other work shares.
	Speedup           float64 `json:"speedup"`
	SpeedupLedgerOnly float64 `json:"speedup_ledger_only"`
	SpeedupCPU        float64 `json:"speedup_cpu"`
	AppHash           string  `json:"app_hash"`
}

// Run builds the state, snapshots it and restores it.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := measure.Progress(o.Progress)
	root := o.Home
	if root == "" {
		dir, err := os.MkdirTemp("", "gpunet-bench-statesync-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		root = dir
	} else {
		dir, err := os.MkdirTemp(root, "bench-statesync-")
		if err != nil {
			return nil, err
		}
		root = dir
	}
	res := &Result{Date: time.Now().UTC(), GOMAXPROCS: runtime.GOMAXPROCS(0), Providers: o.Providers, Jobs: o.Jobs}

	// Replay: the chain's blocks through the ledger.
	progress("replay: building the state (%d providers, %d jobs) block by block through the ledger…", o.Providers, o.Jobs)
	srcDir := filepath.Join(root, "source", "app")
	t0, cpu0 := time.Now(), measure.ProcessCPU()
	st, err := apibench.BuildState(ctx, srcDir, apibench.Options{Providers: o.Providers, Jobs: o.Jobs, Consumers: o.Consumers, Seed: o.Seed}, progress)
	if err != nil {
		return nil, fmt.Errorf("build the state: %w", err)
	}
	res.BuildSeconds, res.BuildCPU = time.Since(t0).Seconds(), (measure.ProcessCPU() - cpu0).Seconds()
	res.Height, res.Txs = st.Height+1, st.Txs
	res.SigVerifyUs = sigVerifyUs()
	res.ReplaySeconds = res.BuildSeconds + float64(res.Txs)*res.SigVerifyUs/1e6
	progress("  %d blocks, %d txs in %.1fs; + %d signatures at %.1fµs = %.1fs", st.Height, st.Txs, res.BuildSeconds, st.Txs, res.SigVerifyUs, res.ReplaySeconds)

	// The snapshot, taken by the app at the Commit of the next block.
	taken := make(chan error, 1)
	snapDir := filepath.Join(root, "source", "snapshots")
	src, err := abciapp.Open(srcDir, abciapp.Options{Snapshots: abciapp.SnapshotOptions{
		Dir: snapDir, Interval: uint64(res.Height), ChunkBytes: o.ChunkBytes,
		Taken: func(_ uint64, err error) { taken <- err },
	}})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if _, err := src.FinalizeBlock(ctx, &abci.FinalizeBlockRequest{Height: res.Height, Time: time.Now().UTC()}); err != nil {
		return nil, err
	}
	t0 = time.Now()
	if _, err := src.Commit(ctx, &abci.CommitRequest{}); err != nil {
		return nil, err
	}
	commitDone := time.Now()
	res.CommitMs = measure.ExactMs(commitDone.Sub(t0))
	progress("snapshot: writing at height %d…", res.Height)
	select {
	case err := <-taken:
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res.SnapshotSeconds = time.Since(commitDone).Seconds()
	info, err := src.Info(ctx, &abci.InfoRequest{})
	if err != nil {
		return nil, err
	}
	res.AppHash = fmt.Sprintf("%X", info.LastBlockAppHash)
	list, err := src.ListSnapshots(ctx, &abci.ListSnapshotsRequest{})
	if err != nil || len(list.Snapshots) != 1 {
		return nil, fmt.Errorf("the source lists %d snapshots (%v), want 1", len(list.Snapshots), err)
	}
	snap := list.Snapshots[0]
	res.Chunks = snap.Chunks
	if res.Keys, err = abciapp.SnapshotKeys(snap); err != nil {
		return nil, err
	}

	// The restore, through the ABCI calls CometBFT's syncer makes.
	progress("restore: %d chunks into a fresh app…", snap.Chunks)
	dst, err := abciapp.Open(filepath.Join(root, "joiner", "app"), abciapp.Options{})
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	t0, cpu0 = time.Now(), measure.ProcessCPU()
	offer, err := dst.OfferSnapshot(ctx, &abci.OfferSnapshotRequest{Snapshot: snap, AppHash: info.LastBlockAppHash})
	if err != nil || offer.Result != abci.OFFER_SNAPSHOT_RESULT_ACCEPT {
		return nil, fmt.Errorf("offer: %v %v", offer, err)
	}
	var load, apply time.Duration
	for i := range snap.Chunks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t1 := time.Now()
		c, err := src.LoadSnapshotChunk(ctx, &abci.LoadSnapshotChunkRequest{Height: snap.Height, Format: snap.Format, Chunk: i})
		if err != nil || c.Chunk == nil {
			return nil, fmt.Errorf("load chunk %d: %v", i, err)
		}
		t2 := time.Now()
		load += t2.Sub(t1)
		res.SnapshotBytes += int64(len(c.Chunk))
		r, err := dst.ApplySnapshotChunk(ctx, &abci.ApplySnapshotChunkRequest{Index: i, Chunk: c.Chunk, Sender: "source"})
		if err != nil || r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT {
			return nil, fmt.Errorf("apply chunk %d: %v %v", i, r, err)
		}
		if i == snap.Chunks-1 {
			res.VerifySeconds = time.Since(t2).Seconds()
		} else {
			apply += time.Since(t2)
		}
	}
	res.RestoreSeconds, res.RestoreCPU = time.Since(t0).Seconds(), (measure.ProcessCPU() - cpu0).Seconds()
	res.LoadSeconds, res.ApplySeconds = load.Seconds(), apply.Seconds()
	got, err := dst.Info(ctx, &abci.InfoRequest{})
	if err != nil {
		return nil, err
	}
	if got.LastBlockHeight != info.LastBlockHeight || !bytes.Equal(got.LastBlockAppHash, info.LastBlockAppHash) {
		return nil, fmt.Errorf("restored app at height %d hash %X, the source at %d %X", got.LastBlockHeight, got.LastBlockAppHash, info.LastBlockHeight, info.LastBlockAppHash)
	}
	res.Speedup = res.ReplaySeconds / res.RestoreSeconds
	res.SpeedupLedgerOnly = res.BuildSeconds / res.RestoreSeconds
	if res.RestoreCPU > 0 {
		res.SpeedupCPU = res.BuildCPU / res.RestoreCPU
	}
	return res, nil
}

// sigVerifyUs times one ed25519 verification of a transfer-sized message
// (crypto/ed25519; the app's verifier, with expanded keys, is somewhat
// faster).
func sigVerifyUs() float64 {
	pub, priv, _ := ed25519.GenerateKey(nil)
	msg := bytes.Repeat([]byte{7}, 160)
	sig := ed25519.Sign(priv, msg)
	const n = 2000
	t0 := time.Now()
	for range n {
		if !ed25519.Verify(pub, msg, sig) {
			panic("unreachable: a valid signature")
		}
	}
	return measure.Us(time.Since(t0)) / n
}
