package ledger_test

import (
	"bytes"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// FuzzSignedParts: what SignedParts hands a verifier ahead of the ledger is
// what the ledger itself verifies, for every tx DecodeTx accepts.
func FuzzSignedParts(f *testing.F) {
	f.Add(alice.Send(0, bob.Addr, 10))
	f.Add(rawTx(alice, lt.ChainID, 0, 1, `{"to":"x","amount":-1}`))
	f.Add([]byte{1})
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		pub, msg, sig, ok := ledger.SignedParts(raw)
		if ok && (len(pub) != 32 || len(sig) != 64) {
			t.Fatalf("public key of %d bytes, signature of %d", len(pub), len(sig))
		}
		tx, err := ledger.DecodeTx(raw)
		if err != nil {
			return
		}
		if !ok {
			t.Fatal("DecodeTx accepts a tx whose envelope SignedParts refuses")
		}
		want, err := tx.SignBytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pub, tx.PubKey) || !bytes.Equal(sig, tx.Signature) || !bytes.Equal(msg, want) {
			t.Fatalf("SignedParts (%x, %x, %x), DecodeTx (%x, %x, %x)", pub, msg, sig, tx.PubKey, want, tx.Signature)
		}
	})
}
