package ledgerbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// phase is one app's measured run: its txs, when each was submitted and
// committed, and what went wrong.
type phase struct {
	txs       [][]byte
	index     map[cmttypes.TxKey]int
	submitted []time.Time
	committed []time.Time
	rejected  atomic.Int64

	errMu    sync.Mutex
	firstErr string
	fatal    error
}

// noteErr keeps the first error message s, and f, if set, as the error the
// run fails with.
func (p *phase) noteErr(s string, f error) {
	p.errMu.Lock()
	if p.firstErr == "" {
		p.firstErr = s
	}
	if f != nil && p.fatal == nil {
		p.fatal = f
	}
	p.errMu.Unlock()
}

// blocks is what the committed blocks held of the phase's txs.
type blocks struct {
	seen, count, maxTxs, failed int
	lost                        int       // admitted, never committed (network runs)
	end                         time.Time // the commit of the last tx
}

// runPhase starts a node on home running app, waits for it to make blocks,
// then pushes txs through lanes of submitters and follows the blocks until
// every accepted tx is committed.
func runPhase(ctx context.Context, name, home string, app abci.Application, closeApp func() error, txs [][]byte, lanes [][]int, o Options, profile io.Writer) (ph Phase, err error) {
	ph.App = name
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	p := &phase{txs: txs, index: make(map[cmttypes.TxKey]int, len(txs)), submitted: make([]time.Time, len(txs)), committed: make([]time.Time, len(txs))}
	for i, tx := range txs {
		p.index[cmttypes.Tx(tx).Key()] = i
	}

	timed := &timedApp{Application: app}
	node, err := startNode(ctx, home, o.Submit == SubmitRPC, o.BlockTime, len(txs), timed)
	if err != nil {
		closeApp()
		return ph, err
	}
	defer func() {
		err = errors.Join(err, node.stop(), closeApp())
	}()
	sub, err := node.EventBus().Subscribe(ctx, "gpunet-bench", cmttypes.EventQueryNewBlock, 4096)
	if err != nil {
		return ph, err
	}
	if err := warmUp(ctx, sub); err != nil {
		return ph, err
	}
	timed.reset()

	// One submit function per lane, made before the clock starts.
	var dials atomic.Int64
	submits := make([]submitFunc, len(lanes))
	for g := range lanes {
		submit, release, err := node.submitter(o.Submit, &dials)
		if err != nil {
			return ph, err
		}
		defer release()
		submits[g] = submit
	}
	stopProfile := func() {}
	if profile != nil {
		if err := pprof.StartCPUProfile(profile); err != nil {
			return ph, err
		}
		var once sync.Once
		stopProfile = func() { once.Do(pprof.StopCPUProfile) }
		defer stopProfile()
	}
	cpu0 := measure.ProcessCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for g, lane := range lanes {
		wg.Go(func() { p.submitLane(ctx, lane, submits[g]) })
	}
	subDone := make(chan struct{})
	go func() { wg.Wait(); close(subDone) }()
	b, err := p.follow(ctx, sub, subDone, start)
	if err != nil {
		return ph, err
	}
	cpu := measure.ProcessCPU() - cpu0
	stopProfile()
	wg.Wait()
	p.errMu.Lock()
	defer p.errMu.Unlock()
	if p.fatal != nil {
		return ph, p.fatal
	}
	elapsed := b.end.Sub(start)
	ph.ElapsedMs = measure.Ms(elapsed)
	ph.TxPerS = float64(b.seen) / elapsed.Seconds()
	ph.CPUCores = cpu.Seconds() / elapsed.Seconds()
	if b.seen > 0 {
		ph.CPUPerTxUs = float64(cpu.Microseconds()) / float64(b.seen)
	}
	ph.Blocks, ph.MaxBlockTxs, ph.Failed = b.count, b.maxTxs, b.failed
	ph.Rejected = int(p.rejected.Load())
	ph.RPCConns = dials.Load()
	ph.FirstError = p.firstErr
	p.latencies(&ph)
	timed.figures(&ph)
	return ph, nil
}

// warmUp waits for the node's first two blocks.
func warmUp(ctx context.Context, sub cmttypes.Subscription) error {
	for h := int64(0); h < 2; {
		select {
		case m := <-sub.Out():
			if ev, ok := m.Data().(cmttypes.EventDataNewBlock); ok {
				h = ev.Block.Height
			}
		case <-sub.Canceled():
			return fmt.Errorf("block subscription cancelled: %w", sub.Err())
		case <-ctx.Done():
			return fmt.Errorf("node made no blocks: %w", ctx.Err())
		}
	}
	return nil
}

// submitLane submits the txs of a lane in order, each once CheckTx
// answered the last; a tx the mempool has no room for is sent again a
// millisecond later.
func (p *phase) submitLane(ctx context.Context, lane []int, submit submitFunc) {
	for _, i := range lane {
		for {
			if ctx.Err() != nil {
				return
			}
			p.submitted[i] = time.Now()
			code, log, err := submit(ctx, p.txs[i])
			if errors.Is(err, errMempoolFull) {
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				p.rejected.Add(1)
				p.noteErr(fmt.Sprintf("tx %d: %v", i, err), nil)
			} else if code != abci.CodeTypeOK {
				p.rejected.Add(1)
				p.noteErr(fmt.Sprintf("tx %d: CheckTx code %d: %s", i, code, log), nil)
			}
			break
		}
	}
}

// follow reads the committed blocks until the submitters are done
// (subDone closed) and every tx they got admitted is committed.
func (p *phase) follow(ctx context.Context, sub cmttypes.Subscription, subDone chan struct{}, start time.Time) (blocks, error) {
	var b blocks
	subsDone := false
	for b.end.IsZero() {
		select {
		case m := <-sub.Out():
			now := time.Now()
			ev, ok := m.Data().(cmttypes.EventDataNewBlock)
			if !ok {
				continue
			}
			p.block(ev, now, &b)
			if subsDone && b.seen >= len(p.txs)-int(p.rejected.Load()) {
				b.end = now
			}
		case <-subDone:
			subsDone, subDone = true, nil
			if b.seen >= len(p.txs)-int(p.rejected.Load()) {
				b.end = time.Now()
			}
		case <-sub.Canceled():
			return b, fmt.Errorf("block subscription cancelled: %w", sub.Err())
		case <-ctx.Done():
			return b, fmt.Errorf("%d of %d txs committed after %s: %w", b.seen, len(p.txs), time.Since(start).Round(time.Millisecond), ctx.Err())
		}
	}
	return b, nil
}

// block records the phase's txs in a block committed at now.
func (p *phase) block(ev cmttypes.EventDataNewBlock, now time.Time, b *blocks) {
	n := 0
	for j, tx := range ev.Block.Txs {
		i, ok := p.index[tx.Key()]
		if !ok {
			continue
		}
		n++
		p.committed[i] = now
		if j < len(ev.ResultFinalizeBlock.TxResults) {
			if r := ev.ResultFinalizeBlock.TxResults[j]; r.Code != abci.CodeTypeOK {
				b.failed++
				p.noteErr(fmt.Sprintf("tx %d at height %d: code %d: %s", i, ev.Block.Height, r.Code, r.Log), nil)
			}
		}
	}
	if n > 0 {
		b.seen += n
		b.count++
		b.maxTxs = max(b.maxTxs, n)
	}
}

// latencies fills the commit latencies of the txs committed.
func (p *phase) latencies(ph *Phase) {
	var lat []time.Duration
	for i := range p.txs {
		if !p.committed[i].IsZero() {
			lat = append(lat, p.committed[i].Sub(p.submitted[i]))
		}
	}
	ph.LatencyP50Ms, ph.LatencyP99Ms = measure.Ms(measure.Percentile(lat, 50)), measure.Ms(measure.Percentile(lat, 99))
}
