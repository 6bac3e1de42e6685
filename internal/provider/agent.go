// Package provider is the provider agent: it detects and measures the
// machine, registers it on the ledger (updating the registration when
// anything changes), keeps its stake at the target (topping it up after a
// slash: stake.go), answers liveness and hardware challenges (pausing its
// own jobs while it proves on the CPU: proofpause.go), reconnects when its
// node goes away, and marks itself offline when stopped. It runs the jobs
// the ledger assigns to it (jobs.go) and the replicas of services placed
// on it (service.go) in its executors.
package provider

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/clock"
	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
)

// Chain is what the agent needs from a node.
type Chain interface {
	Provider(ctx context.Context, a address.Address) (*apiwire.ProviderBody, error)
	Params(ctx context.Context) (*ledger.Params, error)
	Balance(ctx context.Context, a address.Address) (*apiwire.BalanceBody, error)
	SendMsg(ctx context.Context, key chainclient.Signer, fee uint64, msg ledger.Msg) (*apiwire.TxResult, error)
	SubmitMsg(ctx context.Context, key chainclient.Signer, fee uint64, msg ledger.Msg) (*apiwire.TxResult, error)
	ProviderJobs(ctx context.Context, provider address.Address) (*apiwire.JobList, error)
	PostLog(ctx context.Context, key chainclient.Signer, job, seq uint64, data []byte) error
}

// Options configure an agent.
type Options struct {
	Key   *keys.Key
	Chain Chain
	// Region is where the machine is, e.g. "eu" or "us-east".
	Region string
	// Label is the name the provider shows beside its address
	// (ledger.ProviderInfo.Label); "" for none.
	Label string
	// Prices are asks in usync per unit-hour by hardware class ("cpu" for
	// CPU cores); classes not listed get DefaultGPUPrice / DefaultCPUPrice.
	Prices map[string]uint64
	// Stake is the stake to keep bonded; 0 means the ledger's minimum for
	// this hardware.
	Stake   uint64
	MaxJobs uint64
	// Sandboxes are the executors jobs run in, by name ("wasm", "oci").
	Sandboxes map[string]sandbox.Executor
	// Executors overrides the executors declared (default: the names of
	// Sandboxes).
	Executors []string
	// SandboxNotes are what Sandboxes said about the executors, logged at
	// start and kept in the status.
	SandboxNotes []string
	// Blobs is the blob gateway jobs' data moves through.
	Blobs *blob.Client
	// WorkDir holds running jobs' files.
	WorkDir string
	// NVML overrides the NVML library (tests and devnet simulations).
	NVML nvml.Interface
	// Inventory and Figures, when set, replace detection and the CPU's
	// benchmark (in-process devnet providers on one machine share one
	// measurement).
	Inventory *hwinfo.Inventory
	Figures   *hwinfo.Figures
	// GPUBackends are the GPUs to measure and prove hardware challenges on,
	// matched to the inventory's GPUs by UUID; nil opens this machine's
	// CUDA devices (package gpu). Tests pass emulated ones.
	GPUBackends []gpu.Backend
	BenchBudget time.Duration
	DiskPath    string
	// Poll is how often the agent looks at its record on the chain.
	Poll time.Duration
	// StatusFile is where the agent writes Status for `provider status`.
	StatusFile string
	Logger     *slog.Logger
	// Faults makes the agent misbehave on purpose, for tests and demos of
	// Proof of Sync. Nil (the default) is an honest provider.
	Faults *Faults
	// AllowNetwork declares that oci jobs asking for network access may
	// have it; the oci executor must be made with the same setting.
	AllowNetwork bool
	// AllowFetchNetworks are networks jobs' URL inputs may be fetched
	// from although they are not public (loopback, private, link-local,
	// this host's own addresses: refused by default; datafetch.go).
	AllowFetchNetworks []netip.Prefix
	// Metrics, when set, counts the agent's executor runs, blob traffic
	// and challenges.
	Metrics *Metrics
	// Clock is what the agent's loops wait on (polls, reconnection
	// backoff, log relay flushes) and its status's time; nil is the real
	// clock. Tests advance a fake.
	Clock clock.Clock
	// Relay makes the agent's relay link, through which nodes reach its
	// service replicas' ports with dial (service.go); nil: none, and the
	// replicas are reachable by no one.
	Relay func(dial ReplicaDialer) RelayLink
	// CheckpointGrace is how long a checkpointing job's last checkpoint
	// may take when the agent stops or is asked to stop the job
	// (checkpoint.go); 0 is DefaultCheckpointGrace.
	CheckpointGrace time.Duration
	// TEE, with a Producer, keeps the provider's TEE attestation valid on
	// the chain (attest.go).
	TEE TEEOptions
	// GangHost is the address at which other providers reach this one's
	// UDP directly (its public address; 127.0.0.1 on a devnet whose
	// providers share a machine): a gang member posts GangHost:port as
	// its endpoint. Unset: it posts none, and other members reach it
	// through the relay's gang route (Relay's link, when it has one:
	// gangrelay.go), or, without a relay, only once it has sent to them
	// first.
	GangHost netip.Addr
	// ChainID is the chain the replicas' receipts are signed for
	// (receipts.go); "" reads it from Chain when it tells its status.
	ChainID string
}

// Faults are deliberate misbehaviours (`gpunet provider start
// --fault-*`, `gpunet devnet --faulty N`). Every one is logged as FAULT
// INJECTION when it happens.
type Faults struct {
	// WrongOutputs is the fraction of jobs (0 to 1) on which the agent
	// commits a result other than the one it computed. The choice is a
	// hash of the job id, so it is the same after a restart.
	WrongOutputs float64
	// SkipChallenges ignores hardware challenges.
	SkipChallenges bool
	// FakeChallenges answers hardware challenges at once without
	// computing them: a tree over a product of zeros, opened consistently.
	FakeChallenges bool
	// OverclaimFactor multiplies the measured throughput the agent
	// declares (0 or 1: honest).
	OverclaimFactor float64
	// JobArgs, when set, replaces the arguments a job runs with: how a
	// test gives replicas of a float job the different low bits that
	// different hardware would, or makes one cheat (skip half the work,
	// compute in lower precision). Tests and demos only: `provider start
	// --fault-job-args` sets it.
	JobArgs func(job uint64, args []string) []string
	// HideOutputs (tests only) reports an output blob that no node has,
	// as a replica that withholds its outputs from the judges would.
	HideOutputs bool
	// WrongAnswers is the fraction of chat completions (0 to 1) its
	// service replicas answer wrongly: the text is changed on the way
	// out and the receipt signed for what was sent, as a provider serving
	// another model would (sampled re-execution catches it).
	WrongAnswers float64
	// SilentService keeps reporting its service replicas ready (its own
	// readiness checks pass) but answers nothing that comes through a
	// node: each stream is taken and never answered.
	SilentService bool
	// DieOnStop (tests only) stops the agent as a killed one would be:
	// its service replicas are not given back nor is the provider marked
	// offline, so the ledger learns of their end only from missed
	// heartbeats or validators' reports.
	DieOnStop bool
}

func (f *Faults) hideOutputs() bool { return f != nil && f.HideOutputs }

func (f *Faults) jobArgs(job uint64, args []string) []string {
	if f == nil || f.JobArgs == nil {
		return args
	}
	return f.JobArgs(job, args)
}

// silent reports whether replicas must not answer nodes.
func (f *Faults) silent() bool { return f != nil && f.SilentService }

func (f *Faults) wrongOutput(jobID uint64) bool {
	if f == nil || f.WrongOutputs <= 0 {
		return false
	}
	h := sha256.Sum256(fmt.Appendf(nil, "gpunet/fault/%d", jobID))
	return float64(binary.BigEndian.Uint64(h[:8])>>11)/float64(1<<53) < f.WrongOutputs
}

// AnyClass in Options.Prices prices every class not listed by name.
const AnyClass = "*"

// Default asks, usync per unit-hour.
const (
	DefaultGPUPrice = 1_000_000 // 1 SYNC per GPU-hour
	DefaultCPUPrice = 20_000    // 0.02 SYNC per core-hour
)

// Status is what the agent knows about itself.
type Status struct {
	Name      string            `json:"name"`
	Address   string            `json:"address"`
	Inventory *hwinfo.Inventory `json:"inventory"`
	Figures   *hwinfo.Figures   `json:"measured"`
	// GPUFigures are each GPU's own measurement, by UUID; GPUNotes what
	// the agent found opening and measuring them (or why it could not).
	GPUFigures map[string]hwinfo.Figures `json:"measured_gpus,omitempty"`
	GPUNotes   []string                  `json:"gpu_notes,omitempty"`
	Declared   *ledger.ProviderInfo      `json:"declared,omitempty"`
	Registered bool                      `json:"registered"`
	Online     bool                      `json:"online"`
	Stake      uint64                    `json:"stake"`
	Reputation uint64                    `json:"reputation"`
	Answered   uint64                    `json:"answered"`
	Missed     uint64                    `json:"missed"`
	Earned     uint64                    `json:"earned"`
	Connected  bool                      `json:"connected"`
	LastError  string                    `json:"last_error,omitempty"`
	// Sandboxes are notes on the executors: what the container executor
	// enforces here and its fallbacks, or why it is not offered.
	Sandboxes []string `json:"sandboxes,omitempty"`
	// AttestedUntil is when the TEE attestation the chain last accepted
	// expires (zero: none); AttestError why the last try failed.
	AttestedUntil time.Time `json:"attested_until,omitzero"`
	AttestError   string    `json:"attest_error,omitempty"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Key returns the provider's address as recorded in the status.
func (s Status) Key() address.Address {
	a, _ := address.Parse(s.Address)
	return a
}

// Agent is a running provider agent.
type Agent struct {
	o    Options
	log  *slog.Logger
	mu   sync.Mutex
	st   Status
	info ledger.ProviderInfo

	lastAnswered uint64
	runs         runs
	hw           hwState
	gpus         gpuPool
	gpuDevs      map[string]*gpuDevice // by UUID
	clk          clock.Clock
	// services is the chain's ServiceChain (nil: it runs jobs only).
	services ServiceChain
	ckpts    ckptRegistry // runs that checkpoint (checkpoint.go)
	svcs     services     // service replicas (service.go)
	// pausers are the executors that pause their jobs while the agent
	// proves a challenge on the CPU (proofpause.go).
	pausers []sandbox.Pauser
	stake   stakeKeeper  // stake.go
	rchain  receiptChain // receipts.go
	gangs   gangNets     // gang members' networks, for the relay (gang.go)
}

// New returns an agent; Run starts it.
func New(o Options) *Agent {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll == 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.BenchBudget == 0 {
		o.BenchBudget = 2 * time.Second
	}
	if o.MaxJobs == 0 {
		o.MaxJobs = 4
	}
	// The chain as given runs services if it can, and the executors as
	// given pause if they can; instrument wraps them in ones that only
	// count, which would hide that.
	services, _ := o.Chain.(ServiceChain)
	status, _ := o.Chain.(chainStatuser) // the chain ID receipts are signed for (receipts.go)
	pausers := pausersOf(o.Sandboxes)
	if o.Metrics != nil {
		o.Metrics.instrument(o.Key.Name, &o)
	}
	if o.Blobs != nil && o.Blobs.Signer == nil && o.Blobs.Token == "" {
		// The node's gateway charges the outputs and logs this
		// agent uploads to the provider's account.
		o.Blobs.Signer = o.Key
	}
	a := &Agent{o: o, log: o.Logger.With("provider", o.Key.Name), clk: clock.Or(o.Clock), services: services, pausers: pausers}
	a.rchain.status = status
	a.runs.byID = map[uint64]context.CancelFunc{}
	a.runs.revealing = map[uint64]bool{}
	a.st = Status{Name: o.Key.Name, Address: o.Key.Address.String()}
	return a
}

// Status returns a snapshot of the agent's status.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

func (a *Agent) update(f func(s *Status)) {
	a.mu.Lock()
	f(&a.st)
	a.st.UpdatedAt = a.clk.Now().UTC()
	st := a.st
	a.mu.Unlock()
	if a.o.StatusFile == "" {
		return
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	tmp := a.o.StatusFile + ".tmp"
	if err := os.MkdirAll(filepath.Dir(a.o.StatusFile), 0o700); err == nil {
		if err := os.WriteFile(tmp, b, 0o600); err == nil {
			os.Rename(tmp, a.o.StatusFile)
		}
	}
}

// Run detects, measures and registers the machine, then serves until ctx
// ends, when it marks the provider offline. It returns an error only when
// the machine cannot be described (detection or the benchmark failed);
// node outages are waited out.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.prepare(ctx); err != nil {
		return err
	}
	attestDone := make(chan struct{})
	attestCtx, stopAttest := context.WithCancel(ctx)
	go func() {
		defer close(attestDone)
		a.attestLoop(attestCtx)
	}()
	defer func() {
		stopAttest()
		<-attestDone
		a.hw.cancelInflight()
		a.hw.inflight.Wait() // a proof in flight uses the GPUs
		a.closeGPUs()
	}()
	connected := false
	backoff := a.o.Poll
	for {
		err := a.connect(ctx)
		if err == nil {
			if !connected {
				a.log.Info("provider online", "address", a.o.Key.Address)
			}
			connected, backoff = true, a.o.Poll
			a.update(func(s *Status) { s.Connected, s.LastError = true, "" })
			err = a.serve(ctx)
		}
		if ctx.Err() != nil {
			a.checkpointAll()
			a.stopRuns()
			a.stopServices()
			if a.o.Faults == nil || !a.o.Faults.DieOnStop {
				a.goOffline()
			}
			return nil
		}
		if errors.Is(err, errMarkedOffline) {
			a.log.Warn("the ledger marked this provider offline (missed liveness challenges?); coming back online")
			continue
		}
		if connected {
			a.log.Warn("lost the node; retrying", "err", err)
		} else {
			a.log.Warn("cannot reach the node; retrying", "err", err, "in", backoff)
		}
		connected = false
		a.update(func(s *Status) { s.Connected, s.LastError = false, err.Error() })
		select {
		case <-ctx.Done():
			return nil
		case <-a.clk.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// prepare detects and benchmarks the machine and builds the declaration.
func (a *Agent) prepare(ctx context.Context) error {
	a.sweepWorkDir()
	inv := a.o.Inventory
	if inv == nil {
		var err error
		inv, err = hwinfo.Detect(ctx, hwinfo.Options{NVML: a.o.NVML, DiskPath: a.o.DiskPath})
		if err != nil {
			return fmt.Errorf("detect hardware: %w", err)
		}
	}
	for _, n := range inv.Notes {
		a.log.Info("hardware: " + n)
	}
	if len(inv.GPUs) == 0 {
		a.log.Info("no GPU found: running as a CPU-only provider")
	}
	a.log.Info("detected " + inv.Summary())
	for _, n := range a.o.SandboxNotes {
		a.log.Info("sandbox: " + n)
	}
	a.gpus.init(inv.GPUs)
	fig := a.o.Figures
	if fig == nil {
		f, err := a.cpuBenchmarker().Run(ctx, a.o.BenchBudget)
		if err != nil {
			return fmt.Errorf("benchmark: %w", err)
		}
		fig = &f
	}
	a.log.Info("measured", "device", fig.Device, "int8_tops", fmt.Sprintf("%.3f", fig.Int8TOPS), "mem_bandwidth_gbs", fmt.Sprintf("%.1f", fig.MemBandwidthGBs))
	a.gpuDevs = a.openGPUs(ctx, inv)
	gpuFigs := map[string]hwinfo.Figures{}
	for u, d := range a.gpuDevs {
		gpuFigs[u] = d.fig
	}
	a.info = Declaration(inv, fig, gpuFigs, a.o)
	if err := a.info.Validate(); err != nil {
		return fmt.Errorf("this machine's declaration would be rejected: %w", err)
	}
	info := a.info
	a.update(func(s *Status) {
		s.Inventory, s.Figures, s.GPUFigures, s.Declared, s.Sandboxes = inv, fig, gpuFigs, &info, a.o.SandboxNotes
	})
	return nil
}

// sweepWorkDir removes what a killed agent left in WorkDir: job
// directories (decrypted modules and inputs), judging directories (other
// replicas' decrypted outputs, judge.go) and downloaded blobs. No run is
// in flight at start, and a job still assigned is run again from scratch.
// Pending reveals (WorkDir/reveals, WorkDir/judgments) are kept: they must
// outlive a restart.
func (a *Agent) sweepWorkDir() {
	if a.o.WorkDir == "" {
		return
	}
	var left []string
	for _, pat := range []string{"job-*", "judge-*", "blob-*"} {
		m, _ := filepath.Glob(filepath.Join(a.o.WorkDir, pat))
		left = append(left, m...)
	}
	for _, p := range left {
		if err := os.RemoveAll(p); err != nil {
			a.log.Warn("could not remove what an earlier run left", "path", p, "err", err)
		}
	}
	if len(left) > 0 {
		a.log.Info("removed what an earlier run left in the work directory", "entries", len(left))
	}
}

// Declaration turns what was detected and measured into what the provider
// declares on the ledger: fig is the CPU's measurement, gpuFigs each GPU's
// by UUID (a GPU without one declares no throughput).
func Declaration(inv *hwinfo.Inventory, fig *hwinfo.Figures, gpuFigs map[string]hwinfo.Figures, o Options) ledger.ProviderInfo {
	pi := ledger.ProviderInfo{
		Inventory: ledger.Inventory{
			CPUCores: uint64(inv.CPUCores), CPUModel: truncate(inv.CPUModel), RAM: inv.RAMBytes, Disk: inv.DiskFreeBytes,
			OS: inv.OS, Arch: inv.Arch, Driver: truncate(inv.DriverVersion), CUDA: truncate(inv.CUDAVersion),
		},
		Measured:      ledger.Measured{Int8GOPS: gops(fig.Int8TOPS), BandwidthMBs: uint64(fig.MemBandwidthGBs * 1000), Device: truncate(fig.Device)},
		Region:        o.Region,
		Label:         o.Label,
		Executors:     o.Executors,
		MaxJobs:       o.MaxJobs,
		EncryptionKey: o.Key.Recipient(),
	}
	overclaim := 1.0
	if f := o.Faults; f != nil && f.OverclaimFactor > 1 {
		// Fault injection: claim more than was measured.
		overclaim = f.OverclaimFactor
		pi.Measured.Int8GOPS = gops(fig.Int8TOPS * overclaim)
	}
	pi.Network = o.AllowNetwork
	if len(pi.Executors) == 0 {
		for name := range o.Sandboxes {
			pi.Executors = append(pi.Executors, name)
		}
		slices.Sort(pi.Executors)
	}
	pi.Network = pi.Network && slices.Contains(pi.Executors, "oci")
	// Replicas of a compared wasm job must run one engine (the ledger pins
	// it), so the wasm executor's engine is part of the declaration.
	if ex, ok := o.Sandboxes[ledger.ExecutorWASM]; ok && slices.Contains(pi.Executors, ledger.ExecutorWASM) {
		pi.WasmEngine = sandbox.EngineOf(ex)
	}
	price := func(class string, def uint64) ledger.Amount {
		if p, ok := o.Prices[class]; ok {
			return ledger.Amount(p)
		}
		if p, ok := o.Prices[AnyClass]; ok {
			return ledger.Amount(p)
		}
		return ledger.Amount(def)
	}
	seen := map[string]bool{}
	for _, g := range inv.GPUs {
		spec := ledger.GPUSpec{Class: g.Class, VRAM: g.VRAMBytes, ComputeCap: g.ComputeCapability, UUID: truncate(g.UUID), Serial: truncate(g.Serial)}
		if f, ok := gpuFigs[g.UUID]; ok && g.UUID != "" {
			spec.Int8GOPS = gops(f.Int8TOPS * overclaim)
		}
		pi.Inventory.GPUs = append(pi.Inventory.GPUs, spec)
		if !seen[g.Class] {
			seen[g.Class] = true
			pi.Asks = append(pi.Asks, ledger.Ask{Class: g.Class, PricePerHour: price(g.Class, DefaultGPUPrice)})
		}
	}
	if len(pi.Inventory.GPUs) >= 2 {
		// What links the GPUs (NVML's NVLink peer-to-peer status): a job
		// asking for NVLink is matched on it.
		pi.Inventory.Interconnect = inv.Interconnect
	}
	// Every machine rents out its cores too: a GPU machine takes CPU jobs
	// (the devnet's example job is one) at its "cpu" price. A single price
	// for every class (AnyClass) is a GPU price there, not a core's.
	cpuPrice := price(ledger.CPUClass, DefaultCPUPrice)
	if _, explicit := o.Prices[ledger.CPUClass]; len(inv.GPUs) > 0 && !explicit {
		cpuPrice = ledger.Amount(DefaultCPUPrice)
	}
	pi.Asks = append(pi.Asks, ledger.Ask{Class: ledger.CPUClass, PricePerHour: cpuPrice})
	return pi
}

// gops is a measured rate in the ledger's unit, GOPS. A device that
// measured anything declares at least 1: 0 means "not measured", which the
// ledger never challenges and counts as nothing (a slow CPU on a loaded
// machine measured 0.4 GOPS and declared 0).
func gops(tops float64) uint64 {
	if tops <= 0 {
		return 0
	}
	return max(1, uint64(tops*1000))
}

func truncate(s string) string {
	if len(s) > 128 {
		return s[:128]
	}
	return s
}

// connect brings the registration in line with the machine: register or
// update, come online, top up the stake.
func (a *Agent) connect(ctx context.Context) error {
	addr := a.o.Key.Address
	p, err := a.o.Chain.Provider(ctx, addr)
	switch {
	case chainclient.IsNotFound(err):
		a.log.Info("registering", "region", a.info.Region, "executors", a.info.Executors)
		if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgRegisterProvider{ProviderInfo: a.info}); err != nil {
			return fmt.Errorf("register: %w", err)
		}
	case err != nil:
		return err
	default:
		if !reflect.DeepEqual(normalise(p.Record.ProviderInfo), normalise(a.info)) {
			a.log.Info("updating the registration: the machine or its settings changed")
			if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgUpdateProvider{ProviderInfo: a.info}); err != nil {
				return fmt.Errorf("update registration: %w", err)
			}
		}
		if !p.Record.Online {
			if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgSetProviderStatus{Online: true}); err != nil {
				return fmt.Errorf("come online: %w", err)
			}
		}
	}
	p, err = a.o.Chain.Provider(ctx, addr)
	if err != nil {
		return err
	}
	a.keepStake(ctx, p, a.stakeTarget(p), true) // stake.go
	return a.refresh(ctx)
}

func normalise(pi ledger.ProviderInfo) ledger.ProviderInfo {
	b, _ := json.Marshal(pi)
	var out ledger.ProviderInfo
	json.Unmarshal(b, &out)
	return out
}

// errMarkedOffline is refresh finding the provider offline on the ledger,
// e.g. after missing challenges while its node was unreachable.
var errMarkedOffline = errors.New("the ledger has this provider offline")

// refresh reads the record and answers an open challenge.
func (a *Agent) refresh(ctx context.Context) error {
	p, err := a.o.Chain.Provider(ctx, a.o.Key.Address)
	if err != nil {
		return err
	}
	r := p.Record
	a.update(func(s *Status) {
		s.Registered, s.Online, s.Stake, s.Reputation = true, r.Online, r.Stake, r.Reputation
		s.Answered, s.Missed, s.Earned = r.Answered, r.Missed, r.Earned
	})
	if !r.Online {
		return errMarkedOffline
	}
	if c := r.Challenge; c != nil && c.Height != a.lastAnswered {
		proof := ledger.LivenessProof(c.Seed, a.o.Key.Address)
		if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgLivenessProof{Height: c.Height, Proof: proof}); err != nil {
			var txErr *chainclient.TxError
			switch {
			case errors.Is(err, chainclient.ErrNotInBlockYet):
				// In the mempool; a slow block is not a lost node.
			case !errors.As(err, &txErr) || txErr.Result.Code != ledger.ErrNoChallenge.Code:
				a.o.Metrics.challenge(a.o.Key.Name, "liveness", "error")
				return fmt.Errorf("answer liveness challenge of height %d: %w", c.Height, err)
			}
		} else {
			a.o.Metrics.challenge(a.o.Key.Name, "liveness", "answered")
		}
		a.lastAnswered = c.Height
		a.log.Debug("answered liveness challenge", "height", c.Height)
	}
	a.answerHardwareChallenge(ctx, r)
	// After a slash the stake may be under the minimum: top it up, or say
	// what is missing (stake.go).
	a.keepStake(ctx, p, p.RequiredStake, false)
	if err := a.syncJobs(ctx); err != nil {
		return err
	}
	a.syncServices(ctx)
	return nil
}

// serve polls the chain until an error or ctx ends.
func (a *Agent) serve(ctx context.Context) error {
	t := a.clk.NewTicker(a.o.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			if err := a.refresh(ctx); err != nil {
				return err
			}
		}
	}
}

// goOffline tells the ledger the provider is leaving.
func (a *Agent) goOffline() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgSetProviderStatus{Online: false}); err != nil {
		a.log.Warn("could not mark the provider offline; it will be after missing liveness challenges", "err", err)
		return
	}
	a.update(func(s *Status) { s.Online = false })
	a.log.Info("provider marked offline")
}
