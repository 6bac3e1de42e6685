package ledgerbench

import (
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// BenchmarkDecodeTxSend decodes the workload's signed transfers
// (ledger.DecodeTx: the envelope, then the message's JSON body and its
// canonical check), as CheckTx does once for each new tx.
func BenchmarkDecodeTxSend(b *testing.B) {
	w := NewWorkload(DefaultSenders)
	txs := w.Txs(benchChainID, 0, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ledger.DecodeTx(txs[i%len(txs)]); err != nil {
			b.Fatal(err)
		}
	}
}
