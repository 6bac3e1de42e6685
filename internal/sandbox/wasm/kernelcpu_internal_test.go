//go:build linux

package wasm

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/internal/sandbox/wasm/wasi"
)

// BenchmarkCKernelsCPU is the C kernels of `gpunet bench wasm` as CPU
// time rather than wall time: each engine's code, run in this process on
// one locked thread (its CPU time from RUSAGE_THREAD, instantiation and
// run), against the native build's CPU time as a process (clang, the
// benchmark's flags, -O2 -ffp-contract=off). CPU time moves far less than
// wall time with the load of a shared machine, so this tells the
// generated code's cost where `gpunet bench wasm`'s medians are noise.
// Each iteration runs every kernel once per engine; it reports each
// kernel's and the geometric mean's ratio of medians:
//
//	go test ./internal/sandbox/wasm -run '^$' -bench CKernelsCPU -benchtime 7x
func BenchmarkCKernelsCPU(b *testing.B) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		b.Skip("no clang")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// As in a sandbox process (child.go): no collections while a guest
	// runs on wazero, whose linear memory is on the Go heap.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	dir := b.TempDir()
	kernels := []struct {
		name      string
		src, mod  []byte
		args      []string
		native    []time.Duration
		perEngine map[string][]time.Duration
	}{
		{name: "mandelbrot", src: examples.MandelbrotCSource, mod: examples.MandelbrotCWASM, args: []string{"640", "480", "1000"}},
		{name: "sha256", src: examples.SHA256CSource, mod: examples.SHA256CWASM, args: []string{"8", "4"}},
		{name: "matmul", src: examples.MatmulCSource, mod: examples.MatmulCWASM, args: []string{"512", "8"}},
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range kernels {
		k := &kernels[i]
		k.perEngine = map[string][]time.Duration{}
		src := filepath.Join(dir, k.name+".c")
		if err := os.WriteFile(src, k.src, 0o644); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command(clang, "-O2", "-ffp-contract=off", "-o", filepath.Join(dir, k.name), src).CombinedOutput(); err != nil {
			b.Fatalf("clang %s: %v\n%s", k.name, err, out)
		}
	}
	b.ResetTimer()
	for range b.N {
		for i := range kernels {
			k := &kernels[i]
			cmd := exec.Command(filepath.Join(dir, k.name), append([]string{"-out", filepath.Join(dir, "out")}, k.args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%s native: %v\n%s", k.name, err, out)
			}
			k.native = append(k.native, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
			for _, name := range Engines() {
				prog, msg := engines[name].prepare(slices.Clone(k.mod), "", false)
				if msg != nil {
					b.Fatalf("%s on %s: %+v", k.name, name, msg)
				}
				sys, err := wasi.New(wasi.Config{Args: append([]string{argv0}, k.args...), Root: work, Deterministic: true})
				if err != nil {
					b.Fatal(err)
				}
				t0 := threadCPU()
				out := prog.run(sys, 1<<30, 0, func() {}, func(uint64) {})
				d := threadCPU() - t0
				sys.Close()
				if !out.exited || out.code != 0 {
					b.Fatalf("%s on %s: %+v", k.name, name, out)
				}
				k.perEngine[name] = append(k.perEngine[name], d)
			}
		}
	}
	b.StopTimer()
	for _, name := range Engines() {
		logSum := 0.0
		for _, k := range kernels {
			r := float64(median(k.perEngine[name])) / float64(median(k.native))
			b.ReportMetric(r, k.name+"-"+name+"/native")
			logSum += math.Log(r)
		}
		b.ReportMetric(math.Exp(logSum/float64(len(kernels))), "geomean-"+name+"/native")
	}
	b.ReportMetric(0, "ns/op")
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
