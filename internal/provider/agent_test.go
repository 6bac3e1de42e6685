package provider_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/validator"
)

// network is a real single-validator chain in-process with funded keys.
type network struct {
	home, api string
	kr        *keys.Keyring
	d         *daemon.Daemon
	cl        *chainclient.Client
	sb        map[string]sandbox.Executor
	// reg holds the agents' metrics (one provider.Metrics for all, as
	// in a devnet).
	reg     *prometheus.Registry
	metrics *provider.Metrics
}

// sandboxes returns the network's shared real wasm executor.
func (n *network) sandboxes(t *testing.T) map[string]sandbox.Executor {
	t.Helper()
	if n.sb == nil {
		sb, err := provider.OpenSandboxes(t.Context(), filepath.Join(n.home, "sandbox"), provider.SandboxOptions{NoOCI: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sb.Close)
		n.sb = sb.Executors
	}
	return n.sb
}

// startNetwork starts a one-validator chain with the named keys funded and
// hardware challenges off (TestHardwareChallenges turns them on).
func startNetwork(t *testing.T, names ...string) *network {
	t.Helper()
	return startNetworkWith(t, nil, names...)
}

func startNetworkWith(t *testing.T, tune func(*ledger.Params), names ...string) *network {
	t.Helper()
	return startNetworkGenesis(t, func(g *ledger.Genesis) {
		if tune != nil {
			tune(&g.Params)
		}
	}, names...)
}

// startNetworkGenesis is startNetwork with edit applied to the genesis.
func startNetworkGenesis(t *testing.T, edit func(*ledger.Genesis), names ...string) *network {
	t.Helper()
	return startNetworkInit(t, edit, nil, names...)
}

// startNetworkInit is startNetworkGenesis with init applied to the
// network's options (the ledger managing the validator set, say).
func startNetworkInit(t *testing.T, edit func(*ledger.Genesis), init func(*validator.InitOptions), names ...string) *network {
	t.Helper()
	n := &network{home: t.TempDir()}
	var err error
	if n.kr, err = keys.Open(filepath.Join(n.home, "keyring")); err != nil {
		t.Fatal(err)
	}
	g := ledger.Genesis{Params: ledger.DefaultParams()}
	g.Params.LivenessWindow = 10
	g.Params.LivenessMaxMissed = 3
	g.Params.HWRatePPM = 0
	g.Params.MinFee = 0 // the tests check balances to the usync; chainclient's fee floor has its own test
	if edit != nil {
		edit(&g)
	}
	for _, name := range names {
		k, err := n.kr.Add(name)
		if err != nil {
			t.Fatal(err)
		}
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Address, Balance: 10_000_000_000})
	}
	io := validator.InitOptions{ChainID: "provider-test", Validators: 1, Genesis: g, BlockTime: 50 * time.Millisecond}
	if init != nil {
		init(&io)
	}
	if _, err := validator.Init(n.home, io); err != nil {
		t.Fatal(err)
	}
	if n.api, err = validator.FreeAddr(); err != nil {
		t.Fatal(err)
	}
	n.start(t)
	n.cl = chainclient.New(n.api)
	t.Cleanup(func() {
		if n.d != nil {
			n.d.Stop()
		}
	})
	return n
}

func (n *network) start(t *testing.T) {
	t.Helper()
	d, err := daemon.Start(context.Background(), n.home, daemon.Options{APIAddr: n.api, CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	n.d = d
}

func (n *network) stop(t *testing.T) {
	t.Helper()
	if err := n.d.Stop(); err != nil {
		t.Fatal(err)
	}
	n.d = nil
}

var figures = func() *hwinfo.Figures {
	return &hwinfo.Figures{Device: "cpu", Int8TOPS: 0.02, MemBandwidthGBs: 20}
}

// runAgent starts an agent for key name on a simulated NVML library and
// returns a function that stops it and waits for it to finish.
func runAgent(t *testing.T, n *network, name string, lib nvml.Interface, region string, price uint64) (*provider.Agent, func()) {
	t.Helper()
	return runAgentFaulty(t, n, name, lib, region, price, nil)
}

func runAgentFaulty(t *testing.T, n *network, name string, lib nvml.Interface, region string, price uint64, faults *provider.Faults) (*provider.Agent, func()) {
	t.Helper()
	return runAgentWith(t, n, name, lib, region, price, func(o *provider.Options) { o.Faults = faults })
}

// runAgentWith runs an agent whose options edit adjusts.
func runAgentWith(t *testing.T, n *network, name string, lib nvml.Interface, region string, price uint64, edit func(*provider.Options)) (*provider.Agent, func()) {
	t.Helper()
	k, err := n.kr.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := hwinfo.Detect(t.Context(), hwinfo.Options{NVML: lib, DiskPath: n.home})
	if err != nil {
		t.Fatal(err)
	}
	if n.metrics == nil {
		n.reg = prometheus.NewRegistry()
		n.metrics = provider.NewMetrics(n.reg)
	}
	o := provider.Options{
		Metrics: n.metrics,
		Key:     k, Chain: n.cl, Region: region, Prices: map[string]uint64{provider.AnyClass: price},
		Inventory: inv, Figures: figures(), Poll: 25 * time.Millisecond,
		Sandboxes: n.sandboxes(t), Blobs: blob.NewClient(n.cl.Base()), WorkDir: filepath.Join(n.home, "work", name),
	}
	if edit != nil {
		edit(&o)
	}
	a := provider.New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() {
		runErr = a.Run(ctx)
		close(done)
	}()
	stop := func() {
		cancel()
		<-done
		if runErr != nil {
			t.Errorf("agent %s: %v", name, runErr)
		}
	}
	t.Cleanup(stop)
	return a, stop
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	waitForWithin(t, 30*time.Second, what, f)
}

func waitForWithin(t *testing.T, limit time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ready(a *provider.Agent) bool {
	st := a.Status()
	return st.Registered && st.Online && st.Stake > 0
}

func addrs(list []offers.Offer) []string {
	var out []string
	for _, o := range list {
		out = append(out, o.Address)
	}
	return out
}

// TestOffersAcrossInventories runs three agents with different simulated
// hardware (CPU only, one RTX 4090, a DGX A100) against a real chain and
// searches their offers.
func TestOffersAcrossInventories(t *testing.T) {
	n := startNetwork(t, "cpu-box", "gamer", "dgx")
	cpu, stopCPU := runAgent(t, n, "cpu-box", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 20_000)
	gamer, stopGamer := runAgent(t, n, "gamer", nvmlsim.Lib(nvmlsim.RTX4090, 1), "eu", 400_000)
	dgx, stopDGX := runAgent(t, n, "dgx", nvmlsim.DGXA100(), "us-east", 1_200_000)
	for _, a := range []*provider.Agent{cpu, gamer, dgx} {
		waitFor(t, a.Status().Name+" registered and staked", func() bool { return ready(a) })
	}
	ctx := t.Context()
	addr := func(a *provider.Agent) string { return a.Status().Address }

	all, err := n.cl.Offers(ctx, "", "price", false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := addrs(all), []string{addr(cpu), addr(gamer), addr(dgx)}; !slices.Equal(got, want) {
		t.Fatalf("all offers by price: %v, want %v", got, want)
	}
	byAddr := map[string]offers.Offer{}
	for _, o := range all {
		byAddr[o.Address] = o
	}
	if o := byAddr[addr(dgx)]; o.GPU != "A100_40GB" || o.Count != 8 || o.VRAM < 39 || o.Stake != 8*100_000_000 || o.Price != 1.2 {
		t.Errorf("dgx offer: %+v", o)
	}
	if o := byAddr[addr(gamer)]; o.GPU != "RTX_4090" || o.Count != 1 || o.ComputeCap != "8.9" || o.Stake != 100_000_000 {
		t.Errorf("gamer offer: %+v", o)
	}
	if o := byAddr[addr(cpu)]; o.GPU != "cpu" || o.Count != 0 || o.Stake != 10_000_000 || o.TOPS != 0.02 {
		t.Errorf("cpu offer: %+v", o)
	}

	for _, tc := range []struct {
		query, sort string
		want        []*provider.Agent
	}{
		{"gpu=A100_40GB count>=8", "", []*provider.Agent{dgx}},
		{"gpu in [RTX_4090,A100_40GB]", "price-", []*provider.Agent{dgx, gamer}},
		{"count>=1 price<1", "", []*provider.Agent{gamer}},
		{"region=eu", "price-", []*provider.Agent{gamer, cpu}},
		{"vram>=24GiB", "vram-", []*provider.Agent{dgx, gamer}},
		{"gpu=cpu executor=wasm", "", []*provider.Agent{cpu}},
		{"compute_cap>=8.9", "", []*provider.Agent{gamer}},
		{"gpu=H100_80GB", "", nil},
	} {
		got, err := n.cl.Offers(ctx, tc.query, tc.sort, false)
		if err != nil {
			t.Fatalf("%q: %v", tc.query, err)
		}
		var want []string
		for _, a := range tc.want {
			want = append(want, addr(a))
		}
		if !slices.Equal(addrs(got), want) {
			t.Errorf("offers %q -o %q = %v, want %v", tc.query, tc.sort, addrs(got), want)
		}
	}
	if _, err := n.cl.Offers(ctx, "vrm>=24", "", false); err == nil {
		t.Error("a bad query was accepted")
	}

	// A provider that stops marks itself offline: it leaves the offers
	// but stays registered, and the clean exit costs it nothing.
	before, _ := n.cl.Provider(ctx, gamer.Status().Key())
	stopGamer()
	waitFor(t, "gamer offline", func() bool {
		p, err := n.cl.Provider(ctx, gamer.Status().Key())
		return err == nil && !p.Record.Online
	})
	got, _ := n.cl.Offers(ctx, "", "", false)
	if slices.Contains(addrs(got), addr(gamer)) {
		t.Error("stopped provider still offered")
	}
	withAll, _ := n.cl.Offers(ctx, "", "", true)
	if !slices.Contains(addrs(withAll), addr(gamer)) {
		t.Error("stopped provider missing from --all")
	}
	for i := 0; i < 15; i++ { // past any challenge window open at the stop
		time.Sleep(50 * time.Millisecond)
	}
	p, _ := n.cl.Provider(ctx, gamer.Status().Key())
	if p.Record.Missed != before.Record.Missed || p.Record.Challenge != nil {
		t.Errorf("a clean stop cost missed challenges: %d before, %d after (open challenge %v)", before.Record.Missed, p.Record.Missed, p.Record.Challenge)
	}
	stopCPU()
	stopDGX()
}

// TestAgentSurvivesNodeRestart stops the node under a running agent; the
// agent waits, reconnects and goes on answering challenges.
func TestAgentSurvivesNodeRestart(t *testing.T) {
	n := startNetwork(t, "p")
	a, stop := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.L4, 1), "eu", 300_000)
	waitFor(t, "registered", func() bool { return ready(a) && a.Status().Answered >= 1 })
	n.stop(t)
	waitFor(t, "agent notices", func() bool { return !a.Status().Connected })
	time.Sleep(300 * time.Millisecond)
	n.start(t)
	before := a.Status().Answered
	waitFor(t, "agent reconnects and answers again", func() bool {
		st := a.Status()
		return st.Connected && st.Online && st.Answered > before
	})
	stop()
}
