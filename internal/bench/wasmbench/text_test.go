package wasmbench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestWriteTextTarget checks that the target line says what is checked:
// the C kernels' geometric mean on the default engine against Target and
// each kernel against KernelTarget, with the figures.
func TestWriteTextTarget(t *testing.T) {
	for _, tc := range []struct {
		geomean, kernel float64
		want            string
	}{
		{1.01, 1.2, "target: C kernels in the executor (wasmtime), geometric mean <= 1.1× native and each <= 1.3×: 1.01× native, the slowest 1.20×, met\n"},
		{1.01, 1.8, "target: C kernels in the executor (wasmtime), geometric mean <= 1.1× native and each <= 1.3×: 1.01× native, the slowest 1.80×, NOT met\n"},
		{1.35, 1.2, "target: C kernels in the executor (wasmtime), geometric mean <= 1.1× native and each <= 1.3×: 1.35× native, the slowest 1.20×, NOT met\n"},
	} {
		k := Kernel{Name: "matmul", Args: []string{"48", "2"}, NativeP50Ms: 1, ExecutorP50Ms: tc.kernel, Ratio: tc.kernel,
			MeetsTarget: tc.kernel <= KernelTarget, Engines: []KernelEngine{{Engine: "wasmtime", P50Ms: tc.kernel, Ratio: tc.kernel}}}
		r := &Result{
			Date: time.Date(2026, 11, 26, 10, 41, 0, 0, time.UTC), Kernel: "mandelbrot", Args: []string{"64", "48", "200"}, Reps: 2,
			Variants: []Variant{{Name: "native", P50Ms: 1, MinMs: 1, MaxMs: 1, Ratio: 1}, {Name: "executor", P50Ms: 2, MinMs: 2, MaxMs: 2, Ratio: 2, CompileMs: 100, WallP50Ms: 5}},
			Target:   Target, KernelTarget: KernelTarget, MeetsTarget: tc.geomean <= Target && k.MeetsTarget,
			LLVM: &LLVM{Clang: "clang 14", Flags: "-O2", GeoMeanRatio: tc.geomean, Kernels: []Kernel{k}},
		}
		var b bytes.Buffer
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		text := b.String()
		if !strings.HasSuffix(text, tc.want) {
			t.Errorf("geomean %.2f, kernel %.2f: text ends\n%s\nwant it to end with %q", tc.geomean, tc.kernel, text[strings.LastIndex(text[:len(text)-1], "\n")+1:], tc.want)
		}
		if strings.Contains(text, "every LLVM-compiled guest") {
			t.Errorf("geomean %.2f: text still says every guest is held to the target:\n%s", tc.geomean, text)
		}
	}
}

func TestValidate(t *testing.T) {
	var o Options
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.IO.MiB != DefaultIOMiB || o.IO.Inputs != DefaultIOInputs || o.IO.Record != DefaultIORecord {
		t.Errorf("I/O defaults %+v", o.IO)
	}
	if got, want := o.args(), []string{"640", "480", "1000"}; strings.Join(got, " ") != strings.Join(want, " ") || o.Reps != DefaultReps || o.Module == nil {
		t.Errorf("defaults: args %v reps %d module %d bytes, want %v, %d and the example's", got, o.Reps, len(o.Module), want, DefaultReps)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Width: -1}, "width"},
		{Options{MaxIter: 1 << 16}, "maxiter"},
		{Options{Width: 1 << 14, Height: 1 << 14}, "64 Mpixel"},
		{Options{Reps: 1001}, "reps 1001"},
		{Options{Reps: -1}, "reps -1"},
		{Options{IO: IOOptions{Record: 1 << 21}}, "io record"},
		{Options{IO: IOOptions{MiB: -5}}, "io size -5"},
	} {
		err := tc.o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %q", tc.o, err, tc.want)
		}
	}
}

// TestWriteTextIO: the I/O workload's table shows native and each engine,
// and its own target line.
func TestWriteTextIO(t *testing.T) {
	r := &Result{
		Date: time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC), Kernel: "mandelbrot", Args: []string{"64", "48", "200"}, Reps: 2, Target: Target,
		Variants: []Variant{{Name: "native", P50Ms: 1, MinMs: 1, MaxMs: 1, Ratio: 1}},
		IO: &IO{Inputs: 3000, InputBytes: 3000 << 12, Files: 8, MiB: 512, Record: 4096, Args: []string{"8", "512", "4096"},
			NativeP50Ms: 400, NativeMinMs: 380, NativeMaxMs: 500, Ratio: 1.3, Target: IOTarget, MeetsTarget: true,
			Engines: []IOEngine{{Engine: "wasmtime", MeteredP50Ms: 520, Ratio: 1.3, WallP50Ms: 900, WallRatio: 2.25}, {Engine: "wazero", MeteredP50Ms: 600, Ratio: 1.5}}},
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{"3000 input files", "512 MiB written in 8 files, 4096 B a write", "wasmtime (metered)", "wazero (metered)",
		"target: metered in the executor (wasmtime) <= 1.5× native: 1.30× native, met\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("text has no %q:\n%s", want, text)
		}
	}
}
