// Package ledgerbench is the ledger benchmark (`gpunet bench ledger`): it
// measures the ledger's throughput through consensus. It pushes pre-signed transfers through one in-process CometBFT validator
// running gpunet's ABCI app and, in the same run and with the same node
// configuration, CometBFT's own kvstore example app with txs of exactly the
// same sizes, and reports both rates, their ratio and commit latencies. The
// ratio is the figure to track: on a shared, noisy machine the absolute
// rates move with the load of everything else, the ratio much less.
//
// Txs reach the node either as clients send them, through CometBFT's RPC
// (broadcast_tx_sync over loopback HTTP, the default), or straight into its
// mempool in process; see Options.Submit.
//
// It is the engine of `gpunet bench ledger` and of the Go benchmarks in this
// package. It builds its CometBFT nodes itself (homes written by
// validator.Init, a node configuration mirroring validator.Start's) so that
// either app can be plugged in.
package ledgerbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/gpunet/gpunet/internal/abciapp"
	"github.com/gpunet/gpunet/internal/bench/measure"
)

// Defaults of Options.
const (
	DefaultTxs       = 20000
	DefaultSenders   = 200
	DefaultBlockTime = 20 * time.Millisecond
	DefaultSubmit    = SubmitRPC
	// Submitters by mode: an RPC round trip leaves a goroutine waiting on
	// the network, so that mode needs more of them in flight.
	DefaultRPCSubmitters     = 8
	DefaultMempoolSubmitters = 2
	DefaultTimeout           = 5 * time.Minute
)

// Target is the acceptance target (issue 36): the ledger's rate, and its
// CPU ratio to the kvstore's, both at least these.
var Target = TargetFigures{TxPerS: 4000, CPURatio: 0.8}

// TargetFigures are the figures a run must reach.
type TargetFigures struct {
	TxPerS   float64 `json:"tx_per_s"`
	CPURatio float64 `json:"cpu_ratio"`
}

// Options tune a run. Zero fields take the defaults.
type Options struct {
	// Txs is the number of txs each phase pushes through.
	Txs int
	// Senders is the number of genesis-funded accounts signing the
	// ledger's transfers, round-robin.
	Senders int
	// BlockTime is CometBFT's timeout_commit, the same for both phases.
	BlockTime time.Duration
	// Submit is how txs reach the node: SubmitRPC (default) or
	// SubmitMempool.
	Submit string
	// Submitters is the number of goroutines submitting txs, each waiting
	// for CheckTx's verdict on a tx before sending its next; zero means
	// DefaultRPCSubmitters or DefaultMempoolSubmitters, by Submit. Each
	// sender's txs all go through one of them, in sequence order.
	Submitters int
	// Dir receives the phases' homes (DIR/ledger, DIR/kvstore), which are
	// kept; empty means a temporary directory removed afterwards.
	Dir string
	// Timeout bounds each phase.
	Timeout time.Duration
	// Progress, if set, receives a line as each phase starts and ends.
	Progress io.Writer
	// CPUProfile, if set, receives a CPU profile (pprof) of the ledger
	// phase's measured window, from the first submission to the last commit.
	CPUProfile io.Writer
	// KVStoreCPUProfile, if set, receives the same profile of the kvstore
	// phase, so that the two apps' profiles come from one run.
	KVStoreCPUProfile io.Writer

	// Validators above 1 runs the ledger phase alone (no kvstore phase) on
	// that many validators, each a `gpunet node` process of Bin (default:
	// this executable), the submitters spread over their RPCs (see
	// runNetwork). Only SubmitRPC applies.
	Validators int
	Bin        string
	// Delay, with Validators, puts each validator in a network namespace
	// of its own (internal/testnet: root) with this one-way delay, ±
	// Jitter, between any two.
	Delay, Jitter time.Duration
}

// Validate fills in the defaults of zero fields and checks the rest.
func (o *Options) Validate() error {
	if o.Txs == 0 {
		o.Txs = DefaultTxs
	}
	if o.Senders == 0 {
		o.Senders = DefaultSenders
	}
	if o.BlockTime == 0 {
		o.BlockTime = DefaultBlockTime
	}
	if o.Submit == "" {
		o.Submit = DefaultSubmit
	}
	if o.Submitters == 0 {
		o.Submitters = DefaultMempoolSubmitters
		if o.Submit == SubmitRPC {
			o.Submitters = DefaultRPCSubmitters
		}
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Validators == 0 {
		o.Validators = 1
	}
	switch {
	case o.Validators < 1 || o.Validators > 16:
		return fmt.Errorf("validators %d out of range [1, 16]", o.Validators)
	case o.Validators > 1 && o.Submit != SubmitRPC:
		return fmt.Errorf("submission mode %q with %d validators: only %q reaches validators in other processes", o.Submit, o.Validators, SubmitRPC)
	case (o.Delay > 0 || o.Jitter > 0) && o.Validators < 2:
		return errors.New("a delay needs at least 2 validators")
	case o.Delay < 0 || o.Jitter < 0 || o.Jitter > o.Delay:
		return fmt.Errorf("delay %s, jitter %s: want 0 ≤ jitter ≤ delay", o.Delay, o.Jitter)
	case o.Submit != SubmitRPC && o.Submit != SubmitMempool:
		return fmt.Errorf("submission mode %q: want %q or %q", o.Submit, SubmitRPC, SubmitMempool)
	case o.Txs < 1 || o.Txs > 1_000_000:
		return fmt.Errorf("txs %d out of range [1, 1000000]", o.Txs)
	case o.Senders < 1 || o.Senders > 100_000:
		return fmt.Errorf("senders %d out of range [1, 100000]", o.Senders)
	case o.BlockTime < time.Millisecond || o.BlockTime > 10*time.Second:
		return fmt.Errorf("block time %s out of range [1ms, 10s]", o.BlockTime)
	case o.Submitters < 1 || o.Submitters > 64:
		return fmt.Errorf("submitters %d out of range [1, 64]", o.Submitters)
	}
	return nil
}

// Result is the outcome of a run.
type Result struct {
	Date       time.Time `json:"date"`
	Txs        int       `json:"txs"`
	TxBytes    float64   `json:"tx_bytes_avg"`
	Senders    int       `json:"senders"`
	BlockTime  string    `json:"block_time"`
	Submit     string    `json:"submit"` // "rpc" or "mempool"
	Submitters int       `json:"submitters"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	Ledger     Phase     `json:"ledger"`
	KVStore    Phase     `json:"kvstore"`
	Ratio      float64   `json:"ratio"` // ledger tx/s over kvstore tx/s
	// CPURatio is the kvstore's CPU time per tx over the ledger's, both
	// measured in this run: the figure the target judges. On a machine
	// shared with other work the rates (and Ratio) move with what else
	// runs; the CPU each process spends on a tx moves far less.
	CPURatio    float64       `json:"cpu_ratio"`
	Target      TargetFigures `json:"target"`
	MeetsTarget bool          `json:"meets_target"` // both of the below, with no ledger tx failed
	MeetsTxPerS bool          `json:"meets_tx_per_s"`
	MeetsRatio  bool          `json:"meets_ratio"`
	Dir         string        `json:"dir,omitempty"` // where the homes were kept
	// Network is set for a run on several validator processes; KVStore
	// and Ratio are then empty.
	Network *NetworkResult `json:"network,omitempty"`
}

// Phase is what one app achieved.
type Phase struct {
	App string `json:"app"`
	// TxPerS is Txs over the time from the first submission until the block
	// holding the last tx was committed.
	TxPerS    float64 `json:"tx_per_s"`
	ElapsedMs float64 `json:"elapsed_ms"`
	// Commit latency of a tx: from its submission to the NewBlock event of
	// the block holding it (fired once the block is committed).
	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	// Blocks holding the txs, and the most txs in one of them.
	Blocks      int `json:"blocks"`
	MaxBlockTxs int `json:"max_block_txs"`
	// The app's own time per block with txs, in FinalizeBlock and in Commit.
	FinalizeP50Ms float64 `json:"finalize_p50_ms"`
	FinalizeP99Ms float64 `json:"finalize_p99_ms"`
	CommitP50Ms   float64 `json:"commit_p50_ms"`
	CommitP99Ms   float64 `json:"commit_p99_ms"`
	// The app's mean CheckTx time for new txs, and the rechecks CometBFT
	// ran on txs left in the mempool after each block.
	CheckTxAvgUs float64 `json:"checktx_avg_us"`
	Rechecks     int64   `json:"rechecks"`
	RecheckAvgUs float64 `json:"recheck_avg_us"`
	// CPUCores is the process's CPU time over the phase's elapsed time:
	// near GOMAXPROCS means CPU-bound; well below means waiting (or a
	// machine busy with other work).
	CPUCores float64 `json:"cpu_cores"`
	// CPUPerTxUs is the process's CPU time over the phase, per tx.
	CPUPerTxUs float64 `json:"cpu_per_tx_us"`
	// RPCConns is the number of TCP connections the RPC clients opened:
	// about one per submitter when HTTP keep-alive works (rpc mode only).
	RPCConns int64 `json:"rpc_connections,omitempty"`
	Rejected int   `json:"rejected"` // refused by CheckTx
	Failed   int   `json:"failed"`   // in a block with a non-zero code
	// Lost txs were admitted by CheckTx but never committed (a network
	// run: dropped from the mempools, e.g. behind a failed sequence).
	Lost       int    `json:"lost,omitempty"`
	FirstError string `json:"first_error,omitempty"`
}

// Run runs both phases: the ledger first, then the kvstore.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "gpunet-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		tmp, err := os.MkdirTemp(dir, "bench-")
		if err != nil {
			return nil, err
		}
		dir = tmp
	}
	progress := measure.Progress(o.Progress)

	progress("signing %d transfers from %d senders…", o.Txs, o.Senders)
	w := NewWorkload(o.Senders)
	ledgerTxs := w.Txs(benchChainID, 0, o.Txs)
	kvTxs, err := KVStoreTxs(ledgerTxs)
	if err != nil {
		return nil, err
	}
	var total int
	for _, tx := range ledgerTxs {
		total += len(tx)
	}
	res := &Result{
		Date:       time.Now().UTC().Truncate(time.Second),
		Txs:        o.Txs,
		TxBytes:    float64(total) / float64(o.Txs),
		Senders:    o.Senders,
		BlockTime:  o.BlockTime.String(),
		Submit:     o.Submit,
		Submitters: o.Submitters,
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Target:     Target,
	}
	if o.Dir != "" {
		res.Dir = dir
	}
	// Each submitter owns the senders s with s mod Submitters == g and
	// submits their txs in index order, so sequences arrive in order. The
	// kvstore's txs go through the same partition of indexes.
	lanes := make([][]int, o.Submitters)
	for i := range o.Txs {
		g := w.Sender(i) % o.Submitters
		lanes[g] = append(lanes[g], i)
	}

	g := w.Genesis()
	if o.Validators > 1 {
		if o.Bin == "" {
			if o.Bin, err = os.Executable(); err != nil {
				return nil, err
			}
		}
		progress("gpunet ledger app on %d validator processes, %s ± %s between them", o.Validators, o.Delay, o.Jitter)
		ph, nr, err := runNetwork(ctx, o, dir, g, ledgerTxs, lanes)
		if err != nil {
			return nil, fmt.Errorf("network run: %w", err)
		}
		res.Ledger, res.Network = ph, &nr
		res.MeetsTarget = nr.MeetsTarget
		progress("  %.0f tx/s, commit p50 %.0f ms", ph.TxPerS, ph.LatencyP50Ms)
		return res, nil
	}
	progress("phase 1/2: gpunet ledger app")
	home := filepath.Join(dir, "ledger")
	if err := initHome(home, g, o.BlockTime); err != nil {
		return nil, err
	}
	la, err := abciapp.Open(appDir(home), abciapp.Options{})
	if err != nil {
		return nil, err
	}
	res.Ledger, err = runPhase(ctx, "gpunet-ledger", home, la, la.Close, ledgerTxs, lanes, o, o.CPUProfile)
	if err != nil {
		return nil, fmt.Errorf("ledger phase: %w", err)
	}
	progress("  %.0f tx/s", res.Ledger.TxPerS)
	runtime.GC()

	progress("phase 2/2: cometbft kvstore app")
	home = filepath.Join(dir, "kvstore")
	if err := initHome(home, g, o.BlockTime); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(appDir(home), 0o700); err != nil {
		return nil, err
	}
	ka, err := openKVStore(appDir(home))
	if err != nil {
		return nil, err
	}
	res.KVStore, err = runPhase(ctx, "cometbft-kvstore", home, ka, ka.Close, kvTxs, lanes, o, o.KVStoreCPUProfile)
	if err != nil {
		return nil, fmt.Errorf("kvstore phase: %w", err)
	}
	progress("  %.0f tx/s", res.KVStore.TxPerS)

	if res.KVStore.TxPerS > 0 {
		res.Ratio = res.Ledger.TxPerS / res.KVStore.TxPerS
	}
	if res.Ledger.CPUPerTxUs > 0 {
		res.CPURatio = res.KVStore.CPUPerTxUs / res.Ledger.CPUPerTxUs
	}
	res.MeetsTxPerS = res.Ledger.TxPerS >= Target.TxPerS
	res.MeetsRatio = res.CPURatio >= Target.CPURatio
	res.MeetsTarget = res.MeetsTxPerS && res.MeetsRatio && res.Ledger.Failed == 0 && res.Ledger.Rejected == 0
	return res, nil
}
