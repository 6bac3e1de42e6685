package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/bench/apibench"
	"github.com/gpunet/gpunet/internal/bench/challengebench"
	"github.com/gpunet/gpunet/internal/bench/containerbench"
	"github.com/gpunet/gpunet/internal/bench/gpubench"
	"github.com/gpunet/gpunet/internal/bench/jobbench"
	"github.com/gpunet/gpunet/internal/bench/ledgerbench"
	"github.com/gpunet/gpunet/internal/bench/schedbench"
	"github.com/gpunet/gpunet/internal/bench/syncbench"
	"github.com/gpunet/gpunet/internal/bench/verifybench"
	"github.com/gpunet/gpunet/internal/bench/wasmbench"
)

// A benchmark is one `gpunet bench` subcommand. bind registers its flags
// on fresh options and returns the run that uses them.
type benchmark struct {
	name, short, long string
	bind              func(f *pflag.FlagSet) benchRun
}

// A benchRun checks the flags, runs the benchmark and returns its result;
// progress is where the benchmark reports as it goes (nil with --output
// json). A flag in error is a usageError.
type benchRun func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error)

// benchResult is every benchmark's result: it prints itself as text, and
// --output json prints it as JSON.
type benchResult interface{ WriteText(io.Writer) error }

// benchmarks are the subcommands of `gpunet bench`, in the order help
// lists them.
var benchmarks = []benchmark{
	{
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
	},
	{
		name:  "scheduler",
		short: "Measure the ledger's job placements/s and per-placement latency at 1k, 10k and 100k providers",
		long: `Measure the scheduler that places jobs at the end of every block.

For each --providers count, a state is built through the ledger itself
(genesis, then blocks of MsgRegisterProvider and MsgStake txs; not timed)
with a mixed market: CPU-only machines and eight GPU classes, 1 to 8 GPUs,
varied asks, regions, executors and job slots, 3% under-staked. Then:

  throughput  --jobs MsgSubmitJob txs of mixed requirements in blocks of
              --block-jobs. Each block's End(), which runs the scheduler and
              reserves the chosen providers, is timed; placements/s is the
              jobs placed over the time in End(). An untimed block after each
              cancels its jobs, so every timed block starts from idle
              providers.
  latency     --latency-jobs blocks holding one MsgSubmitJob each; each
              End() is one sample of the time to place one job (p50/p99).

End() also folds the block's changes into the state's lattice hash; that
share is re-measured and the rate without it printed too. The store is
Pebble in memory (--store pebble, what nodes run on) or a B-tree
(--store btree). The target is checked at 100,000 providers: >= 20,000
placements/s, p99 <= 250 µs, and >= 0.5 × the rate at the smallest count.`,
		bind: bindSchedulerBench,
	},
	{
		name:  "job",
		short: "Measure submit → verified result for no-op WASI jobs on an in-process devnet, and jobs/s sustained",
		long: `Measure no-op WASI jobs end to end on a devnet run in this process.

A devnet home (devnet.Setup: one validator, --block-time) gets its node and
API (daemon.Start), --providers provider agents (devnet.RunProviders, the real
wasm executor, polling every --poll) and consumer keys funded by alice. Each
job is a 127-byte WASI module that creates /out, submitted with jobclient as
` + "`gpunet job run`" + ` does (sealed, uploaded, submitted; key granted when
assigned; followed every --poll until it ends).

A job's time runs from the start of the submission to the commit of the
block holding its result; its blocks are that height minus the submission's.

  warm-up    --warmup-jobs jobs from every consumer at once, so that the
             providers have a verification record as on a live network
             (default 12 per provider for spot: a provider's first results
             in a class are all audited; 0 for none and full).
  latency    --latency-jobs jobs, one at a time.
  sustained  --sustained-jobs jobs from --concurrency consumers, each sending
             its next job when its last one ended: jobs/s is the jobs that
             succeeded over the phase's time (until the last job ended or
             was given up on after --job-timeout, then cancelled).
             --serial-submit makes the consumers take turns at submitting.

The target, at 200 ms blocks: <= 4 blocks and p50 <= 1 s (latency phase).`,
		bind: bindJobBench,
	},
	{
		name:  "wasm",
		short: "Compare compute kernels run natively and as WebAssembly, in the same run",
		long: `Run compute kernels natively and as WebAssembly, with the same arguments,
--reps times each, interleaved, and print the medians and their ratios to
native.

First the mandelbrot example's Go kernel and its committed WASI module
(built by Go's compiler):

  native        kernel.Render (+ PGM encoding and checksum) in this process
  executor      gpunet's wasm executor on its default engine, wasmtime, as
                providers run jobs (a child process per job, its compile
                cache warm; Result.Metered is timed: instantiation and run)
  executor-wazero
                the same executor on its wazero engine
  wazero        a bare wazero runtime, same compiler, without
                WithCloseOnContextDone, as the executor's child runs it
  wazero+close  the same runtime with WithCloseOnContextDone: the cost of
                in-guest cancellation checks, which the executor avoids by
                killing its child instead

Then the LLVM-compiled guests the target is stated for: the C kernels under
examples/ (mandelbrot, SHA-256, float32 matmul), each built natively by
clang and timed as a process against its committed wasm32-wasi module in the
executor on each engine (the table shows wasmtime; --output json has each)
and on bare wazero.

Compilation happens once per runtime before the timed runs and is printed
apart. Every variant's output is checked against the native one. The target:
the geometric mean over the C kernels in the executor on wasmtime <= 1.2×
native.`,
		bind: bindWasmBench,
	},
	{
		name:  "container",
		short: "Measure container start to first instruction (cached rootfs) and image pull+unpack throughput",
		long: `Measure the oci executor as a provider runs it (needs runc), against a
registry served in this process on 127.0.0.1:

  start  --reps runs of a job whose image is the probe program (a static
         executable of a few hundred bytes that writes one line), its rootfs
         cached: from Executor.Run to the program's first output (runtime
         spec, overlay, runc's namespaces, cgroups and seccomp, exec). The
         whole Run (teardown, output collection) is printed too.
  pull   --pull-reps pulls of an image of --pull-layers layers holding
         --pull-mib MiB of files (gzip about halves them) into an empty
         cache: download, digest checks, gunzip, untar. Throughput is per
         second of the whole pull, of the bytes downloaded and unpacked.

The target: start to first instruction <= 300 ms (median). State and caches
go to a temporary directory, or under --home when given.`,
		bind: bindContainerBench,
	},
	{
		name:  "challenge",
		short: "Hardware challenges under load: honest providers on busy machines are never slashed, overclaimers are caught",
		long: `Measure how hardware challenges (docs/challenge.md) treat honest providers
on busy machines and providers that claim more than they have.

Load: the CPU prover, with the agent's workers (every core but one),
proves a challenge sized for this machine's own measured figure
(--target-ms of compute at that claim), --reps times idle and beside a
background load of L busy processes per core for each L of --loads. Each
proof's time over the plan's compute time is that load's slowdown.

Rulings: --hours simulated hours through the real ledger with the default
parameters, time scaled down a thousandfold, real proofs and openings.
--per-group honest providers per load each prove as slowly as a slowdown
measured at their load; as many overclaimers per factor of --overclaims do
1/k of their claim on an idle machine. Prints each group's rulings, honest
slashes (target 0), how many overclaimers count at no more than their real
rate after their first ruling (target >= 99%), and the proving time an
hour at the real scale (target <= 60 s for an idle honest provider).`,
		bind: bindChallengeBench,
	},
	{
		name:  "verify",
		short: "Simulate Proof of Sync over many jobs through the real ledger: verification overhead, how fast cheaters are caught",
		long: `Run a chain of --providers CPU providers through the real ledger code and
submit --jobs deterministic spot jobs, --block-jobs a block. Scripted parties
do what agents do: owners grant keys, providers start, commit and reveal.
--cheaters providers falsify a --cheat-rate share of their results, undercut
honest prices and run more jobs at once.

Reported: extra compute spent on verification (audit and escalation
replicas over the replicas owners asked for; target <= 10%), how soon each
cheater is first outvoted and slashed (target: caught within 1,313 of its
jobs with probability >= 99%, next to the analytic bound), wrong results
delivered, honest providers slashed (must be 0), and one hardware challenge
proved on this CPU and verified as a validator does (target: verification
<= 1/1000 of the proof).`,
		bind: bindVerifyBench,
	},
	{
		name:  "api",
		short: "Measure the node's API reads with 100k providers and 1M jobs in state while its validator produces blocks",
		long: `Measure the HTTP API of a real node on a large state.

A state of --providers providers (a mixed market, registered and staked) and
--jobs jobs is built through the ledger into a fresh validator home (not
timed; signatures not verified while building): a fifth of the jobs run
their whole life in txs (a tenth of those fail), a twentieth stay running,
a twentieth stay queued, the rest are cancelled while queued. The node
(CometBFT, the API, its stats and dashboard) then starts on that state at
the next height and produces a block every --block-time, with --tx-rate
signed transfers a second sent to it.

An open-loop load sends --rate single-object reads a second (a job, a
provider, an account, a balance, a job's timeline) and --list-rate
paginated list reads a second (jobs: newest, by owner, by state; providers
by address; offers queries; blocks; txs; events) for --duration. A
request's latency runs from when it was due. Targets (at 100,000 providers,
1,000,000 jobs, 1,000 req/s): single reads p99 <= 20 ms, lists p99 <= 50 ms.`,
		bind: bindAPIBench,
	},
	{
		name:  "statesync",
		short: "Measure a node joining by state sync on the 100k-provider, 1M-job state, against replaying the chain",
		long: `Measure state sync against replay on a large state.

Replay (the baseline, in the same run): the API benchmark's state
(--providers providers, --jobs jobs through their lives) is built block by
block through the ledger into a fresh app's store; that time, plus one
timed ed25519 verification times the chain's txs (the builder does not
verify signatures), is the replay estimate, a lower bound (CometBFT's block
store and fetching blocks from peers are not counted).

State sync: the app on that state commits one more block with a snapshot
interval that falls on it, so the node's own code writes the snapshot in
the background; a fresh app is offered it with the source's app hash as the
trusted one and restores it chunk by chunk through the ABCI calls CometBFT
makes (the last chunk checks the app hash and the ledger's invariants). It
prints each phase's time, the snapshot's size and the ratio of replay to
restore.`,
		bind: bindStateSyncBench,
	},
	{
		name:  "gpu",
		short: "Measure each NVIDIA GPU's int8 kernels and prove a hardware challenge on it",
		long: `Measure every NVIDIA GPU of this machine as a provider's agent does, then
prove hardware challenges on it.

For each GPU: each int8 GEMM kernel it runs (dp4a; mma.sync tensor-core
kernels from compute capability 8.0) is checked against the CPU on a small
product, then timed; the table shows TOPS against the datasheet's dense int8
peak. Then a challenge sized for the fastest kernel's figure is proved on
the GPU as the agent would (AES expansion, GEMM and Merkle hashing on the
device), opened and verified as validators do, with its time, the deadline,
and the device time challenges take an hour at the ledger's maximum rate.
With --overclaim F, a challenge sized for F times the figure shows that an
overclaiming GPU misses its deadline.

Needs the NVIDIA driver (libcuda.so.1), no CUDA toolkit.`,
		bind: bindGPUBench,
	},
}

func benchCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "bench", Short: "Run benchmarks"}
	for _, b := range benchmarks {
		c.AddCommand(b.command(e))
	}
	return c
}

// command makes b's subcommand: flags bound, run, result printed.
func (b benchmark) command(e *env) *cobra.Command {
	c := &cobra.Command{Use: b.name, Short: b.short, Long: b.long, Args: exactArgs()}
	run := b.bind(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		var progress io.Writer
		if e.output != "json" {
			progress = e.stderr
		}
		res, err := run(cmd, e, progress)
		if err != nil {
			return err
		}
		return e.print(res, func(w io.Writer) { res.WriteText(w) })
	}
	return c
}

// An output is a file a flag names (none if empty) and the writer of the
// options it goes to.
type output struct {
	path string
	w    *io.Writer
}

// createOutputs creates the outputs' files and sets their writers; close
// closes them all. On error none stays open.
func createOutputs(outs ...output) (close func(), err error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, o := range outs {
		if o.path == "" {
			continue
		}
		f, err := os.Create(o.path)
		if err != nil {
			closeAll()
			return nil, err
		}
		files = append(files, f)
		*o.w = f
	}
	return closeAll, nil
}

func bindLedgerBench(f *pflag.FlagSet) benchRun {
	var (
		o          ledgerbench.Options
		cpuprofile string
	)
	f.IntVar(&o.Txs, "txs", ledgerbench.DefaultTxs, "txs per phase")
	f.IntVar(&o.Senders, "senders", ledgerbench.DefaultSenders, "genesis-funded accounts signing the transfers, round-robin")
	f.DurationVar(&o.BlockTime, "block-time", ledgerbench.DefaultBlockTime, "pause after each block (timeout_commit), the same for both phases")
	f.StringVar(&o.Submit, "submit", ledgerbench.DefaultSubmit, "how txs reach the node: rpc (broadcast_tx_sync over loopback HTTP) or mempool (in process)")
	f.IntVar(&o.Submitters, "submitters", 0, fmt.Sprintf("goroutines submitting txs, one tx at a time each (default %d for rpc, %d for mempool)", ledgerbench.DefaultRPCSubmitters, ledgerbench.DefaultMempoolSubmitters))
	f.DurationVar(&o.Timeout, "timeout", ledgerbench.DefaultTimeout, "give up on a phase after this long")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile (pprof) of the ledger phase's measured window to this file")
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
		closeOut, err := createOutputs(output{cpuprofile, &o.CPUProfile})
		if err != nil {
			return nil, err
		}
		defer closeOut()
		return ledgerbench.Run(cmd.Context(), o)
	}
}

func bindSchedulerBench(f *pflag.FlagSet) benchRun {
	var (
		o          schedbench.Options
		cpuprofile string
	)
	f.IntSliceVar(&o.Providers, "providers", schedbench.DefaultProviders, "provider counts to measure")
	f.IntVar(&o.Jobs, "jobs", schedbench.DefaultJobs, "jobs submitted in the throughput phase, per provider count")
	f.IntVar(&o.BlockJobs, "block-jobs", schedbench.DefaultBlockJobs, "submissions per block in the throughput phase (also the chain's max_placements_per_block)")
	f.IntVar(&o.LatencyJobs, "latency-jobs", schedbench.DefaultLatencyJobs, "one-job blocks in the latency phase")
	f.IntVar(&o.Consumers, "consumers", schedbench.DefaultConsumers, "accounts submitting the jobs")
	f.StringVar(&o.Store, "store", schedbench.DefaultStore, "the state's store: pebble (in memory) or btree")
	f.Uint64Var(&o.Seed, "seed", schedbench.DefaultSeed, "seed of the market (providers and jobs)")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile (pprof) of the largest count's measured phases to this file")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		closeOut, err := createOutputs(output{cpuprofile, &o.CPUProfile})
		if err != nil {
			return nil, err
		}
		defer closeOut()
		return schedbench.Run(cmd.Context(), o)
	}
}

func bindJobBench(f *pflag.FlagSet) benchRun {
	var o jobbench.Options
	f.DurationVar(&o.BlockTime, "block-time", jobbench.DefaultBlockTime, "the devnet's block time (timeout_commit)")
	f.DurationVar(&o.Poll, "poll", jobbench.DefaultPoll, "how often provider agents and consumers look at the chain")
	f.IntVar(&o.Providers, "providers", jobbench.DefaultProviders, "provider agents")
	f.IntVar(&o.LatencyJobs, "latency-jobs", jobbench.DefaultLatency, "jobs run one at a time")
	f.IntVar(&o.WarmupJobs, "warmup-jobs", 0, "jobs run before the latency phase from every consumer at once (0 skips it; default 12 per provider for spot)")
	f.IntVar(&o.SustainedJobs, "sustained-jobs", jobbench.DefaultSustained, "jobs run in the sustained phase (0 skips it)")
	f.IntVar(&o.Concurrency, "concurrency", jobbench.DefaultConcurrency, "consumers submitting at once in the sustained phase")
	f.StringVar(&o.Verification, "verification", "spot", "the jobs' verification: none, spot or full")
	f.DurationVar(&o.JobTimeout, "job-timeout", jobbench.DefaultTimeout, "give up on (and cancel) a job after this long")
	f.BoolVar(&o.SerialSubmit, "serial-submit", false, "sustained phase: consumers take turns submitting, one submission per block (avoids the ledger placing twice jobs submitted in the same block)")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if o.SustainedJobs == 0 {
			o.SustainedJobs = -1 // skip the phase
		}
		if cmd.Flags().Changed("warmup-jobs") && o.WarmupJobs == 0 {
			o.WarmupJobs = -1
		}
		if o.SustainedJobs < -1 || o.LatencyJobs < 1 || o.Concurrency < 1 || o.Providers < 1 || o.BlockTime <= 0 || o.Poll <= 0 || o.JobTimeout <= 0 {
			return nil, usageError{fmt.Errorf("--latency-jobs, --concurrency, --providers, --block-time, --poll and --job-timeout must be positive, --sustained-jobs not negative")}
		}
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		if cmd.Flags().Changed("home") {
			o.Dir = e.home
		}
		o.Progress = progress
		return jobbench.Run(cmd.Context(), o)
	}
}

func bindWasmBench(f *pflag.FlagSet) benchRun {
	var o wasmbench.Options
	f.IntVar(&o.Width, "width", wasmbench.DefaultWidth, "image width")
	f.IntVar(&o.Height, "height", wasmbench.DefaultHeight, "image height")
	f.IntVar(&o.MaxIter, "maxiter", wasmbench.DefaultMaxIter, "iterations per pixel at most")
	f.IntVar(&o.Reps, "reps", wasmbench.DefaultReps, "timed runs of each variant")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		// Zero would mean "the default" to the library; here it is a
		// mistake.
		if o.Width < 1 || o.Height < 1 || o.MaxIter < 1 || o.Reps < 1 {
			return nil, usageError{fmt.Errorf("--width, --height, --maxiter and --reps must be positive")}
		}
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		return wasmbench.Run(cmd.Context(), o)
	}
}

func bindContainerBench(f *pflag.FlagSet) benchRun {
	var o containerbench.Options
	f.IntVar(&o.Reps, "reps", containerbench.DefaultReps, "timed container starts")
	f.IntVar(&o.PullMiB, "pull-mib", containerbench.DefaultPullMiB, "size of the pulled image's files, MiB")
	f.IntVar(&o.PullLayers, "pull-layers", containerbench.DefaultPullLayers, "layers of the pulled image")
	f.IntVar(&o.PullReps, "pull-reps", containerbench.DefaultPullReps, "timed pulls, each into an empty cache")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if o.Reps < 1 || o.PullMiB < 1 || o.PullLayers < 1 || o.PullReps < 1 || o.PullLayers > o.PullMiB {
			return nil, usageError{fmt.Errorf("--reps, --pull-mib, --pull-layers and --pull-reps must be positive, --pull-layers at most --pull-mib")}
		}
		if cmd.Flags().Changed("home") {
			dir, err := os.MkdirTemp(e.home, "bench-container-")
			if err != nil {
				return nil, err
			}
			o.Dir = dir
		}
		o.Progress = progress
		return containerbench.Run(cmd.Context(), o)
	}
}

func bindChallengeBench(f *pflag.FlagSet) benchRun {
	o := challengebench.Options{Loads: challengebench.DefaultLoads, Overclaims: challengebench.DefaultOverclaims}
	f.IntSliceVar(&o.Loads, "loads", o.Loads, "background loads to measure, in busy processes per core")
	f.IntSliceVar(&o.Overclaims, "overclaims", o.Overclaims, "overclaim factors to simulate")
	f.Uint64Var(&o.Target, "target-ms", challengebench.DefaultTargetMillis, "compute time of the measured proofs at this machine's figure")
	f.IntVar(&o.Reps, "reps", challengebench.DefaultReps, "proofs per load")
	f.IntVar(&o.Hours, "hours", challengebench.DefaultHours, "simulated hours")
	f.IntVar(&o.PerGroup, "per-group", challengebench.DefaultPerGroup, "simulated providers per group")
	f.Uint64Var(&o.Seed, "seed", challengebench.DefaultSeed, "seed of the simulation")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		return challengebench.Run(cmd.Context(), o)
	}
}

func bindVerifyBench(f *pflag.FlagSet) benchRun {
	var o verifybench.Options
	f.IntVar(&o.Providers, "providers", verifybench.DefaultProviders, "providers")
	f.IntVar(&o.Jobs, "jobs", verifybench.DefaultJobs, "spot jobs submitted")
	f.IntVar(&o.BlockJobs, "block-jobs", verifybench.DefaultBlockJobs, "jobs submitted per block")
	f.IntVar(&o.Cheaters, "cheaters", verifybench.DefaultCheaters, "cheating providers")
	f.Float64Var(&o.CheatRate, "cheat-rate", verifybench.DefaultCheatRate, "share of its results a cheater falsifies")
	f.Uint64Var(&o.CheaterSlots, "cheater-slots", verifybench.DefaultCheaterSlots, "jobs a cheater runs at once (honest providers: 4)")
	f.Uint64Var(&o.Seed, "seed", verifybench.DefaultSeed, "seed of the market")
	f.Uint64Var(&o.ChallengeGOPS, "challenge-gops", 0, "claim the measured hardware challenge is sized for (default: what this machine measures)")
	f.Uint64Var(&o.ChallengeMillis, "challenge-ms", verifybench.DefaultChallengeMillis, "compute time of that challenge at the claim")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		return verifybench.Run(cmd.Context(), o)
	}
}

func bindAPIBench(f *pflag.FlagSet) benchRun {
	var (
		o                             apibench.Options
		cpuprofile, trace, memprofile string
	)
	f.IntVar(&o.Providers, "providers", apibench.DefaultProviders, "providers in the state")
	f.IntVar(&o.Jobs, "jobs", apibench.DefaultJobs, "jobs in the state")
	f.IntVar(&o.Consumers, "consumers", apibench.DefaultConsumers, "accounts owning the jobs")
	f.IntVar(&o.Rate, "rate", apibench.DefaultRate, "single-object reads per second")
	f.IntVar(&o.ListRate, "list-rate", apibench.DefaultListRate, "paginated list reads per second, at the same time")
	f.DurationVar(&o.Duration, "duration", apibench.DefaultDuration, "how long the load runs")
	f.DurationVar(&o.BlockTime, "block-time", apibench.DefaultBlockTime, "the validator's pause after each block")
	f.IntVar(&o.TxRate, "tx-rate", apibench.DefaultTxRate, "signed transfers per second sent to the node during the load")
	f.Uint64Var(&o.Seed, "seed", apibench.DefaultSeed, "seed of the market and the load")
	f.StringVar(&o.Home, "home", "", "keep the node's home under this directory (default: a temp dir, removed)")
	f.StringVar(&o.StateDir, "state-dir", "", "keep each built state in this directory and start later runs of the same size from a copy")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile (pprof) of the process during the load to this file")
	f.StringVar(&trace, "trace", "", "write an execution trace (go tool trace) of the process during the load to this file")
	f.StringVar(&memprofile, "memprofile", "", "write the allocations (pprof) at the load's end to this file and at its start to FILE.base: go tool pprof -diff_base FILE.base FILE")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		outs := []output{{cpuprofile, &o.CPUProfile}, {trace, &o.Trace}}
		if memprofile != "" {
			outs = append(outs, output{memprofile + ".base", &o.AllocsBase}, output{memprofile, &o.Allocs})
		}
		closeOut, err := createOutputs(outs...)
		if err != nil {
			return nil, err
		}
		defer closeOut()
		return apibench.Run(cmd.Context(), o)
	}
}

func bindStateSyncBench(f *pflag.FlagSet) benchRun {
	var o syncbench.Options
	f.IntVar(&o.Providers, "providers", syncbench.DefaultProviders, "providers in the state")
	f.IntVar(&o.Jobs, "jobs", syncbench.DefaultJobs, "jobs in the state")
	f.IntVar(&o.Consumers, "consumers", syncbench.DefaultConsumers, "accounts owning the jobs")
	f.Uint64Var(&o.Seed, "seed", syncbench.DefaultSeed, "seed of the market")
	f.IntVar(&o.ChunkBytes, "chunk-bytes", 0, "snapshot chunk size in bytes (default: the node's, 8 MiB)")
	f.StringVar(&o.Home, "home", "", "keep the stores under this directory (default: a temp dir, removed)")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if err := o.Validate(); err != nil {
			return nil, usageError{err}
		}
		o.Progress = progress
		return syncbench.Run(cmd.Context(), o)
	}
}

func bindGPUBench(f *pflag.FlagSet) benchRun {
	var o gpubench.Options
	f.DurationVar(&o.Budget, "budget", gpubench.DefaultBudget, "benchmark time per GPU")
	f.Float64Var(&o.Overclaim, "overclaim", gpubench.DefaultOverclaim, "also prove a challenge sized for this many times the measured figure (0: skip)")
	return func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error) {
		if o.Budget <= 0 {
			return nil, usageError{fmt.Errorf("--budget %v: must be positive", o.Budget)}
		}
		o.Progress = progress
		return gpubench.Run(cmd.Context(), o)
	}
}
