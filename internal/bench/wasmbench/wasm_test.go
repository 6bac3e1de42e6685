package wasmbench

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// requireClang skips without clang, except with CI=true, where .ci/run
// installs it and its absence fails the test.
func requireClang(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("clang"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no clang to build the C kernels natively")
		}
		t.Skip("no clang to build the C kernels natively (apt-get install clang)")
	}
}

// TestWasmSmall runs the wasm benchmark on small inputs: every variant must
// produce the native output and get a positive time, and each C kernel's
// wasm module must write the same bytes as its native build (Run fails
// otherwise).
func TestWasmSmall(t *testing.T) {
	requireClang(t)
	res, err := Run(t.Context(), Options{
		Width: 64, Height: 48, MaxIter: 200, Reps: 2,
		CArgs: map[string][]string{"sha256": {"1", "2"}, "matmul": {"48", "2"}},
		IO:    IOOptions{Inputs: 20, InputKiB: 1, Files: 3, MiB: 2, Record: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Variants) != 3+len(wasm.Engines()) || res.Variants[0].Name != "native" || res.Variants[0].Ratio != 1 {
		t.Fatalf("variants %+v", res.Variants)
	}
	for _, v := range res.Variants {
		if v.P50Ms <= 0 || v.Ratio <= 0 || v.MinMs > v.MaxMs {
			t.Errorf("implausible %+v", v)
		}
		t.Logf("%+v", v)
	}
	l := res.LLVM
	if l == nil || l.Skipped != "" {
		t.Fatalf("C kernels not measured: %+v", l)
	}
	var names []string
	for _, k := range l.Kernels {
		names = append(names, k.Name)
		if k.NativeP50Ms <= 0 || k.ExecutorP50Ms <= 0 || k.Ratio <= 0 || k.OutputSHA256 == "" {
			t.Errorf("implausible %+v", k)
		}
		if len(k.Engines) != len(wasm.Engines()) || k.Engines[0].Engine != wasm.DefaultEngine {
			t.Errorf("%s: engines %+v, want one for each of %v, the default first", k.Name, k.Engines, wasm.Engines())
		}
		for _, e := range k.Engines {
			if e.P50Ms <= 0 || e.Ratio <= 0 {
				t.Errorf("%s on %s: implausible %+v", k.Name, e.Engine, e)
			}
		}
		t.Logf("%+v", k)
	}
	if got, want := len(names), 3; got != want {
		t.Fatalf("kernels %v, want %d", names, want)
	}
	// The I/O workload: every engine's outputs were checked against the
	// native ones (Run fails otherwise); the digest counts what was read and
	// written.
	if io := res.IO; io == nil || io.Skipped != "" || len(io.Engines) != len(wasm.Engines()) || io.NativeP50Ms <= 0 || io.Ratio <= 0 {
		t.Errorf("I/O workload: %+v", res.IO)
	} else if f := strings.Fields(io.Digest); len(f) != 4 || f[1] != "20" || f[2] != "20480" || f[3] != "2097152" {
		t.Errorf("I/O digest %q, want 20 inputs, 20480 bytes read and 2 MiB written", io.Digest)
	}
	if l.Kernels[0].OutputSHA256 != res.Checksum {
		t.Errorf("C mandelbrot image sha256 %s, the Go kernel's %s", l.Kernels[0].OutputSHA256, res.Checksum)
	}
	// The sha256 kernel's output is its digest in hex: check it against Go's
	// crypto/sha256 over the same stream, so that "native and wasm agree"
	// is not two builds of one bug.
	want := cSHA256Digest(1, 2) + "\n"
	if got := l.Kernels[1]; got.OutputSHA256 != hexSum([]byte(want)) {
		t.Errorf("sha256 kernel wrote a file with sha256 %s, want that of %q", got.OutputSHA256, want)
	}
}

// cSHA256Digest is what examples/sha256 computes, in Go: MIB MiB of its
// xorshift64 stream hashed ROUNDS times, each digest written over the
// buffer's first 32 bytes.
func cSHA256Digest(mib, rounds int) string {
	buf := make([]byte, mib<<20)
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < len(buf); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for j := range 8 {
			buf[i+j] = byte(x >> (8 * j))
		}
	}
	var sum [32]byte
	for range rounds {
		sum = sha256.Sum256(buf)
		copy(buf, sum[:])
	}
	return hex.EncodeToString(sum[:])
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// BenchmarkWasmVsNative is `gpunet bench wasm` at its defaults as a Go
// benchmark: each iteration is a whole run (all variants, 3 reps each).
// It reports each variant's ratio to native by name, and each C kernel's
// on the default engine with their geometric mean.
func BenchmarkWasmVsNative(b *testing.B) {
	ratios := map[string]float64{}
	for range b.N {
		res, err := Run(b.Context(), Options{Reps: 3})
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range res.Variants[1:] {
			ratios[v.Name] += v.Ratio
		}
		if res.LLVM != nil {
			for _, k := range res.LLVM.Kernels {
				ratios["C-"+k.Name] += k.Ratio
			}
			ratios["C-geomean"] += res.LLVM.GeoMeanRatio
		}
	}
	for name, r := range ratios {
		b.ReportMetric(r/float64(b.N), name+"/native")
	}
	b.ReportMetric(0, "ns/op")
}
