package ledgerbench

import (
	"fmt"
	"io"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// WriteText prints the result as `gpunet bench ledger` does.
func (r *Result) WriteText(w io.Writer) error {
	p := measure.NewReport(w)
	p.Printf("gpunet bench ledger  %s\n", r.Date.Format(time.RFC3339))
	if r.Network != nil {
		return r.writeNetwork(p)
	}
	how := "in process into the node's mempool"
	if r.Submit == SubmitRPC {
		how = "over RPC (broadcast_tx_sync, loopback HTTP)"
	}
	p.Printf("submission: %s — %s, %d submitters\n", r.Submit, how, r.Submitters)
	p.Printf("%d txs of %.0f bytes on average, %d senders, block time %s, GOMAXPROCS %d\n\n",
		r.Txs, r.TxBytes, r.Senders, r.BlockTime, r.GOMAXPROCS)
	tw := p.Table()
	fmt.Fprintln(tw, "app\ttx/s\telapsed\tblocks\tmax txs/block\tlatency p50\tp99\tfinalize p50\tp99\tcommit p50\tp99\tchecktx avg\trechecks\tcpu\t")
	for _, ph := range []Phase{r.Ledger, r.KVStore} {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2fs\t%d\t%d\t%.0fms\t%.0fms\t%.1fms\t%.1fms\t%.1fms\t%.1fms\t%.1fµs\t%d\t%.2f\t\n",
			ph.App, ph.TxPerS, ph.ElapsedMs/1e3, ph.Blocks, ph.MaxBlockTxs, ph.LatencyP50Ms, ph.LatencyP99Ms,
			ph.FinalizeP50Ms, ph.FinalizeP99Ms, ph.CommitP50Ms, ph.CommitP99Ms, ph.CheckTxAvgUs, ph.Rechecks, ph.CPUCores)
	}
	tw.Flush()
	p.Println()
	for _, ph := range []Phase{r.Ledger, r.KVStore} {
		if ph.Rejected > 0 || ph.Failed > 0 {
			p.Printf("%s: %d txs rejected by CheckTx, %d failed in blocks; first: %s\n", ph.App, ph.Rejected, ph.Failed, ph.FirstError)
		}
	}
	if r.Submit == SubmitRPC {
		p.Printf("RPC connections opened: ledger %d, kvstore %d\n", r.Ledger.RPCConns, r.KVStore.RPCConns)
	}
	met := measure.Verdict
	p.Printf("ratio ledger/kvstore: %.2f (tx/s); CPU per tx: ledger %.0f µs, kvstore %.0f µs, CPU ratio %.2f\n",
		r.Ratio, r.Ledger.CPUPerTxUs, r.KVStore.CPUPerTxUs, r.CPURatio)
	p.Printf("target (submission %s): ≥ %.0f signed tx/s %s; CPU ratio ≥ %.2f %s\n",
		r.Submit, r.Target.TxPerS, met(r.MeetsTxPerS), r.Target.CPURatio, met(r.MeetsRatio))
	if r.Dir != "" {
		p.Printf("homes kept in %s\n", r.Dir)
	}
	return p.Err()
}

// writeNetwork prints a run on several validator processes.
func (r *Result) writeNetwork(p *measure.Report) error {
	n := r.Network
	where := "on loopback"
	if n.Delay != "0s" {
		where = fmt.Sprintf("each in its own network namespace, %s ± %s one way between them (userspace netem)", n.Delay, n.Jitter)
	}
	p.Printf("%d validators in separate processes, %s\n", n.Validators, where)
	p.Printf("submission: rpc (broadcast_tx_sync), %d submitters spread over the validators; commits polled on node0 every 5ms\n", r.Submitters)
	p.Printf("%d txs of %.0f bytes on average, %d senders, block time %s\n\n", r.Txs, r.TxBytes, r.Senders, r.BlockTime)
	l := r.Ledger
	tw := p.Table()
	fmt.Fprintln(tw, "tx/s\telapsed\tblocks\tmax txs/block\tlatency p50\tp99\trejected\tfailed\tlost\tdropped packets\t")
	fmt.Fprintf(tw, "%.0f\t%.2fs\t%d\t%d\t%.0fms\t%.0fms\t%d\t%d\t%d\t%d\t\n", l.TxPerS, l.ElapsedMs/1e3, l.Blocks, l.MaxBlockTxs, l.LatencyP50Ms, l.LatencyP99Ms, l.Rejected, l.Failed, l.Lost, n.Dropped)
	tw.Flush()
	if l.FirstError != "" {
		p.Printf("first error: %s\n", l.FirstError)
	}
	p.Printf("\ntarget (no delay): ≥ %.0f tx/s and commit p50 ≤ %.0f ms: %s\n", n.Target.TxPerS, n.Target.LatencyP50Ms, measure.Verdict(n.MeetsTarget))
	if r.Dir != "" {
		p.Printf("homes kept in %s\n", r.Dir)
	}
	return p.Err()
}
