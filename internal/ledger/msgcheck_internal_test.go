package ledger

import "testing"

// Every tx this package's tests run is checked to be unchanged by its
// execution, so that TxCache may share decoded txs.
func init() { checkMsgsUnchanged = true }

// TestChangedMsgDetected: executeChecked's check notices a message changed
// after decoding.
func TestChangedMsgDetected(t *testing.T) {
	tx := &Tx{ChainID: "c", Sequence: 1, PubKey: make([]byte, 32), Signature: make([]byte, 64), Msg: &MsgSend{Amount: 5}}
	raw, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	mustDecodeTo(raw, tx, "before") // unchanged: no panic
	tx.Msg.(*MsgSend).Amount++
	defer func() {
		if recover() == nil {
			t.Fatal("a changed message went unnoticed")
		}
	}()
	mustDecodeTo(raw, tx, "after")
}
