package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// witnessTestChain is a node for the witness: an in-memory chain whose
// broadcast txs are kept for the test to put in a block.
type witnessTestChain struct {
	c  *lt.Chain
	mu sync.Mutex
	tx [][]byte
}

func (w *witnessTestChain) View() (ledger.KV, func()) { return w.c.KV, func() {} }
func (w *witnessTestChain) NextSequence(a address.Address) (uint64, error) {
	acct, err := ledger.GetAccount(w.c.KV, a)
	return acct.Sequence, err
}
func (w *witnessTestChain) BroadcastTx(ctx context.Context, tx []byte) (*apiwire.TxResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tx = append(w.tx, tx)
	return &apiwire.TxResult{}, nil
}
func (w *witnessTestChain) Status(ctx context.Context) (*apiwire.Status, error) {
	return &apiwire.Status{LatestBlockTime: w.c.Now()}, nil
}

// TestWitnessProbesAndAttests: the witness of a chain's only validator
// probes the ready replicas, attests those that answered (sorted, one
// tx signed with its consensus key), and the block pays them; a replica
// that did not answer is left out and unpaid.
func TestWitnessProbesAndAttests(t *testing.T) {
	g := lt.Genesis(100_000_000_000, "owner", "p1", "p2", "p3")
	g.Params.LivenessRatePPM = 0
	g.Validators = []ledger.GenesisValidator{lt.GenesisValidator("v1", g.Params.MinValidatorStake)}
	c := lt.NewChain(t, g)
	seq := map[address.Address]uint64{}
	send := func(k lt.Key, m ledger.Msg) {
		t.Helper()
		res := c.ApplyBlock(t, k.Tx(lt.ChainID, seq[k.Addr], 0, m))
		seq[k.Addr]++
		if res[0].Err != nil {
			t.Fatalf("%T: %v", m, res[0].Err)
		}
	}
	provs := []lt.Key{lt.NewKey("p1"), lt.NewKey("p2"), lt.NewKey("p3")}
	for _, k := range provs {
		info := lt.ProviderInfo("", 0, 36_000)
		info.Executors = []string{"wasm", "oci"}
		send(k, &ledger.MsgRegisterProvider{ProviderInfo: info})
		send(k, &ledger.MsgStake{Amount: 10_000_000})
	}
	spec := lt.ServiceSpec("tinylm", 200_000)
	spec.Replicas = 3
	send(lt.NewKey("owner"), &ledger.MsgDeployService{Spec: spec, Budget: 50_000_000, ConsumerKey: lt.AgeKey("owner"), Public: true})
	for _, k := range provs {
		send(k, &ledger.MsgServiceHeartbeat{Replicas: []ledger.ReplicaStatus{{ServiceID: 1, Ready: true, Relay: "http://127.0.0.1:1"}}})
	}
	chain := &witnessTestChain{c: c}
	var mu sync.Mutex
	probed := map[address.Address]bool{}
	w := &witness{key: lt.ConsPriv("v1"), chainID: lt.ChainID, chain: chain, log: slog.New(slog.DiscardHandler), now: c.Now,
		probe: func(ctx context.Context, svc *ledger.Service, p address.Address) error {
			mu.Lock()
			probed[p] = true
			mu.Unlock()
			if p == provs[1].Addr {
				return errors.New("silent")
			}
			return nil
		}}
	p, ok := w.state(lt.ConsKey("v1"))
	if !ok {
		t.Fatal("the validator's consensus key is not a witness")
	}
	c.Advance(time.Duration(p.ServiceServePeriod) * time.Second)
	k := ledger.ServePeriod(c.Now().Unix(), p)
	served := w.probeAll(t.Context())
	if len(probed) != 3 || len(served) != 2 {
		t.Fatalf("probed %v, served %v: want all three probed, two answering", probed, served)
	}
	if err := (&ledger.MsgAttestServed{Period: k, Replicas: served}).ValidateBasic(); err != nil {
		t.Fatalf("the witness's list: %v", err)
	}
	// The period ends; the witness sends; the next block takes it.
	c.Advance(time.Duration(p.ServiceServePeriod) * time.Second)
	w.send(t.Context(), k, served, p)
	if len(chain.tx) != 1 {
		t.Fatalf("%d txs sent, want one", len(chain.tx))
	}
	res := c.ApplyBlock(t, chain.tx[0])
	if res[0].Err != nil {
		t.Fatalf("the attestation was refused: %v", res[0].Err)
	}
	s, _, err := ledger.GetService(c.KV, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Replicas {
		if silent := r.Provider == provs[1].Addr; silent != (r.Paid == 0) {
			t.Errorf("replica on %s: paid %d for %d s (silent %v)", r.Provider, r.Paid, r.ReadySeconds, silent)
		}
	}
}
