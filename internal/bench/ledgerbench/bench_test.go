package ledgerbench

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

var (
	flagTxs       = flag.Int("bench.txs", DefaultTxs, "txs per phase in BenchmarkLedgerVsKVStore")
	flagBlockTime = flag.Duration("bench.blocktime", DefaultBlockTime, "block time in BenchmarkLedgerVsKVStore")
	flagSubmit    = flag.String("bench.submit", DefaultSubmit, "submission mode in BenchmarkLedgerVsKVStore: rpc or mempool")
)

// TestBenchSmall runs both phases with a few hundred txs in each submission
// mode: both must finish and every ledger transfer must succeed.
func TestBenchSmall(t *testing.T) {
	for _, mode := range []string{SubmitRPC, SubmitMempool} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			// Each phase's CPU profile goes to its own writer (a pprof
			// profile is gzipped protobuf).
			var ledgerProf, kvProf bytes.Buffer
			res, err := Run(ctx, Options{Txs: 300, Senders: 50, BlockTime: 10 * time.Millisecond, Submit: mode, Dir: t.TempDir(),
				CPUProfile: &ledgerProf, KVStoreCPUProfile: &kvProf})
			if err != nil {
				t.Fatal(err)
			}
			for name, b := range map[string]*bytes.Buffer{"ledger": &ledgerProf, "kvstore": &kvProf} {
				zr, err := gzip.NewReader(b)
				if err == nil {
					var n int64
					n, err = io.Copy(io.Discard, zr)
					if err == nil && n == 0 {
						err = io.ErrUnexpectedEOF
					}
				}
				if err != nil {
					t.Errorf("%s phase's CPU profile: %v", name, err)
				}
			}
			if res.Submit != mode {
				t.Errorf("result says submission %q, want %q", res.Submit, mode)
			}
			wantSubmitters := DefaultMempoolSubmitters
			if mode == SubmitRPC {
				wantSubmitters = DefaultRPCSubmitters
			}
			if res.Submitters != wantSubmitters {
				t.Errorf("%d submitters, want the mode's default %d", res.Submitters, wantSubmitters)
			}
			for _, p := range []Phase{res.Ledger, res.KVStore} {
				if p.Rejected != 0 || p.Failed != 0 {
					t.Errorf("%s: %d rejected, %d failed; first: %s", p.App, p.Rejected, p.Failed, p.FirstError)
				}
				if p.TxPerS <= 0 || p.Blocks == 0 || p.LatencyP50Ms <= 0 || p.LatencyP99Ms < p.LatencyP50Ms {
					t.Errorf("%s: implausible figures %+v", p.App, p)
				}
				// Over RPC, each submitter's client keeps its connection
				// alive for all its txs (net/http may now and then dial a
				// spare one when a request starts before the last response's
				// connection is back in the idle pool); in process there is
				// none.
				switch {
				case mode == SubmitRPC && (p.RPCConns < int64(res.Submitters) || p.RPCConns > int64(res.Txs/10)):
					t.Errorf("%s: %d RPC connections opened for %d txs from %d submitters: keep-alive broken?", p.App, p.RPCConns, res.Txs, res.Submitters)
				case mode == SubmitMempool && p.RPCConns != 0:
					t.Errorf("%s: %d RPC connections opened in mempool mode", p.App, p.RPCConns)
				}
			}
			if res.Ratio <= 0 || res.CPURatio <= 0 || res.Ledger.CPUPerTxUs <= 0 || res.KVStore.CPUPerTxUs <= 0 {
				t.Errorf("ratio %v, CPU ratio %v (CPU per tx: ledger %v µs, kvstore %v µs)", res.Ratio, res.CPURatio, res.Ledger.CPUPerTxUs, res.KVStore.CPUPerTxUs)
			}
			t.Logf("%s: ledger %.0f tx/s, kvstore %.0f tx/s, ratio %.2f", mode, res.Ledger.TxPerS, res.KVStore.TxPerS, res.Ratio)
		})
	}
}

func TestOptionsSubmit(t *testing.T) {
	for _, c := range []struct {
		submit, want string
		submitters   int
		ok           bool
	}{
		{"", SubmitRPC, DefaultRPCSubmitters, true},
		{SubmitRPC, SubmitRPC, DefaultRPCSubmitters, true},
		{SubmitMempool, SubmitMempool, DefaultMempoolSubmitters, true},
		{"grpc", "grpc", DefaultMempoolSubmitters, false},
	} {
		o := Options{Submit: c.submit}
		err := o.Validate()
		if (err == nil) != c.ok {
			t.Errorf("submit %q: error %v, want ok %v", c.submit, err, c.ok)
		}
		if o.Submit != c.want || o.Submitters != c.submitters {
			t.Errorf("submit %q: got %q with %d submitters, want %q with %d", c.submit, o.Submit, o.Submitters, c.want, c.submitters)
		}
	}
}

func TestKVStoreTxsMatchSizes(t *testing.T) {
	w := NewWorkload(7)
	txs := w.Txs(benchChainID, 0, 300)
	kv, err := KVStoreTxs(txs)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range txs {
		if len(kv[i]) != len(txs[i]) {
			t.Fatalf("tx %d: kvstore %d bytes, ledger %d", i, len(kv[i]), len(txs[i]))
		}
		if seen[string(kv[i])] {
			t.Fatalf("duplicate kvstore tx %q", kv[i])
		}
		seen[string(kv[i])] = true
	}
}

// BenchmarkLedgerVsKVStore is `gpunet bench ledger` as a Go benchmark:
// each iteration runs both phases. Set the load with -bench.txs,
// -bench.blocktime and -bench.submit.
func BenchmarkLedgerVsKVStore(b *testing.B) {
	var ledgerRate, kvRate, ratio, p50, p99 float64
	for i := 0; i < b.N; i++ {
		res, err := Run(b.Context(), Options{Txs: *flagTxs, BlockTime: *flagBlockTime, Submit: *flagSubmit})
		if err != nil {
			b.Fatal(err)
		}
		if res.Ledger.Rejected != 0 || res.Ledger.Failed != 0 {
			b.Fatalf("ledger: %d rejected, %d failed; first: %s", res.Ledger.Rejected, res.Ledger.Failed, res.Ledger.FirstError)
		}
		ledgerRate += res.Ledger.TxPerS
		kvRate += res.KVStore.TxPerS
		ratio += res.Ratio
		p50 += res.Ledger.LatencyP50Ms
		p99 += res.Ledger.LatencyP99Ms
	}
	n := float64(b.N)
	b.ReportMetric(ledgerRate/n, "ledger-tx/s")
	b.ReportMetric(kvRate/n, "kvstore-tx/s")
	b.ReportMetric(ratio/n, "ratio")
	b.ReportMetric(p50/n, "ledger-p50-ms")
	b.ReportMetric(p99/n, "ledger-p99-ms")
	b.ReportMetric(0, "ns/op")
}

const deliverBlockTxs = 1000

// verifiers are the signature checks the ledger benchmarks run with:
// ed25519.Verify itself, or none at all, as for a tx whose signature
// abciapp's cache already holds; "prepared" has the txs decoded and
// verified ahead (ledger.Prepare, timer stopped) into a ledger.TxCache and
// hands them to the check or the block (CheckPrepared, DeliverPrepared),
// as abciapp's CheckTx and FinalizeBlock do (issue 36).
var verifiers = []struct {
	name     string
	verify   ledger.Verifier
	prepared bool
}{
	{"verify", nil, false},
	{"cached", func(ed25519.PublicKey, []byte, []byte) bool { return true }, false},
	{"prepared", nil, true},
}

// prepare decodes and verifies txs into l's cache, when prepared says so,
// and returns what Ledger.Prepare made of each.
func prepare(l *ledger.Ledger, prepared bool, txs [][]byte) []ledger.PreparedTx {
	if !prepared {
		return nil
	}
	pre := make([]ledger.PreparedTx, len(txs))
	for i, tx := range txs {
		pre[i] = l.Prepare(tx)
	}
	return pre
}

// BenchmarkDeliverTx applies blocks of 1000 pre-signed transfers from 200
// senders to an in-memory state with the ledger alone: no CometBFT, no disk.
// "verify" checks every signature as DeliverTx does by itself; "cached"
// models abciapp's signature cache, which DeliverTx hits for txs CheckTx
// already verified. Signing happens with the timer stopped.
func BenchmarkDeliverTx(b *testing.B) {
	for _, bc := range verifiers {
		b.Run(bc.name, func(b *testing.B) {
			w := NewWorkload(DefaultSenders)
			kv := ledger.NewMemKV()
			l := ledger.Ledger{Verify: bc.verify}
			if bc.prepared {
				l.Txs = lt.NewTxMemo()
			}
			changes, _, err := l.InitGenesis(kv, benchChainID, w.Genesis())
			if err != nil {
				b.Fatal(err)
			}
			kv.Apply(changes)
			var cpu cpuTimer
			b.ReportAllocs()
			b.ResetTimer()
			for h := 1; h <= b.N; h++ {
				b.StopTimer()
				txs := w.Txs(benchChainID, (h-1)*deliverBlockTxs, deliverBlockTxs)
				// "prepared" delivers the txs Ledger.Prepare made (before
				// the timer), as abciapp's FinalizeBlock does.
				pre := prepare(&l, bc.prepared, txs)
				b.StartTimer()
				cpu.start()
				blk := l.BeginBlock(kv, ledger.BlockInfo{Height: int64(h), Time: time.Unix(1_700_000_000+int64(h), 0)})
				for i, tx := range txs {
					var r ledger.TxResult
					if bc.prepared {
						r = blk.DeliverPrepared(pre[i])
					} else {
						r = blk.DeliverTx(tx)
					}
					if r.Err != nil {
						b.Fatalf("block %d tx %d: %v", h, i, r.Err)
					}
				}
				changes, _, err := blk.End()
				if err != nil {
					b.Fatal(err)
				}
				kv.Apply(changes)
				cpu.stop()
			}
			b.ReportMetric(float64(b.N*deliverBlockTxs)/b.Elapsed().Seconds(), "tx/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*deliverBlockTxs), "ns/tx")
			b.ReportMetric(float64(cpu.total.Nanoseconds())/float64(b.N*deliverBlockTxs), "cpu-ns/tx")
		})
	}
}

// BenchmarkCheckTx admits pre-signed transfers to a mempool state with the
// ledger alone, through a ledger.TxChecker as abciapp does: the cost
// CometBFT pays for each new tx before it can enter a block. "verify"
// checks every signature, as a CheckTx without abciapp's cache would;
// "cached" leaves out the signature check, as abciapp's rechecks do;
// "prepared" is abciapp's CheckTx under its lock: the tx decoded and
// verified before it (Ledger.Prepare) and handed to the check.
func BenchmarkCheckTx(b *testing.B) {
	for _, bc := range verifiers {
		b.Run(bc.name, func(b *testing.B) {
			w := NewWorkload(DefaultSenders)
			kv := ledger.NewMemKV()
			l := ledger.Ledger{Verify: bc.verify}
			if bc.prepared {
				l.Txs = lt.NewTxMemo()
			}
			changes, _, err := l.InitGenesis(kv, benchChainID, w.Genesis())
			if err != nil {
				b.Fatal(err)
			}
			kv.Apply(changes)
			chk := l.NewTxChecker(ledger.NewOverlay(kv))
			var cpu cpuTimer
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n += deliverBlockTxs {
				b.StopTimer()
				txs := w.Txs(benchChainID, n, min(deliverBlockTxs, b.N-n))
				// "prepared" hands each check the tx Ledger.Prepare made
				// (before the timer), as abciapp's CheckTx does.
				pre := prepare(&l, bc.prepared, txs)
				b.StartTimer()
				cpu.start()
				for i, tx := range txs {
					var r ledger.TxResult
					if bc.prepared {
						r = chk.CheckPrepared(pre[i])
					} else {
						r = chk.Check(tx)
					}
					if r.Err != nil {
						b.Fatalf("tx %d: %v", n+i, r.Err)
					}
				}
				cpu.stop()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
			b.ReportMetric(float64(cpu.total.Nanoseconds())/float64(b.N), "cpu-ns/tx")
		})
	}
}

// cpuTimer adds up the process's CPU time over the timed parts of a
// benchmark: on a machine other jobs share, a single-goroutine benchmark's
// CPU time per tx moves far less with their load than its wall time does.
type cpuTimer struct {
	total, at time.Duration
}

func (c *cpuTimer) start() { c.at = measure.ProcessCPU() }
func (c *cpuTimer) stop()  { c.total += measure.ProcessCPU() - c.at }
