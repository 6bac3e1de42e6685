package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The job benchmark (`gpunet bench job`) runs no-op WASI jobs end to end on
// a devnet in this process: a home set up by devnet.Setup (one validator,
// the devnet's parameters and invariant checks), the node and its API
// started by daemon.Start, provider agents started by devnet.RunProviders
// (sharing the real wasm executor), and consumers using jobclient as
// `gpunet job run` does: seal and upload the module, submit, grant the job
// key when assigned, follow until the job ends.
//
// A job's time runs from the start of jobclient.Submit (sealing and
// uploading included) to the moment the node reports committed the block
// holding the job's last result (its NewBlock event); its blocks are that
// block's height minus the submission's. Two phases:
//
//   - latency: LatencyJobs jobs one after the other, on an idle network.
//   - sustained: SustainedJobs jobs from Concurrency consumers, each
//     submitting its next job as soon as its last one ended; jobs/s is the
//     jobs that succeeded over the time from the first submission to the
//     last job's end.

// Defaults of JobsOptions.
const (
	DefaultJobsBlockTime   = 200 * time.Millisecond
	DefaultJobsPoll        = 50 * time.Millisecond
	DefaultJobsProviders   = 4
	DefaultJobsLatency     = 20
	DefaultJobsSustained   = 120
	DefaultJobsConcurrency = 8
	DefaultJobsTimeout     = 15 * time.Second
)

// JobsTarget: submit → verified result within these (DESIGN.md section 9,
// at 200 ms blocks).
var JobsTarget = JobsTargetFigures{Blocks: 4, P50Ms: 1000, BlockTime: "200ms"}

// JobsTargetFigures are the latency phase's targets.
type JobsTargetFigures struct {
	Blocks    int     `json:"blocks"`
	P50Ms     float64 `json:"p50_ms"`
	BlockTime string  `json:"block_time"`
}

// JobsOptions tune a run. Zero fields take the defaults.
type JobsOptions struct {
	BlockTime time.Duration
	// Poll is how often provider agents look at the chain and how often
	// consumers look at their job.
	Poll        time.Duration
	Providers   int
	LatencyJobs int
	// WarmupJobs run from every consumer at once before the latency
	// phase, so that the providers have the verification record a live
	// network's have: under spot verification a provider's first
	// spot_warmup results in a class are all audited. Negative skips the
	// phase; 0 means the default (12 per provider for spot, none else).
	WarmupJobs int
	// SustainedJobs is the sustained phase's job count; negative skips
	// the phase.
	SustainedJobs int
	Concurrency   int
	// Verification is the jobs' level: none, spot (default) or full (two
	// providers each, results compared).
	Verification string
	// JobTimeout is how long a consumer follows a job before it gives up
	// and cancels it.
	JobTimeout time.Duration
	// SerialSubmit makes the sustained phase's consumers take turns at
	// submitting, so that each submission has a block of its own. The
	// ledger places twice a job submitted in the same block as another
	// once its queue cursor has moved (see BENCHMARKS.md); this avoids
	// that, at the price of one submission per block at most.
	SerialSubmit bool
	// Dir receives the devnet home, kept; empty means a temporary one.
	Dir      string
	Progress io.Writer
}

// Validate fills in defaults and checks the rest.
func (o *JobsOptions) Validate() error {
	if o.BlockTime == 0 {
		o.BlockTime = DefaultJobsBlockTime
	}
	if o.Poll == 0 {
		o.Poll = DefaultJobsPoll
	}
	if o.Providers == 0 {
		o.Providers = DefaultJobsProviders
	}
	if o.LatencyJobs == 0 {
		o.LatencyJobs = DefaultJobsLatency
	}
	if o.SustainedJobs == 0 {
		o.SustainedJobs = DefaultJobsSustained
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultJobsConcurrency
	}
	if o.Verification == "" {
		o.Verification = "spot"
	}
	if o.JobTimeout == 0 {
		o.JobTimeout = DefaultJobsTimeout
	}
	if o.WarmupJobs == 0 && o.Verification == "spot" {
		o.WarmupJobs = 12 * o.Providers
	}
	switch {
	case o.BlockTime < 10*time.Millisecond || o.BlockTime > 10*time.Second:
		return fmt.Errorf("block time %s out of range [10ms, 10s]", o.BlockTime)
	case o.Poll < time.Millisecond || o.Poll > 10*time.Second:
		return fmt.Errorf("poll %s out of range [1ms, 10s]", o.Poll)
	case o.Providers < 1 || o.Providers > 64:
		return fmt.Errorf("providers %d out of range [1, 64]", o.Providers)
	case o.LatencyJobs < 1 || o.LatencyJobs > 10_000:
		return fmt.Errorf("latency jobs %d out of range [1, 10000]", o.LatencyJobs)
	case o.WarmupJobs > 10_000:
		return fmt.Errorf("warm-up jobs %d: at most 10000", o.WarmupJobs)
	case o.SustainedJobs > 100_000:
		return fmt.Errorf("sustained jobs %d: at most 100000", o.SustainedJobs)
	case o.Concurrency < 1 || o.Concurrency > 256:
		return fmt.Errorf("concurrency %d out of range [1, 256]", o.Concurrency)
	case o.Verification != "none" && o.Verification != "spot" && o.Verification != "full":
		return fmt.Errorf("verification %q: want none, spot or full", o.Verification)
	case o.Verification == "full" && o.Providers < 2:
		return fmt.Errorf("verification full needs at least 2 providers")
	}
	return nil
}

// JobsResult is the outcome of a run.
type JobsResult struct {
	Date         time.Time         `json:"date"`
	BlockTime    string            `json:"block_time"`
	Poll         string            `json:"poll"`
	Providers    int               `json:"providers"`
	Verification string            `json:"verification"`
	SerialSubmit bool              `json:"serial_submit"`
	ModuleBytes  int               `json:"module_bytes"`
	GOMAXPROCS   int               `json:"gomaxprocs"`
	SetupSeconds float64           `json:"setup_s"`
	Warmup       JobsPhase         `json:"warmup"`
	Latency      JobsPhase         `json:"latency"`
	Sustained    JobsPhase         `json:"sustained"`
	Target       JobsTargetFigures `json:"target"`
	// Verdicts on the latency phase (blocks: its worst job).
	MeetsBlocks bool   `json:"meets_blocks"`
	MeetsP50    bool   `json:"meets_p50"`
	Dir         string `json:"dir,omitempty"`
}

// JobsPhase is what one phase gave.
type JobsPhase struct {
	Concurrency int `json:"concurrency"`
	Jobs        int `json:"jobs"`
	Succeeded   int `json:"succeeded"`
	Failed      int `json:"failed"` // ended in another state, or given up on
	// MultiAssigned counts jobs that got more providers than they wanted
	// (the ledger placing a job twice); audit and escalation replicas are
	// wanted.
	MultiAssigned int    `json:"multi_assigned"`
	FirstError    string `json:"first_error,omitempty"`
	// Submit → commit of the block with the last result, succeeded jobs.
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	// Result height − submission height.
	BlocksP50  int         `json:"blocks_p50"`
	BlocksMax  int         `json:"blocks_max"`
	BlocksHist map[int]int `json:"blocks_histogram"`
	// The Submit call alone (seal, upload, tx committed), p50.
	SubmitP50Ms float64 `json:"submit_p50_ms"`
	// When the consumer saw the job end (its poll), p50.
	ObservedP50Ms float64 `json:"observed_p50_ms"`
	// Sustained phase: succeeded jobs over the phase's time, from the
	// first submission until the last job ended (or was given up on).
	ElapsedS float64 `json:"elapsed_s,omitempty"`
	JobsPerS float64 `json:"jobs_per_s,omitempty"`
	// CPUCores is the process's CPU time over the phase's time.
	CPUCores float64 `json:"cpu_cores"`
}

// noopWASM is a WASI command that creates /out and exits 0: 127 bytes,
// hand-assembled, so that a job's time is the network's and not the
// guest's (a Go-built no-op is over a megabyte to seal, upload, fetch and
// compile).
//
//	(module
//	  (import "wasi_snapshot_preview1" "path_create_directory"
//	    (func $mkdir (param i32 i32 i32) (result i32)))
//	  (memory (export "memory") 1)
//	  (data (i32.const 0) "out")
//	  (func (export "_start")
//	    (drop (call $mkdir (i32.const 3) (i32.const 0) (i32.const 3)))))
func noopWASM() []byte {
	uleb := func(n int) []byte { // lengths here are all < 128
		return []byte{byte(n)}
	}
	section := func(id byte, body ...byte) []byte {
		return append(append([]byte{id}, uleb(len(body))...), body...)
	}
	name := func(s string) []byte { return append(uleb(len(s)), s...) }
	m := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	m = append(m, section(1, 2, 0x60, 3, 0x7f, 0x7f, 0x7f, 1, 0x7f, 0x60, 0, 0)...) // types
	imp := append([]byte{1}, name("wasi_snapshot_preview1")...)
	imp = append(append(imp, name("path_create_directory")...), 0, 0)
	m = append(m, section(2, imp...)...)  // imports: func 0 of type 0
	m = append(m, section(3, 1, 1)...)    // functions: func 1 of type 1
	m = append(m, section(5, 1, 0, 1)...) // memory: 1 page
	exp := append([]byte{2}, name("memory")...)
	exp = append(append(exp, 2, 0), name("_start")...)
	m = append(m, section(7, append(exp, 0, 1)...)...) // exports
	body := []byte{0, 0x41, 3, 0x41, 0, 0x41, 3, 0x10, 0, 0x1a, 0x0b}
	m = append(m, section(10, append([]byte{1, byte(len(body))}, body...)...)...) // code
	m = append(m, section(11, 1, 0, 0x41, 0, 0x0b, 3, 'o', 'u', 't')...)          // data
	return m
}

// noopSpec is the job: the no-op module, one core, a small price ceiling.
func noopSpec(dir, verification string) (*jobspec.Spec, error) {
	if err := os.WriteFile(filepath.Join(dir, "noop.wasm"), noopWASM(), 0o644); err != nil {
		return nil, err
	}
	y := fmt.Sprintf(`name: noop
executor: wasm
module: ./noop.wasm
outputs: [/out]
resources:
  cpu: 1
  memory: 64MiB
  gpu: {count: 0}
max_price: 0.5
timeout: 1m
verification: %s
`, verification)
	return jobspec.Parse([]byte(y), dir)
}

// blockClock records when the node reported each block committed.
type blockClock struct {
	mu     sync.Mutex
	cond   *sync.Cond
	at     map[int64]time.Time
	top    int64
	closed bool
}

func newBlockClock(heights <-chan int64) *blockClock {
	c := &blockClock{at: map[int64]time.Time{}}
	c.cond = sync.NewCond(&c.mu)
	go func() {
		for h := range heights {
			c.mu.Lock()
			c.at[h], c.top = time.Now(), max(c.top, h)
			c.cond.Broadcast()
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.closed = true
		c.cond.Broadcast()
		c.mu.Unlock()
	}()
	return c
}

// when returns when block h was committed, waiting for its event. Should
// its event have been dropped, the next block's time stands in.
func (c *blockClock) when(h int64) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if t, ok := c.at[h]; ok {
			return t, true
		}
		if c.top > h {
			for n := h + 1; n <= c.top; n++ {
				if t, ok := c.at[n]; ok {
					return t, true
				}
			}
		}
		if c.closed {
			return time.Time{}, false
		}
		c.cond.Wait()
	}
}

// jobRecord is one job's measurement.
type jobRecord struct {
	ok            bool
	multiAssigned bool
	err           string
	total         time.Duration // submit start → result block committed
	submit        time.Duration // the Submit call
	observed      time.Duration // submit start → Follow returned
	blocks        int
}

// RunJobs sets up the devnet and runs both phases.
func RunJobs(ctx context.Context, o JobsOptions) (res *JobsResult, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", a...)
		}
	}
	home := o.Dir
	if home == "" {
		tmp, err := os.MkdirTemp("", "gpunet-bench-jobs-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		home = tmp
	} else {
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, err
		}
		if home, err = os.MkdirTemp(home, "bench-jobs-"); err != nil {
			return nil, err
		}
	}
	res = &JobsResult{
		Date: time.Now().UTC().Truncate(time.Second), BlockTime: o.BlockTime.String(), Poll: o.Poll.String(),
		Providers: o.Providers, Verification: o.Verification, SerialSubmit: o.SerialSubmit, ModuleBytes: len(noopWASM()),
		GOMAXPROCS: runtime.GOMAXPROCS(0), Target: JobsTarget,
	}
	if o.Dir != "" {
		res.Dir = home
	}
	setupStart := time.Now()
	progress("setting up a devnet (block time %s) with %d providers…", o.BlockTime, o.Providers)
	if _, err := devnet.Setup(home, devnet.Options{BlockTime: o.BlockTime}); err != nil {
		return nil, err
	}
	d, err := daemon.Start(ctx, home, daemon.Options{APIAddr: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, d.Stop()) }()
	heights, err := d.Node.Subscribe(ctx, "gpunet-bench-jobs")
	if err != nil {
		return nil, err
	}
	clock := newBlockClock(heights)

	pctx, stopProviders := context.WithCancel(ctx)
	ps, err := devnet.RunProviders(pctx, home, d.APIURL, devnet.ProviderOptions{N: o.Providers, Poll: o.Poll})
	if err != nil {
		stopProviders()
		return nil, err
	}
	defer func() {
		stopProviders()
		if errs := ps.Wait(); len(errs) > 0 {
			err = errors.Join(append([]error{err}, errs...)...)
		}
	}()
	if err := ps.WaitReady(ctx, time.Minute); err != nil {
		return nil, err
	}

	cl := chainclient.New(d.APIURL)
	// Each new provider gets a hardware challenge within its first blocks,
	// a GEMM that keeps a core busy for seconds; a provider is challenged
	// again only minutes later. Measure jobs after the first ones are done.
	progress("waiting for the providers' first hardware challenges to end…")
	settle := time.Now().Add(2 * time.Minute)
	for open := true; open && time.Now().Before(settle); {
		open = false
		for _, a := range ps.Agents {
			p, err := cl.Provider(ctx, a.Status().Key())
			if err != nil {
				return nil, err
			}
			open = open || p.Record.HWChallenge != nil || p.Record.Challenges.Passed+p.Record.Challenges.Failed == 0
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		return nil, err
	}
	consumers, err := fundConsumers(ctx, cl, kr, max(o.Concurrency, 1))
	if err != nil {
		return nil, err
	}
	specDir := filepath.Join(home, "bench-job")
	if err := os.MkdirAll(specDir, 0o755); err != nil {
		return nil, err
	}
	spec, err := noopSpec(specDir, o.Verification)
	if err != nil {
		return nil, err
	}
	clients := make([]*jobclient.Client, len(consumers))
	for i, k := range consumers {
		clients[i] = jobclient.New(cl, k, home, devnet.ChainID)
	}
	res.SetupSeconds = time.Since(setupStart).Seconds()
	progress("  ready in %.1fs", res.SetupSeconds)

	// One job to warm up: the executor compiles the module once.
	if r := runOneJob(ctx, clients[0], spec, clock, o, nil); !r.ok {
		return nil, fmt.Errorf("warm-up job: %s", r.err)
	}

	if o.WarmupJobs > 0 {
		progress("warm-up: %d jobs from %d consumers at once (the providers build their verification record)…", o.WarmupJobs, len(clients))
		res.Warmup = runJobsPhase(ctx, clients, o.WarmupJobs, spec, clock, o, o.SerialSubmit)
		progress("  p50 %.0fms, blocks p50 %d max %d, %d of %d succeeded", res.Warmup.P50Ms, res.Warmup.BlocksP50, res.Warmup.BlocksMax, res.Warmup.Succeeded, res.Warmup.Jobs)
	}

	progress("latency: %d jobs, one at a time…", o.LatencyJobs)
	res.Latency = runJobsPhase(ctx, clients[:1], o.LatencyJobs, spec, clock, o, false)
	res.Latency.ElapsedS, res.Latency.JobsPerS = 0, 0
	progress("  p50 %.0fms, blocks p50 %d max %d, %d of %d succeeded", res.Latency.P50Ms, res.Latency.BlocksP50, res.Latency.BlocksMax, res.Latency.Succeeded, res.Latency.Jobs)

	if o.SustainedJobs > 0 {
		progress("sustained: %d jobs from %d consumers at once…", o.SustainedJobs, o.Concurrency)
		res.Sustained = runJobsPhase(ctx, clients, o.SustainedJobs, spec, clock, o, o.SerialSubmit)
		progress("  %.2f jobs/s, p50 %.0fms, %d of %d succeeded", res.Sustained.JobsPerS, res.Sustained.P50Ms, res.Sustained.Succeeded, res.Sustained.Jobs)
	}
	res.MeetsBlocks = res.Latency.Succeeded == res.Latency.Jobs && res.Latency.BlocksMax <= JobsTarget.Blocks
	res.MeetsP50 = res.Latency.Succeeded == res.Latency.Jobs && res.Latency.P50Ms <= JobsTarget.P50Ms
	return res, nil
}

// fundConsumers adds n consumer keys to the keyring and funds them from
// alice in one block.
func fundConsumers(ctx context.Context, cl *chainclient.Client, kr *keys.Keyring, n int) ([]*keys.Key, error) {
	alice, err := kr.Get(devnet.DevKeys[0])
	if err != nil {
		return nil, err
	}
	acct, err := cl.Account(ctx, alice.Address)
	if err != nil {
		return nil, err
	}
	const funding = 1_000 * 1_000_000 // 1,000 SYNC: a no-op job escrows under 0.01
	var out []*keys.Key
	for i := range n {
		name := "bench-consumer-" + strconv.Itoa(i)
		k, err := kr.Get(name)
		if errors.Is(err, keys.ErrNotFound) {
			k, err = kr.Add(name)
		}
		if err != nil {
			return nil, err
		}
		tx := &ledger.Tx{ChainID: devnet.ChainID, Sequence: acct.NextSequence + uint64(i), Msg: &ledger.MsgSend{To: k.Address, Amount: funding}}
		if err := tx.Sign(alice.PrivateKey()); err != nil {
			return nil, err
		}
		raw, err := tx.Encode()
		if err != nil {
			return nil, err
		}
		if _, err := cl.BroadcastTx(ctx, raw, false); err != nil {
			return nil, fmt.Errorf("fund %s: %w", name, err)
		}
		out = append(out, k)
	}
	for _, k := range out {
		for {
			b, err := cl.Balance(ctx, k.Address)
			if err == nil && b.Balance >= funding {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return out, nil
}

// runOneJob submits and follows one job; submitMu, if set, is held while
// submitting.
func runOneJob(ctx context.Context, jc *jobclient.Client, spec *jobspec.Spec, clock *blockClock, o JobsOptions, submitMu *sync.Mutex) jobRecord {
	ctx, cancel := context.WithTimeout(ctx, o.JobTimeout)
	defer cancel()
	t0 := time.Now()
	if submitMu != nil {
		submitMu.Lock()
	}
	id, err := jc.Submit(ctx, spec)
	if submitMu != nil {
		submitMu.Unlock()
	}
	if err != nil {
		return jobRecord{err: "submit: " + err.Error()}
	}
	r := jobRecord{submit: time.Since(t0)}
	j, err := jc.Follow(ctx, id, o.Poll, nil)
	r.observed = time.Since(t0)
	if j != nil && uint64(len(j.Assignments)) > j.Replicas {
		r.multiAssigned = true
	}
	if err != nil {
		r.err = fmt.Sprintf("job %d: %v", id, err)
		if j != nil {
			r.err += fmt.Sprintf(" (state %s: %s; %d assignments)", j.State, j.Reason, len(j.Assignments))
		}
		// Free its providers for the jobs after it.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		jc.Chain.SendMsg(cctx, jc.Key, 0, &ledger.MsgCancelJob{JobID: id})
		ccancel()
		return r
	}
	if j.State != ledger.JobSucceeded {
		r.err = fmt.Sprintf("job %d %s: %s", id, j.State, j.Reason)
		return r
	}
	var last uint64
	for _, a := range j.Assignments {
		if a.Result != nil {
			last = max(last, a.Result.Height)
		}
	}
	at, ok := clock.when(int64(last))
	if !ok {
		r.err = "node stopped"
		return r
	}
	r.ok, r.total, r.blocks = true, at.Sub(t0), int(last-j.Height)
	return r
}

// runJobsPhase runs n jobs from the clients, each client one job at a time.
func runJobsPhase(ctx context.Context, clients []*jobclient.Client, n int, spec *jobspec.Spec, clock *blockClock, o JobsOptions, serial bool) JobsPhase {
	ph := JobsPhase{Concurrency: len(clients), Jobs: n, BlocksHist: map[int]int{}}
	recs := make([]jobRecord, n)
	var submitMu *sync.Mutex
	if serial {
		submitMu = &sync.Mutex{}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := processCPU()
	start := time.Now()
	for _, jc := range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				recs[i] = runOneJob(ctx, jc, spec, clock, o, submitMu)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	ph.CPUCores = (processCPU() - cpu0).Seconds() / elapsed.Seconds()
	var total, submit, observed []time.Duration
	var blocks []int
	for _, r := range recs {
		if r.multiAssigned {
			ph.MultiAssigned++
		}
		if !r.ok {
			ph.Failed++
			if ph.FirstError == "" {
				ph.FirstError = r.err
			}
			continue
		}
		ph.Succeeded++
		total = append(total, r.total)
		submit = append(submit, r.submit)
		observed = append(observed, r.observed)
		blocks = append(blocks, r.blocks)
		ph.BlocksHist[r.blocks]++
	}
	ph.P50Ms, ph.P90Ms = ms64(percentile(total, 50)), ms64(percentile(total, 90))
	ph.P99Ms, ph.MaxMs = ms64(percentile(total, 99)), ms64(percentile(total, 100))
	ph.SubmitP50Ms = ms64(percentile(submit, 50))
	ph.ObservedP50Ms = ms64(percentile(observed, 50))
	if len(blocks) > 0 {
		slices.Sort(blocks)
		ph.BlocksP50 = blocks[(len(blocks)+1)/2-1]
		ph.BlocksMax = blocks[len(blocks)-1]
	}
	ph.ElapsedS = elapsed.Seconds()
	ph.JobsPerS = float64(ph.Succeeded) / ph.ElapsedS
	return ph
}
