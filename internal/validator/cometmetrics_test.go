package validator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestCometMetrics: two nodes in one process, each with a registry of its
// own, each get CometBFT's metrics, named cometbft_* and labelled with
// their chain, following their own chain; the default registry gets none
// (CometBFT's constructors register there, and a second node panicked).
func TestCometMetrics(t *testing.T) {
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var nodes []*Node
	for i, reg := range regs {
		home := t.TempDir()
		if _, err := Init(home, InitOptions{ChainID: fmt.Sprintf("metrics-%d", i), Validators: 1, Genesis: ledger.Genesis{Params: ledger.DefaultParams()}, BlockTime: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		n, err := Start(t.Context(), home, StartOptions{Metrics: reg})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Stop()
		nodes = append(nodes, n)
	}
	for i, reg := range regs {
		chain := fmt.Sprintf("metrics-%d", i)
		var height float64
		for deadline := time.Now().Add(30 * time.Second); height < 3; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("node %d: cometbft_consensus_height %v after 30s (block store at %d)", i, height, nodes[i].Height())
			}
			height = gauge(t, reg, "cometbft_consensus_height", chain)
		}
		if v := gauge(t, reg, "cometbft_consensus_height", fmt.Sprintf("metrics-%d", 1-i)); v != -1 {
			t.Errorf("node %d's registry has the other chain's height (%v)", i, v)
		}
		if v := gauge(t, reg, "cometbft_consensus_validators", chain); v != 1 {
			t.Errorf("node %d: cometbft_consensus_validators = %v, want 1", i, v)
		}
	}
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), CometNamespace+"_") {
			t.Errorf("the default registry holds %s", mf.GetName())
		}
	}
}

// gauge is the value of name{chain_id=chain} in reg, or -1.
func gauge(t *testing.T, reg prometheus.Gatherer, name, chain string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "chain_id" && l.GetValue() == chain {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
