package ledger_test

import (
	"encoding/json"
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
