package cli

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/bench"
)

func benchCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "bench", Short: "Run benchmarks"}
	c.AddCommand(benchLedgerCmd(e))
	return c
}

func benchLedgerCmd(e *env) *cobra.Command {
	var (
		o          bench.Options
		cpuprofile string
	)
	c := &cobra.Command{
		Use:   "ledger",
		Short: "Measure signed transfers/s through one in-process validator, against CometBFT's kvstore",
		Long: `Measure the ledger's throughput through consensus.

Two phases run one after the other on fresh homes with the same node
configuration: first gpunet's ledger app with --txs pre-signed transfers from
--senders genesis-funded accounts, then CometBFT's kvstore example app
(persistent, on Pebble) with as many txs of exactly the same sizes. Each phase
submits its txs as fast as the node takes them and times from the first
submission until the block holding the last tx is committed. It prints both
rates, their ratio (the figure to compare across runs on a shared machine) and
the commit latency of txs.

--submit picks how txs reach the node:
  rpc      (default) as clients send them: CometBFT's RPC is enabled on a
           loopback port and --submitters goroutines (default 8), each with
           its own CometBFT HTTP client, call broadcast_tx_sync one tx at a
           time. This is the mode the design's throughput anchor assumes.
  mempool  straight into the node's mempool in process (Mempool().CheckTx)
           from --submitters goroutines (default 2): no HTTP, no JSON-RPC;
           it measures the apps and consensus with intake at its cheapest.
Any tx CheckTx refuses counts as a failure of the run.

The homes go to a temporary directory removed afterwards, or, when --home is
given, under HOME/bench-* where they are kept.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Zero would mean "the default" to the library; here it is a
			// mistake.
			if o.Txs < 1 || o.Senders < 1 || o.BlockTime <= 0 || o.Timeout <= 0 {
				return usageError{fmt.Errorf("--txs, --senders, --block-time and --timeout must be positive")}
			}
			// Zero --submitters is the mode's default; below it, a mistake.
			if o.Submitters < 0 {
				return usageError{fmt.Errorf("--submitters must be positive")}
			}
			if err := o.Validate(); err != nil {
				return usageError{err}
			}
			if cmd.Flags().Changed("home") {
				o.Dir = e.home
			}
			if e.output != "json" {
				o.Progress = e.stderr
			}
			if cpuprofile != "" {
				f, err := os.Create(cpuprofile)
				if err != nil {
					return err
				}
				defer f.Close()
				o.CPUProfile = f
			}
			res, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			return e.print(res, func(w io.Writer) { printBench(w, res) })
		},
	}
	f := c.Flags()
	f.IntVar(&o.Txs, "txs", bench.DefaultTxs, "txs per phase")
	f.IntVar(&o.Senders, "senders", bench.DefaultSenders, "genesis-funded accounts signing the transfers, round-robin")
	f.DurationVar(&o.BlockTime, "block-time", bench.DefaultBlockTime, "pause after each block (timeout_commit), the same for both phases")
	f.StringVar(&o.Submit, "submit", bench.DefaultSubmit, "how txs reach the node: rpc (broadcast_tx_sync over loopback HTTP) or mempool (in process)")
	f.IntVar(&o.Submitters, "submitters", 0, fmt.Sprintf("goroutines submitting txs, one tx at a time each (default %d for rpc, %d for mempool)", bench.DefaultRPCSubmitters, bench.DefaultMempoolSubmitters))
	f.DurationVar(&o.Timeout, "timeout", bench.DefaultTimeout, "give up on a phase after this long")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile (pprof) of the ledger phase's measured window to this file")
	return c
}

func printBench(w io.Writer, r *bench.Result) {
	fmt.Fprintf(w, "gpunet bench ledger  %s\n", r.Date.Format(time.RFC3339))
	how := "in process into the node's mempool"
	if r.Submit == bench.SubmitRPC {
		how = "over RPC (broadcast_tx_sync, loopback HTTP)"
	}
	fmt.Fprintf(w, "submission: %s — %s, %d submitters\n", r.Submit, how, r.Submitters)
	fmt.Fprintf(w, "%d txs of %.0f bytes on average, %d senders, block time %s, GOMAXPROCS %d\n\n",
		r.Txs, r.TxBytes, r.Senders, r.BlockTime, r.GOMAXPROCS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "app\ttx/s\telapsed\tblocks\tmax txs/block\tlatency p50\tp99\tfinalize p50\tp99\tcommit p50\tp99\tchecktx avg\trechecks\tcpu\t")
	for _, p := range []bench.Phase{r.Ledger, r.KVStore} {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2fs\t%d\t%d\t%.0fms\t%.0fms\t%.1fms\t%.1fms\t%.1fms\t%.1fms\t%.1fµs\t%d\t%.2f\t\n",
			p.App, p.TxPerS, p.ElapsedMs/1e3, p.Blocks, p.MaxBlockTxs, p.LatencyP50Ms, p.LatencyP99Ms,
			p.FinalizeP50Ms, p.FinalizeP99Ms, p.CommitP50Ms, p.CommitP99Ms, p.CheckTxAvgUs, p.Rechecks, p.CPUCores)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, p := range []bench.Phase{r.Ledger, r.KVStore} {
		if p.Rejected > 0 || p.Failed > 0 {
			fmt.Fprintf(w, "%s: %d txs rejected by CheckTx, %d failed in blocks; first: %s\n", p.App, p.Rejected, p.Failed, p.FirstError)
		}
	}
	if r.Submit == bench.SubmitRPC {
		fmt.Fprintf(w, "RPC connections opened: ledger %d, kvstore %d\n", r.Ledger.RPCConns, r.KVStore.RPCConns)
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintf(w, "ratio ledger/kvstore: %.2f\ntarget (submission %s): ≥ %.0f signed tx/s %s; ratio ≥ %.2f %s\n",
		r.Ratio, r.Submit, r.Target.TxPerS, met(r.MeetsTxPerS), r.Target.Ratio, met(r.MeetsRatio))
	if r.Dir != "" {
		fmt.Fprintf(w, "homes kept in %s\n", r.Dir)
	}
}
