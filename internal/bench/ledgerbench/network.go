package ledgerbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	rpchttp "github.com/cometbft/cometbft/rpc/client/http"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/testnet"
	"github.com/gpunet/gpunet/internal/validator"
)

// NetworkTarget is the acceptance target with several validators in
// separate processes and no delay between them (issue 13).
var NetworkTarget = NetworkTargetFigures{TxPerS: 1500, LatencyP50Ms: 400}

// NetworkTargetFigures are the figures a network run must reach.
type NetworkTargetFigures struct {
	TxPerS       float64 `json:"tx_per_s"`
	LatencyP50Ms float64 `json:"latency_p50_ms"`
}

// NetworkResult describes a run on several validator processes.
type NetworkResult struct {
	Validators int    `json:"validators"`
	Delay      string `json:"delay"`  // one way between validators ("0s": loopback)
	Jitter     string `json:"jitter"` // ± on the delay
	// Dropped packets at the testnet router's full queues (with a delay).
	Dropped     int64                `json:"dropped_packets"`
	Target      NetworkTargetFigures `json:"target"`
	MeetsTarget bool                 `json:"meets_target"`
}

// nodeSet is the validators of a network run: the CometBFT RPC address of
// each (host:port) and how this process reaches them.
type nodeSet struct {
	rpcs  []string
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	stats func() testnet.Stats
	close func()
}

// runNetwork runs the ledger phase on o.Validators `gpunet node`
// processes: on loopback, or with o.Delay each in its own namespace
// (internal/testnet) with that delay between them and the submitting
// client next to every node (no delay to it). Lane g submits to validator
// g mod Validators; commits are read by polling validator 0's RPC every
// 5 ms, so a tx's latency includes up to that much of polling.
func runNetwork(ctx context.Context, o Options, dir string, g ledger.Genesis, txs [][]byte, lanes [][]int) (ph Phase, nr NetworkResult, err error) {
	ph.App = "gpunet-ledger"
	nr = NetworkResult{Validators: o.Validators, Delay: o.Delay.String(), Jitter: o.Jitter.String(), Target: NetworkTarget}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	initHomes := func(d string) ([]string, error) {
		return validator.Init(d, validator.InitOptions{ChainID: benchChainID, Validators: o.Validators, Genesis: g, BlockTime: o.BlockTime})
	}
	var ns *nodeSet
	if o.Delay > 0 {
		ns, err = startTestnet(ctx, o, dir, initHomes)
	} else {
		ns, err = startLoopback(ctx, o, dir, initHomes)
	}
	if err != nil {
		return ph, nr, err
	}
	defer ns.close()

	p := &phase{txs: txs, index: make(map[cmttypes.TxKey]int, len(txs)), submitted: make([]time.Time, len(txs)), committed: make([]time.Time, len(txs))}
	for i, tx := range txs {
		p.index[cmttypes.Tx(tx).Key()] = i
	}
	var dials atomic.Int64
	client := func() *http.Client {
		return &http.Client{Transport: &http.Transport{
			DisableCompression:  true,
			MaxIdleConnsPerHost: 1,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return ns.dial(ctx, network, addr)
			},
		}}
	}
	follower, err := rpchttp.NewWithClient("http://"+ns.rpcs[0], client())
	if err != nil {
		return ph, nr, err
	}
	h0, err := waitBlocks(ctx, follower, 2)
	if err != nil {
		return ph, nr, err
	}
	submits := make([]submitFunc, len(lanes))
	for g := range lanes {
		hc := client()
		defer hc.CloseIdleConnections()
		if submits[g], err = rpcSubmitter("http://"+ns.rpcs[g%len(ns.rpcs)], hc); err != nil {
			return ph, nr, err
		}
	}
	dials.Store(0)

	start := time.Now()
	var wg sync.WaitGroup
	for g, lane := range lanes {
		wg.Go(func() { p.submitLane(ctx, lane, submits[g]) })
	}
	subDone := make(chan struct{})
	go func() { wg.Wait(); close(subDone) }()
	b, err := p.followPolled(ctx, follower, h0, subDone, start, max(5*time.Second, 50*o.BlockTime))
	wg.Wait()
	if err != nil {
		return ph, nr, err
	}
	elapsed := b.end.Sub(start)
	ph.ElapsedMs = measure.Ms(elapsed)
	ph.TxPerS = float64(b.seen) / elapsed.Seconds()
	ph.Blocks, ph.MaxBlockTxs, ph.Failed = b.count, b.maxTxs, b.failed
	ph.Rejected = int(p.rejected.Load())
	ph.Lost = b.lost
	ph.RPCConns = dials.Load()
	ph.FirstError = p.firstErr
	p.latencies(&ph)
	if ns.stats != nil {
		nr.Dropped = ns.stats().Dropped
	}
	nr.MeetsTarget = ph.TxPerS >= NetworkTarget.TxPerS && ph.LatencyP50Ms <= NetworkTarget.LatencyP50Ms && ph.Failed == 0 && ph.Rejected == 0 && ph.Lost == 0
	return ph, nr, nil
}

// startLoopback starts a `gpunet node` process per home, on the loopback
// ports validator.Init chose.
func startLoopback(ctx context.Context, o Options, dir string, initHomes func(string) ([]string, error)) (*nodeSet, error) {
	homes, err := initHomes(filepath.Join(dir, "net"))
	if err != nil {
		return nil, err
	}
	ns := &nodeSet{dial: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	var procs []*exec.Cmd
	ns.close = func() {
		for _, c := range procs {
			c.Process.Signal(syscall.SIGKILL)
			c.Wait()
		}
	}
	for _, home := range homes {
		cfg, err := validator.LoadConfig(home)
		if err != nil {
			ns.close()
			return nil, err
		}
		ns.rpcs = append(ns.rpcs, cfg.RPC)
		log, err := os.Create(filepath.Join(home, "logs", "bench-node.log"))
		if err != nil {
			ns.close()
			return nil, err
		}
		cmd := exec.Command(o.Bin, "node", "--home", home)
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		err = cmd.Start()
		log.Close()
		if err != nil {
			ns.close()
			return nil, fmt.Errorf("start %s node --home %s: %w", o.Bin, home, err)
		}
		procs = append(procs, cmd)
	}
	return ns, nil
}

// startTestnet starts the validators on a testnet with o's delay; the
// benchmark's client is a host of its own with no delay to any node.
func startTestnet(ctx context.Context, o Options, dir string, initHomes func(string) ([]string, error)) (*nodeSet, error) {
	c, err := testnet.Up(ctx, testnet.ClusterOptions{
		Net:        testnet.Options{Delay: o.Delay, Jitter: o.Jitter, Direct: []string{"bench"}},
		Bin:        o.Bin,
		Dir:        dir,
		Validators: o.Validators,
		Hosts:      []string{"bench"},
		ChainID:    benchChainID,
		InitHomes:  initHomes,
	})
	if err != nil {
		return nil, err
	}
	ns := &nodeSet{dial: c.Host("bench").DialContext, stats: c.Stats, close: func() { c.Close() }}
	for _, n := range c.Nodes {
		ns.rpcs = append(ns.rpcs, net.JoinHostPort(n.Host.Addr.String(), testnet.RPCPort))
	}
	return ns, nil
}

// waitBlocks waits until the node is at height h or above and returns its
// height then.
func waitBlocks(ctx context.Context, c *rpchttp.HTTP, h int64) (int64, error) {
	for {
		st, err := c.Status(ctx)
		if err == nil && st.SyncInfo.LatestBlockHeight >= h {
			return st.SyncInfo.LatestBlockHeight, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("validators made no blocks (last: %v): %w", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// followPolled reads the blocks after height from by polling c, until the
// submitters are done (subDone closed) and every tx they got admitted is
// committed, or, once some were, no more came for quiet: admitted txs that never landed
// (dropped from a mempool) are then counted in Lost. A block counts as
// committed when the poll sees it.
func (p *phase) followPolled(ctx context.Context, c *rpchttp.HTTP, from int64, subDone chan struct{}, start time.Time, quiet time.Duration) (blocks, error) {
	var b blocks
	subsDone := false
	last := from
	lastTx := start // when the last of the phase's txs was seen committed
	for b.end.IsZero() {
		select {
		case <-subDone:
			subsDone, subDone = true, nil
		case <-ctx.Done():
			return b, fmt.Errorf("%d of %d txs committed after %s: %w", b.seen, len(p.txs), time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
		st, err := c.Status(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return b, fmt.Errorf("follow blocks: %w", err)
		}
		for h := last + 1; h <= st.SyncInfo.LatestBlockHeight; h++ {
			blk, err := c.Block(ctx, &h)
			if err != nil {
				return b, fmt.Errorf("block %d: %w", h, err)
			}
			ev := cmttypes.EventDataNewBlock{Block: blk.Block}
			// gpunet nodes keep no ABCI results (their own tx index
			// answers for txs): a tx failed in its block is not seen here.
			if res, err := c.BlockResults(ctx, &h); err == nil {
				ev.ResultFinalizeBlock = abci.FinalizeBlockResponse{TxResults: res.TxResults}
			}
			seen := b.seen
			now := time.Now()
			p.block(ev, now, &b)
			if b.seen > seen {
				lastTx = now
			}
			last = h
		}
		switch {
		case subsDone && b.seen >= len(p.txs)-int(p.rejected.Load()):
			b.end = time.Now()
		case subsDone && b.seen > 0 && time.Since(lastTx) > quiet:
			b.end = lastTx
			b.lost = len(p.txs) - int(p.rejected.Load()) - b.seen
		}
	}
	if b.seen == 0 {
		return b, errors.New("no tx was committed")
	}
	return b, nil
}
