package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/ledgerbench"
)

// ledgerBenchmark is `gpunet bench ledger`.
var ledgerBenchmark = benchmark{
	name:  "ledger",
	short: "Measure signed transfers/s through one in-process validator, against CometBFT's kvstore",
	long: `Measure the ledger's throughput through consensus.

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
	bind: bindLedgerBench,
}

func bindLedgerBench(f *pflag.FlagSet) benchRun {
	var (
		o                     ledgerbench.Options
		cpuprofile, kvprofile string
	)
	f.IntVar(&o.Txs, "txs", ledgerbench.DefaultTxs, "txs per phase")
	f.IntVar(&o.Senders, "senders", ledgerbench.DefaultSenders, "genesis-funded accounts signing the transfers, round-robin")
	f.DurationVar(&o.BlockTime, "block-time", ledgerbench.DefaultBlockTime, "pause after each block (timeout_commit), the same for both phases")
	f.StringVar(&o.Submit, "submit", ledgerbench.DefaultSubmit, "how txs reach the node: rpc (broadcast_tx_sync over loopback HTTP) or mempool (in process)")
	f.IntVar(&o.Submitters, "submitters", 0, fmt.Sprintf("goroutines submitting txs, one tx at a time each (default %d for rpc, %d for mempool)", ledgerbench.DefaultRPCSubmitters, ledgerbench.DefaultMempoolSubmitters))
	f.DurationVar(&o.Timeout, "timeout", ledgerbench.DefaultTimeout, "give up on a phase after this long")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile (pprof) of the ledger phase's measured window to this file")
	f.StringVar(&kvprofile, "kvstore-cpuprofile", "", "write a CPU profile (pprof) of the kvstore phase's measured window to this file")
	var processes bool
	f.IntVar(&o.Validators, "validators", 1, "validators; above 1 needs --processes and runs the ledger alone (no kvstore phase)")
	f.BoolVar(&processes, "processes", false, "run each validator as a `gpunet node` process of this binary, txs sent over their RPCs")
	f.DurationVar(&o.Delay, "delay", 0, "with --processes: each validator in its own network namespace with this one-way delay between them (gpunet testnet's userspace netem; root)")
	f.DurationVar(&o.Jitter, "jitter", 0, "with --delay: ± this much on each packet's delay")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		// Zero would mean "the default" to the library; here it is a
		// mistake.
		if o.Txs < 1 || o.Senders < 1 || o.BlockTime <= 0 || o.Timeout <= 0 {
			return nil, usageError{fmt.Errorf("--txs, --senders, --block-time and --timeout must be positive")}
		}
		if (o.Validators > 1) != processes {
			return nil, usageError{fmt.Errorf("--validators above 1 and --processes go together (several validators run as processes)")}
		}
		// Zero --submitters is the mode's default; below it, a mistake.
		if o.Submitters < 0 {
			return nil, usageError{fmt.Errorf("--submitters must be positive")}
		}
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		if cmd.Flags().Changed("home") {
			o.Dir = e.home
		}
		o.Progress = progress
		closeOut, err := createOutputs(output{cpuprofile, &o.CPUProfile}, output{kvprofile, &o.KVStoreCPUProfile})
		if err != nil {
			return nil, err
		}
		defer closeOut()
		return ledgerbench.Run(cmd.Context(), o)
	}
}
