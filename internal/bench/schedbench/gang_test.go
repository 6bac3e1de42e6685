package schedbench

import (
	"crypto/ed25519"
	"flag"
	"fmt"
	"testing"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/bench/statestore"
	"github.com/gpunet/gpunet/internal/ledger"
)

var flagGangProviders = flag.Int("bench.gang.providers", 100_000, "providers in BenchmarkGangQuote's market")

// BenchmarkGangQuote quotes, on the ledger's own offer index over a
// market of -bench.gang.providers providers (the scheduler benchmark's,
// in memory), a single oci job of 4 GPUs of any class and gangs of such
// members: one quote is one sched.Place through indexState, as a
// placement is (with a quote's 32 offers per class), and the single job
// is the baseline in the same run. The market's providers are not
// NVLinked (it declares no interconnect), so no NVLink case here: that
// is sched's BenchmarkPlace100k.
func BenchmarkGangQuote(b *testing.B) {
	kv, err := statestore.Open(StoreBTree)
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	r := &sizeRun{o: Options{Store: StoreBTree, BlockJobs: DefaultBlockJobs, Seed: 1}, consumers: market.Keys("consumer", 1), seqs: make([]uint64, 1), sz: &Size{}}
	r.c = &chain{kv: &countingKV{Store: kv}, l: ledger.Ledger{Verify: func(ed25519.PublicKey, []byte, []byte) bool { return true }}}
	if err := r.setup(b.Context(), kv, *flagGangProviders); err != nil {
		b.Fatal(err)
	}
	spec := func(nodes uint64) ledger.JobSpec {
		return ledger.JobSpec{
			Name: "g", Executor: ledger.ExecutorOCI, Image: "r/x@sha256:" + fmt.Sprintf("%064x", 1), Outputs: []string{"/out"},
			CPUMilli: 4000, Memory: 8 << 30, Disk: 10 << 30, GPUCount: 4, MaxPricePerHour: 4 * 4_000_000, TimeoutSeconds: 3600,
			Verification: ledger.VerifyNone, Nodes: nodes,
		}
	}
	for _, nodes := range []uint64{0, 8, 32} {
		name := fmt.Sprintf("gang=%d", nodes)
		if nodes == 0 {
			name = "single"
		}
		s := spec(nodes)
		b.Run(name, func(b *testing.B) {
			var gangs, matching int
			for b.Loop() {
				q, err := ledger.QuoteJob(kv, &s)
				if err != nil {
					b.Fatal(err)
				}
				gangs, matching = q.Gangs, q.Matching
				if q.Code != "" {
					b.Fatalf("%s: %s %+v", name, q.Code, q.Miss)
				}
			}
			b.ReportMetric(float64(matching), "matching")
			b.ReportMetric(float64(gangs), "gangs")
		})
	}
}
