package bench

import (
	"testing"
)

// TestWasmSmall runs the wasm benchmark on a tiny image: every variant must
// produce the native image and get a positive time.
func TestWasmSmall(t *testing.T) {
	res, err := RunWasm(t.Context(), WasmOptions{Width: 64, Height: 48, MaxIter: 200, Reps: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Variants) != 4 || res.Variants[0].Name != "native" || res.Variants[0].Ratio != 1 {
		t.Fatalf("variants %+v", res.Variants)
	}
	for _, v := range res.Variants {
		if v.P50Ms <= 0 || v.Ratio <= 0 || v.MinMs > v.MaxMs {
			t.Errorf("implausible %+v", v)
		}
		t.Logf("%+v", v)
	}
}

// BenchmarkWasmVsNative is `gpunet bench wasm` at its defaults as a Go
// benchmark: each iteration is a whole run (all variants, 3 reps each).
func BenchmarkWasmVsNative(b *testing.B) {
	var ratio, bare, closing float64
	for range b.N {
		res, err := RunWasm(b.Context(), WasmOptions{Reps: 3})
		if err != nil {
			b.Fatal(err)
		}
		ratio += res.Variants[1].Ratio
		bare += res.Variants[2].Ratio
		closing += res.Variants[3].Ratio
	}
	n := float64(b.N)
	b.ReportMetric(ratio/n, "executor/native")
	b.ReportMetric(bare/n, "wazero/native")
	b.ReportMetric(closing/n, "wazero+close/native")
	b.ReportMetric(0, "ns/op")
}
