package ledger_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

var prov1, prov2, prov3 = lt.NewKey("prov1"), lt.NewKey("prov2"), lt.NewKey("prov3")

func must(t *testing.T, res []ledger.TxResult) {
	t.Helper()
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("tx %d: %v", i, r.Err)
		}
	}
}

func provider(t *testing.T, c *lt.Chain, k lt.Key) *ledger.Provider {
	t.Helper()
	p, ok, err := ledger.GetProvider(c.KV, k.Addr)
	if err != nil || !ok {
		t.Fatalf("provider %s: ok=%v err=%v", k.Addr, ok, err)
	}
	return p
}

func seqOf(t *testing.T, c *lt.Chain, k lt.Key) uint64 {
	a, _ := ledger.GetAccount(c.KV, k.Addr)
	return a.Sequence
}

func send(t *testing.T, c *lt.Chain, k lt.Key, msg ledger.Msg) ledger.TxResult {
	t.Helper()
	return c.ApplyBlock(t, k.Tx(lt.ChainID, seqOf(t, c, k), 0, msg))[0]
}

func TestRegisterStakeUnstake(t *testing.T) {
	g := lt.Genesis(1_000_000_000, "prov1")
	g.Params.UnbondingBlocks = 3
	c := lt.NewChain(t, g)
	info := lt.ProviderInfo("RTX_4090", 2, 500_000)
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: info})})
	p := provider(t, c, prov1)
	if !p.Online || p.Stake != 0 || p.Schedulable(g.Params) {
		t.Fatalf("after registration: online=%v stake=%d schedulable=%v", p.Online, p.Stake, p.Schedulable(g.Params))
	}
	if r := send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: info}); !errors.Is(r.Err, ledger.ErrAlreadyRegistered) {
		t.Fatalf("double registration: %v", r.Err)
	}
	// 2 GPUs need 2 × 100 SYNC.
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStake{Amount: 150_000_000})})
	if provider(t, c, prov1).Schedulable(g.Params) {
		t.Fatal("schedulable below the minimum stake")
	}
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgStake{Amount: 50_000_000})})
	if !provider(t, c, prov1).Schedulable(g.Params) {
		t.Fatal("not schedulable at the minimum stake")
	}
	if r := send(t, c, prov1, &ledger.MsgUnstake{Amount: 200_000_001}); !errors.Is(r.Err, ledger.ErrInsufficientStake) || !strings.Contains(r.Err.Error(), "200000000usync staked") {
		t.Fatalf("unstake more than staked: %v", r.Err)
	}
	if r := send(t, c, prov1, &ledger.MsgStake{Amount: 10_000_000_000}); !errors.Is(r.Err, ledger.ErrInsufficientFunds) {
		t.Fatalf("stake more than balance: %v", r.Err)
	}
	before := c.Balance(t, prov1.Addr)
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUnstake{Amount: 60_000_000})})
	unbondAt := c.Height + 3
	if got := ledger.GetUnbondings(c.KV, prov1.Addr); len(got) != 1 || got[0].Amount != 60_000_000 || got[0].CompletionHeight != uint64(unbondAt) {
		t.Fatalf("unbonding entries: %+v", got)
	}
	for c.Height < unbondAt-1 {
		c.ApplyBlock(t)
		if c.Balance(t, prov1.Addr) != before {
			t.Fatalf("unbonded tokens returned early at height %d", c.Height)
		}
	}
	c.ApplyBlock(t)
	if got := c.Balance(t, prov1.Addr); got != before+60_000_000 {
		t.Fatalf("after unbonding: balance %d, want %d", got, before+60_000_000)
	}
	if ledger.UnbondingTotal(c.KV) != 0 || ledger.Staked(c.KV) != 140_000_000 {
		t.Fatalf("totals: unbonding %d staked %d", ledger.UnbondingTotal(c.KV), ledger.Staked(c.KV))
	}
}

func TestUnregisteredProviderTxsRejected(t *testing.T) {
	c := lt.NewChain(t, lt.Genesis(1_000_000_000, "prov1"))
	for _, msg := range []ledger.Msg{
		&ledger.MsgStake{Amount: 1},
		&ledger.MsgUnstake{Amount: 1},
		&ledger.MsgSetProviderStatus{Online: true},
		&ledger.MsgLivenessProof{Height: 1},
		&ledger.MsgUpdateProvider{ProviderInfo: lt.ProviderInfo("L4", 1, 1)},
	} {
		r := c.L.CheckTx(ledger.NewOverlay(c.KV), prov1.Tx(lt.ChainID, 0, 0, msg))
		if !errors.Is(r.Err, ledger.ErrUnknownProvider) || !strings.Contains(r.Err.Error(), "provider start") {
			t.Errorf("%T: got %v, want ErrUnknownProvider", msg, r.Err)
		}
	}
}

func TestRegistrationValidation(t *testing.T) {
	c := lt.NewChain(t, lt.Genesis(1_000_000_000, "prov1"))
	for _, tc := range []struct {
		name   string
		mutate func(pi *ledger.ProviderInfo)
		want   string
	}{
		{"zero vram", func(pi *ledger.ProviderInfo) { pi.Inventory.GPUs[0].VRAM = 0 }, "no VRAM"},
		{"vram above the model", func(pi *ledger.ProviderInfo) { pi.Inventory.GPUs[0].VRAM = 80 << 30 }, "that model has 24 GiB"},
		{"throughput above peak", func(pi *ledger.ProviderInfo) { pi.Measured.Int8GOPS = 5_000_000 }, "physical peak"},
		{"unknown executor", func(pi *ledger.ProviderInfo) { pi.Executors = []string{"docker"} }, `unknown executor "docker"`},
		{"no executors", func(pi *ledger.ProviderInfo) { pi.Executors = nil }, "executors is empty"},
		{"absurd gpu count", func(pi *ledger.ProviderInfo) {
			for len(pi.Inventory.GPUs) <= 64 {
				pi.Inventory.GPUs = append(pi.Inventory.GPUs, pi.Inventory.GPUs[0])
			}
		}, "at most 64"},
		{"zero cores", func(pi *ledger.ProviderInfo) { pi.Inventory.CPUCores = 0 }, "cpu_cores"},
		{"absurd cores", func(pi *ledger.ProviderInfo) { pi.Inventory.CPUCores = 1 << 20 }, "cpu_cores"},
		{"zero ram", func(pi *ledger.ProviderInfo) { pi.Inventory.RAM = 0 }, "inventory.ram"},
		{"bad class", func(pi *ledger.ProviderInfo) { pi.Inventory.GPUs[0].Class = "rtx 4090" }, "class"},
		{"bad region", func(pi *ledger.ProviderInfo) { pi.Region = "Europe West" }, "region"},
		{"ask for missing class", func(pi *ledger.ProviderInfo) { pi.Asks[0].Class = "H100_80GB" }, "does not have"},
		{"zero price", func(pi *ledger.ProviderInfo) { pi.Asks[0].PricePerHour = 0 }, "price_per_hour"},
		{"bad encryption key", func(pi *ledger.ProviderInfo) { pi.EncryptionKey = "age1nope" }, "encryption_key"},
		{"zero max jobs", func(pi *ledger.ProviderInfo) { pi.MaxJobs = 0 }, "max_jobs"},
		{"bad compute cap", func(pi *ledger.ProviderInfo) { pi.Inventory.GPUs[0].ComputeCap = "ampere" }, "compute_cap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pi := lt.ProviderInfo("RTX_4090", 2, 500_000)
			tc.mutate(&pi)
			r := c.L.CheckTx(ledger.NewOverlay(c.KV), prov1.Tx(lt.ChainID, 0, 0, &ledger.MsgRegisterProvider{ProviderInfo: pi}))
			if !errors.Is(r.Err, ledger.ErrInvalidMsg) || !strings.Contains(r.Err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidMsg mentioning %q", r.Err, tc.want)
			}
		})
	}
	// A CPU-only provider over the CPU peak.
	pi := lt.ProviderInfo("", 0, 100)
	pi.Measured.Int8GOPS = 16*2000 + 1
	if err := pi.Validate(); err == nil || !strings.Contains(err.Error(), "16 CPU cores") {
		t.Fatalf("cpu over peak: %v", err)
	}
}

func TestLivenessChallenges(t *testing.T) {
	g := lt.Genesis(1_000_000_000, "prov1")
	g.Params.LivenessWindow = 2
	g.Params.LivenessMaxMissed = 2
	c := lt.NewChain(t, g)
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("L4", 1, 100)})})
	p := provider(t, c, prov1)
	if p.Challenge == nil || p.Challenge.Height != uint64(c.Height) || p.Challenge.Deadline != uint64(c.Height)+2 {
		t.Fatalf("the only online provider was not challenged: %+v", p.Challenge)
	}
	// A wrong proof is rejected; the right one counts.
	if r := send(t, c, prov1, &ledger.MsgLivenessProof{Height: p.Challenge.Height, Proof: ledger.Hash{1}}); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("wrong proof: %v", r.Err)
	}
	p = provider(t, c, prov1)
	rep0 := p.Reputation
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgLivenessProof{Height: p.Challenge.Height, Proof: ledger.LivenessProof(p.Challenge.Seed, prov1.Addr)})})
	p = provider(t, c, prov1)
	if p.Answered != 1 || p.Reputation <= rep0 || p.Uptime() != 1_000_000 {
		t.Fatalf("after answering: answered %d reputation %d (was %d) uptime %d", p.Answered, p.Reputation, rep0, p.Uptime())
	}
	// No open challenge now (a new one was drawn at the end of that block,
	// so answer it first, then prove the error).
	if p.Challenge != nil {
		must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgLivenessProof{Height: p.Challenge.Height, Proof: ledger.LivenessProof(p.Challenge.Seed, prov1.Addr)})})
	}
	// Stop answering: misses accumulate and two in a row mark it offline.
	for i := 0; i < 12 && provider(t, c, prov1).Online; i++ {
		c.ApplyBlock(t)
	}
	p = provider(t, c, prov1)
	if p.Online || p.Missed < 2 || p.Reputation >= rep0 {
		t.Fatalf("silent provider: online %v missed %d reputation %d", p.Online, p.Missed, p.Reputation)
	}
	if ledger.OnlineCount(c.KV) != 0 {
		t.Fatalf("online count %d, want 0", ledger.OnlineCount(c.KV))
	}
	c.ApplyBlock(t)
	if provider(t, c, prov1).Challenge != nil {
		t.Fatal("offline provider challenged")
	}
	if r := send(t, c, prov1, &ledger.MsgLivenessProof{Height: 1, Proof: ledger.Hash{}}); !errors.Is(r.Err, ledger.ErrNoChallenge) {
		t.Fatalf("proof without challenge: %v", r.Err)
	}
	// Coming back online keeps identity and history.
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgSetProviderStatus{Online: true})})
	p2 := provider(t, c, prov1)
	if !p2.Online || p2.Missed != p.Missed || p2.Answered != p.Answered || p2.MissedInARow != 0 {
		t.Fatalf("back online: %+v", p2)
	}
}

func TestOnlineIndexSwapRemove(t *testing.T) {
	g := lt.Genesis(1_000_000_000, "prov1", "prov2", "prov3")
	g.Params.LivenessRatePPM = 0 // no challenges: this test is about the index
	c := lt.NewChain(t, g)
	keys := []lt.Key{prov1, prov2, prov3}
	for _, k := range keys {
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("", 0, 100)})})
	}
	// Take the first offline: the last moves into its slot. The invariant
	// check in ApplyBlock verifies the index after every block.
	for _, step := range []struct {
		k      lt.Key
		online bool
	}{{prov1, false}, {prov3, false}, {prov1, true}, {prov2, false}, {prov2, true}} {
		must(t, []ledger.TxResult{send(t, c, step.k, &ledger.MsgSetProviderStatus{Online: step.online})})
	}
	if n := ledger.OnlineCount(c.KV); n != 2 {
		t.Fatalf("online = %d, want 2", n)
	}
	var online []address.Address
	ledger.IterateProviders(c.KV, func(p *ledger.Provider) bool {
		if p.Online {
			online = append(online, p.Address)
		}
		return true
	})
	if len(online) != 2 {
		t.Fatalf("online providers: %v", online)
	}
}

// TestInvariantCatchesBadIndex: the scheduler's index is left out of the app
// hash because CheckInvariants rebuilds it from the provider records; a
// stale, missing or extra entry must be caught.
func TestInvariantCatchesBadIndex(t *testing.T) {
	c := lt.NewChain(t, lt.Genesis(1_000_000_000, "prov1"))
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("RTX_4090", 2, 500_000)})})
	var key, value []byte
	c.KV.Iterate([]byte("pidx/"), []byte("pidx0"), func(k, v []byte) bool {
		key, value = slices.Clone(k), slices.Clone(v)
		return false
	})
	if key == nil {
		t.Fatal("no index entry for an online provider")
	}
	stale := slices.Clone(value)
	stale[len(stale)-1] ^= 1
	for name, change := range map[string]func(o *ledger.Overlay){
		"stale":   func(o *ledger.Overlay) { o.Set(key, stale) },
		"missing": func(o *ledger.Overlay) { o.Delete(key) },
		"extra":   func(o *ledger.Overlay) { o.Set(append(slices.Clone(key[:len(key)-1]), key[len(key)-1]^1), value) },
		"count":   func(o *ledger.Overlay) { o.Set([]byte("pcls/RTX_4090"), []byte{0, 0, 0, 0, 0, 0, 0, 9}) },
	} {
		o := ledger.NewOverlay(c.KV)
		change(o)
		if err := ledger.CheckInvariants(o); err == nil {
			t.Errorf("%s index entry not caught", name)
		}
	}
	if err := ledger.CheckInvariants(c.KV); err != nil {
		t.Fatal(err)
	}
}
