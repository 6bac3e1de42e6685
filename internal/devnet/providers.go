package devnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
)

// ProviderKey is the keyring name of the devnet's i-th provider (from 1).
func ProviderKey(i int) string { return fmt.Sprintf("provider-%d", i) }

// ProviderFunding is what the devnet gives a provider key that has less:
// enough to stake for a machine with 8 GPUs at the default minimum.
const ProviderFunding = 10_000 * 1_000_000

// devnet providers are spread over regions and priced apart so that
// searching and sorting offers shows something.
var providerRegions = []string{"eu", "us-east", "ap-south"}

// providerAsk is the ask of the devnet's provider i (from 1) of n, of
// which the last faulty are faulty, for a class whose default ask is def.
// Honest providers ask 1, 1.25, 1.5, … times def. The first faulty one
// undercuts them all, asking a tenth of def, so that the scheduler places
// jobs on it first and Proof of Sync catches it where a user looks
// (README: `devnet --providers 4 --faulty 1`; priced as the others, it was
// the dearest and never picked). The margin is wide on purpose: the
// scheduler's score weighs reputation too, which liveness answers move a
// little apart between new providers, and three quarters of def was not
// always enough. Further faulty ones keep their places: two cheap ones would be
// each other's auditors, and faulty replicas commit the same wrong result.
func providerAsk(def uint64, i, n, faulty int) uint64 {
	if faulty > 0 && i == n-faulty+1 {
		return def / 10
	}
	return def * uint64(3+i) / 4
}

// ProviderOptions tune RunProviders.
type ProviderOptions struct {
	N      int
	Logger *slog.Logger
	// NVML, if set, gives provider i (from 1) a simulated GPU inventory;
	// nil entries and missing ones detect the real machine.
	NVML func(i int) nvml.Interface
	// Poll is how often agents look at the chain.
	Poll time.Duration
	// Faulty makes the last Faulty providers commit wrong results on every
	// job and answer FaultyWrongAnswers of their service replicas' chat
	// completions wrongly (`gpunet devnet --faulty N`), to show Proof of
	// Sync and sampled re-execution at work; the first of them asks less
	// than every honest provider (providerAsk).
	Faulty int
	// Overclaim makes every provider declare this many times what it
	// measured (fault injection: hardware challenges catch it).
	Overclaim float64
	// Metrics, when set, counts the agents' work (the node's registry in
	// a devnet, so its /metrics shows them).
	Metrics *provider.Metrics
	// Progress, when set, is told each step as it begins, for people.
	Progress func(step string)
	// AllowRegistries are registries on this machine (address:port) the
	// providers may pull images from: the devnet's own (--registry).
	// Other addresses not public are refused, as a provider refuses them.
	AllowRegistries []netip.AddrPort
	// AllowFetchNetworks are networks the providers may fetch URL inputs
	// and images from although they are not public (`gpunet devnet
	// --allow-fetch-network`, as `provider start`'s).
	AllowFetchNetworks []netip.Prefix
}

// FaultyWrongAnswers is the share of chat completions a --faulty
// provider's replicas answer wrongly.
const FaultyWrongAnswers = 0.5

// Providers are the devnet's running provider agents.
type Providers struct {
	Agents []*provider.Agent
	wg     sync.WaitGroup
	errs   []error
	mu     sync.Mutex

	// The agents share one set of executors (and the wasm compilation
	// cache).
	sandboxes *provider.SandboxSet
}

// Wait waits for every agent to stop, closes the executors and returns the
// agents' errors.
func (p *Providers) Wait() []error {
	p.wg.Wait()
	p.closeSandboxes()
	return p.errs
}

// RunProviders funds (from alice) and starts n in-process provider agents
// against the API at api. They share one measurement of the machine, which
// they all run on. They stop when ctx ends.
func RunProviders(ctx context.Context, home, api string, o ProviderOptions) (*Providers, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		return nil, err
	}
	cl := chainclient.New(api)
	alice, err := kr.Get(DevKeys[0])
	if err != nil {
		return nil, err
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	ps := &Providers{}
	// The executors open (a trial container takes seconds) while the
	// machine is measured, and the providers are funded in one block.
	opened := make(chan error, 1)
	if o.N > 0 {
		progress("opening the executors (wasm, and containers if runc runs a trial one); detecting and measuring this machine (about a second)")
		go func() {
			var err error
			ps.sandboxes, err = provider.OpenSandboxes(ctx, home, provider.SandboxOptions{
				Logger: o.Logger, AllowFetchNetworks: o.AllowFetchNetworks, AllowRegistries: o.AllowRegistries,
			})
			opened <- err
		}()
	} else {
		opened <- nil
	}
	pkeys := make([]*keys.Key, o.N)
	funded, err := fundProviders(ctx, cl, kr, alice, pkeys)
	if err != nil {
		<-opened
		ps.closeSandboxes()
		return nil, err
	}
	real, err := hwinfo.Detect(ctx, hwinfo.Options{DiskPath: home})
	var fig hwinfo.Figures
	if err == nil {
		fig, err = hwinfo.NewCPUBenchmarker(0).Run(ctx, time.Second)
	}
	if oerr := <-opened; err == nil {
		err = oerr
	}
	if err == nil {
		err = funded(ctx)
	}
	if err != nil {
		ps.closeSandboxes()
		return nil, err
	}
	if o.N > 1 {
		// The agents share the machine, so each claims its share: a claim
		// of the whole would fail its hardware challenges whenever two are
		// challenged at once.
		fig.Int8TOPS /= float64(o.N)
	}
	if o.N > 0 {
		progress("measured %s int8 TOPS on this machine (each of the %d providers claims its share); starting them", strconv.FormatFloat(fig.Int8TOPS*float64(o.N), 'g', 3, 64), o.N)
	}
	for i := 1; i <= o.N; i++ {
		name := ProviderKey(i)
		k := pkeys[i-1]
		inv := real
		if i > 1 && len(real.GPUs) > 0 {
			// One GPU is one provider's (the ledger refuses a GPU
			// registered twice): the first provider rents out this
			// machine's GPUs, the others its cores.
			cpuOnly := *real
			cpuOnly.GPUs = nil
			inv = &cpuOnly
		}
		if o.NVML != nil {
			if lib := o.NVML(i); lib != nil {
				if inv, err = hwinfo.Detect(ctx, hwinfo.Options{NVML: lib, DiskPath: home}); err != nil {
					return nil, err
				}
			}
		}
		var faults *provider.Faults
		if i > o.N-o.Faulty {
			faults = &provider.Faults{WrongOutputs: 1, WrongAnswers: FaultyWrongAnswers}
			if i == o.N-o.Faulty+1 {
				progress("%s commits a wrong result on every job and answers %g of its services' chat completions wrongly (--faulty: fault injection), and undercuts the others, so jobs go to it first; Proof of Sync and sampled re-execution catch it", name, FaultyWrongAnswers)
			} else {
				progress("%s commits a wrong result on every job and answers %g of its services' chat completions wrongly (--faulty: fault injection)", name, FaultyWrongAnswers)
			}
		}
		if o.Overclaim > 1 {
			if faults == nil {
				faults = &provider.Faults{}
			}
			faults.OverclaimFactor = o.Overclaim
			progress("%s declares %g times the throughput it measured (--fault-overclaim: fault injection): hardware challenges catch it", name, o.Overclaim)
		}
		a := provider.NewInHome(home, cl, ps.sandboxes, provider.Options{
			Faults:    faults,
			Key:       k,
			Region:    providerRegions[(i-1)%len(providerRegions)],
			Prices:    map[string]uint64{provider.AnyClass: providerAsk(provider.DefaultGPUPrice, i, o.N, o.Faulty), ledger.CPUClass: providerAsk(provider.DefaultCPUPrice, i, o.N, o.Faulty)},
			Inventory: inv,
			Figures:   &fig,
			Poll:      o.Poll,
			Logger:    o.Logger,
			Metrics:   o.Metrics,
			// The providers share this machine: a gang's members reach
			// each other's UDP on loopback.
			GangHost: netip.MustParseAddr("127.0.0.1"),

			AllowFetchNetworks: o.AllowFetchNetworks,
		})
		ps.Agents = append(ps.Agents, a)
		ps.wg.Add(1)
		go func() {
			defer ps.wg.Done()
			if err := a.Run(ctx); err != nil {
				o.Logger.Error("provider stopped", "provider", name, "err", err)
				ps.mu.Lock()
				ps.errs = append(ps.errs, fmt.Errorf("%s: %w", name, err))
				ps.mu.Unlock()
			}
		}()
	}
	return ps, nil
}

// WaitReady waits until every agent is registered, online and staked.
func (p *Providers) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ready := 0
		var last provider.Status
		for _, a := range p.Agents {
			st := a.Status()
			if st.Registered && st.Online && st.Stake > 0 {
				ready++
			} else {
				last = st
			}
		}
		if ready == len(p.Agents) {
			return nil
		}
		p.mu.Lock()
		stopped := slices.Clone(p.errs)
		p.mu.Unlock()
		if len(stopped) > 0 {
			// An agent that stopped will not become ready.
			return fmt.Errorf("devnet providers: %w", errors.Join(stopped...))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("devnet providers not ready after %s: %s is registered=%v online=%v stake=%d (%s)", timeout, last.Name, last.Registered, last.Online, last.Stake, last.LastError)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// closeSandboxes closes the executors, if they were opened.
func (p *Providers) closeSandboxes() {
	if p.sandboxes != nil {
		p.sandboxes.Close()
		p.sandboxes = nil
	}
}

// fundProviders makes (or loads) the key of each provider into ks and
// submits, from alice, a transfer of ProviderFunding to each that has less
// than half of it, without waiting for their blocks; wait waits until all
// are funded.
func fundProviders(ctx context.Context, cl *chainclient.Client, kr *keys.Keyring, alice *keys.Key, ks []*keys.Key) (wait func(context.Context) error, err error) {
	var pending []*keys.Key
	for i := range ks {
		name := ProviderKey(i + 1)
		k, err := kr.Get(name)
		if err != nil {
			if k, err = kr.AddUnencrypted(name); err != nil { // a test key: see the package doc
				return nil, err
			}
		}
		ks[i] = k
		acct, err := cl.Account(ctx, k.Address)
		if err != nil {
			return nil, err
		}
		if acct.Balance >= ProviderFunding/2 {
			continue
		}
		// Each takes alice's next sequence, so all land in the next block.
		if _, err := cl.SubmitMsg(ctx, alice, 0, &ledger.MsgSend{To: k.Address, Amount: ledger.Amount(ProviderFunding)}); err != nil {
			return nil, fmt.Errorf("fund %s: %w", name, err)
		}
		pending = append(pending, k)
	}
	return func(ctx context.Context) error {
		for _, k := range pending {
			for {
				acct, err := cl.Account(ctx, k.Address)
				if err != nil {
					return err
				}
				if acct.Balance >= ProviderFunding/2 {
					break
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		return nil
	}, nil
}
