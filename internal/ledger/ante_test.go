package ledger_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestTxCheckerRereadsParams: a TxChecker decodes the parameters once, but
// checks the next tx under new ones as soon as the state's change.
func TestTxCheckerRereadsParams(t *testing.T) {
	c := lt.NewChain(t, lt.Genesis(1000, "alice", "bob")) // minimum fee 0
	state := ledger.NewOverlay(c.KV)
	chk := c.L.NewTxChecker(state)
	if r := chk.Check(alice.Tx(lt.ChainID, 0, 0, &ledger.MsgSend{To: bob.Addr, Amount: 1})); r.Err != nil {
		t.Fatalf("fee 0 under a minimum of 0: %v", r.Err)
	}
	p, err := ledger.GetParams(state)
	if err != nil {
		t.Fatal(err)
	}
	p.MinFee = 5
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	state.Set([]byte("chain/params"), b)
	if r := chk.Check(alice.Tx(lt.ChainID, 1, 0, &ledger.MsgSend{To: bob.Addr, Amount: 1})); ledger.CodeOf(r.Err) != ledger.ErrInsufficientFee.Code {
		t.Fatalf("fee 0 under a new minimum of 5: %v, want insufficient fee", r.Err)
	}
	if r := chk.Check(alice.Tx(lt.ChainID, 1, 5, &ledger.MsgSend{To: bob.Addr, Amount: 1})); r.Err != nil {
		t.Fatalf("fee 5 under a minimum of 5: %v", r.Err)
	}
}

// TestRecheckKeepsLaterTxsOfASender: a provider's liveness proof waits in
// the mempool with its next tx (sequence + 1) behind it; blocks close the
// challenge before either is in one. Check would now refuse the proof, and
// the tx behind it, a sequence ahead of the next, with it: both were
// dropped from the mempool, and their senders waited for blocks that would
// never hold them. Recheck keeps both; a block then charges the proof's
// fee and sequence and fails it, and runs the tx behind it.
func TestRecheckKeepsLaterTxsOfASender(t *testing.T) {
	g := lt.Genesis(1_000_000_000, "prov1", "bob")
	g.Params.LivenessWindow = 2
	c := lt.NewChain(t, g)
	c.ApplyBlock(t, prov1.Tx(lt.ChainID, 0, 0, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("L4", 1, 100)}))
	p, ok, err := ledger.GetProvider(c.KV, prov1.Addr)
	if err != nil || !ok || p.Challenge == nil {
		t.Fatalf("provider %+v (%v, %v): want an open liveness challenge", p, ok, err)
	}
	proof := prov1.Tx(lt.ChainID, 1, 0, &ledger.MsgLivenessProof{Height: p.Challenge.Height, Proof: ledger.LivenessProof(p.Challenge.Seed, prov1.Addr)})
	next := prov1.Tx(lt.ChainID, 2, 0, &ledger.MsgSend{To: bob.Addr, Amount: 7})
	mempool := c.L.NewTxChecker(ledger.NewOverlay(c.KV))
	for _, tx := range [][]byte{proof, next} {
		if r := mempool.Check(tx); r.Err != nil {
			t.Fatalf("admitted to the mempool: %v", r.Err)
		}
	}
	// Blocks without them pass the challenge's deadline.
	for h := p.Challenge.Deadline; uint64(c.Height) <= h; {
		c.ApplyBlock(t)
	}
	if r := c.L.NewTxChecker(ledger.NewOverlay(c.KV)).Check(proof); !errors.Is(r.Err, ledger.ErrNoChallenge) {
		t.Fatalf("the proof checked anew after its deadline: %v, want no challenge", r.Err)
	}
	recheck := c.L.NewTxChecker(ledger.NewOverlay(c.KV))
	for i, tx := range [][]byte{proof, next} {
		if r := recheck.Recheck(tx); r.Err != nil {
			t.Fatalf("recheck of tx %d after the block: %v, want it kept", i, r.Err)
		}
	}
	bobBefore := c.Balance(t, bob.Addr)
	res := c.ApplyBlock(t, proof, next)
	if !errors.Is(res[0].Err, ledger.ErrNoChallenge) || res[1].Err != nil {
		t.Fatalf("in a block: proof %v (want no challenge), next %v (want ok)", res[0].Err, res[1].Err)
	}
	if got := c.Balance(t, bob.Addr) - bobBefore; got != 7 {
		t.Fatalf("bob received %d, want 7", got)
	}
	// A tx whose envelope no longer passes still leaves at recheck.
	if r := c.L.NewTxChecker(ledger.NewOverlay(c.KV)).Recheck(next); !errors.Is(r.Err, ledger.ErrBadSequence) {
		t.Fatalf("recheck of a tx already in a block: %v, want bad sequence", r.Err)
	}
}
