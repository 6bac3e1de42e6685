package market

import (
	"crypto/ed25519"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestMarket: the market's declarations and job specs are valid, the same
// for a seed, and mixed as described.
func TestMarket(t *testing.T) {
	p := Providers(1, 2000, ledger.DefaultParams())
	gpu := 0
	for i, sp := range p {
		if err := sp.Info.Validate(); err != nil {
			t.Fatalf("provider %d: %v", i, err)
		}
		if len(sp.Info.Inventory.GPUs) > 0 {
			gpu++
		}
	}
	if gpu < 1000 || gpu > 1400 {
		t.Errorf("%d of 2000 providers have GPUs, want about 60%%", gpu)
	}
	jobs := Jobs(1, 1, 2000)
	again := Jobs(1, 1, 2000)
	anyClass := 0
	for i, s := range jobs {
		if err := s.Validate(); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if s.Name != again[i].Name || s.MaxPricePerHour != again[i].MaxPricePerHour {
			t.Fatal("the job stream is not deterministic")
		}
		if s.GPUCount > 0 && len(s.GPUModels) == 0 {
			anyClass++
		}
	}
	if anyClass < 100 || anyClass > 300 {
		t.Errorf("%d of 2000 jobs take any GPU class, want about 10%%", anyClass)
	}
}

// TestSignAll: every tx is signed by its key with its sequence, in order,
// and decodes.
func TestSignAll(t *testing.T) {
	keys := Keys("test", 3)
	if again := Keys("test", 3); again[2].Addr != keys[2].Addr {
		t.Fatal("keys are not deterministic")
	}
	var txs []Tx
	for i := range 10 {
		txs = append(txs, Tx{Key: &keys[i%3], Seq: uint64(i / 3), Msg: &ledger.MsgSend{To: keys[(i+1)%3].Addr, Amount: 1}})
	}
	raw, err := SignAll("chain", txs)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range raw {
		tx, err := ledger.DecodeTx(b)
		if err != nil {
			t.Fatalf("tx %d: %v", i, err)
		}
		if tx.Sequence != txs[i].Seq || tx.Fee != TxFee || tx.ChainID != "chain" || tx.Sender() != txs[i].Key.Addr {
			t.Errorf("tx %d: sequence %d fee %d chain %q from %s, want %d, %d, chain, %s", i, tx.Sequence, tx.Fee, tx.ChainID, tx.Sender(), txs[i].Seq, TxFee, txs[i].Key.Addr)
		}
		sb, err := tx.SignBytes()
		if err != nil || !ed25519.Verify(tx.PubKey, sb, tx.Signature) {
			t.Errorf("tx %d: signature does not verify (%v)", i, err)
		}
	}
}
