package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/keys"
)

// TestChainIDThroughMetrics: an agent with metrics (its chain wrapped in a
// recordingChain) still reads the chain ID its replicas' receipts are
// signed for from the node. Without it a devnet's replicas answered with no
// receipt, and every node's gateway refused their answers (502).
func TestChainIDThroughMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"chain_id":"chain-x","height":1}`))
	}))
	defer srv.Close()
	kr, err := keys.Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.AddUnencrypted("p")
	if err != nil {
		t.Fatal(err)
	}
	a := New(Options{Chain: chainclient.New(srv.URL), Key: k, Metrics: NewMetrics(prometheus.NewRegistry())})
	if _, wrapped := a.o.Chain.(*recordingChain); !wrapped {
		t.Fatalf("the agent's chain is a %T, not wrapped by its metrics: this test no longer tests the wrap", a.o.Chain)
	}
	if got := a.chainID(context.Background()); got != "chain-x" {
		t.Fatalf("chain ID %q, want chain-x (read from the node's status through the metrics' wrap)", got)
	}
}
