package ledger

import (
	"crypto/ed25519"
	"crypto/sha256"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// TestPreparedTxKnowsItsSender: a tx the ante step decoded and verified
// carries its sender, the address of its key, so that its later uses do
// not hash the key again; a tx decoded alone or built by hand works it out
// from the key.
func TestPreparedTxKnowsItsSender(t *testing.T) {
	seed := sha256.Sum256([]byte("sender test"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	tx := &Tx{ChainID: "c", Msg: &MsgSend{To: address.Address{1}, Amount: 1}}
	if err := tx.Sign(priv); err != nil {
		t.Fatal(err)
	}
	raw, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := address.FromPubKey(priv.Public().(ed25519.PublicKey))
	if tx.senderKnown || tx.Sender() != want {
		t.Fatalf("a signed tx's sender: %v (known %v), want %v worked out", tx.Sender(), tx.senderKnown, want)
	}
	var l Ledger
	p := l.Prepare(raw)
	if p.tx == nil || !p.tx.senderKnown || p.tx.sender != want || p.tx.Sender() != want {
		t.Fatalf("a prepared tx's sender: %+v, want %v known", p.tx, want)
	}
	dec, err := DecodeTx(raw)
	if err != nil {
		t.Fatal(err)
	}
	if dec.senderKnown || dec.Sender() != want {
		t.Fatalf("a decoded tx's sender: %v (known %v), want %v worked out", dec.Sender(), dec.senderKnown, want)
	}
}
