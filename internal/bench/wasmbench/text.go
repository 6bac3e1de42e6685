package wasmbench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/sandbox"
)

// WriteText prints the result as `gpunet bench wasm` does.
func (r *Result) WriteText(w io.Writer) error {
	p := measure.NewReport(w)
	p.Printf("gpunet bench wasm  %s\n", r.Date.Format(time.RFC3339))
	p.Printf("kernel %s %v, %d reps each (medians), module %d bytes, GOMAXPROCS %d\nimage sha256 %s (the same in every variant)\n\n",
		r.Kernel, r.Args, r.Reps, r.ModuleBytes, r.GOMAXPROCS, r.Checksum)
	tw := p.Table()
	fmt.Fprintln(tw, "variant\tp50\tmin\tmax\t× native\tcompile (once)\t")
	for _, v := range r.Variants {
		compile := "-"
		if v.CompileMs > 0 {
			compile = fmt.Sprintf("%.0fms", v.CompileMs)
		}
		fmt.Fprintf(tw, "%s\t%.1fms\t%.1fms\t%.1fms\t%.2f\t%s\t\n", v.Name, v.P50Ms, v.MinMs, v.MaxMs, v.Ratio, compile)
	}
	tw.Flush()
	for _, v := range r.Variants {
		if v.Name == "executor" {
			p.Printf("executor: whole Run p50 %.1fms (instantiation, run, output collection)\n", v.WallP50Ms)
		}
	}
	if l := r.LLVM; l != nil && l.Skipped == "" {
		r.writeLLVM(p, l)
	} else {
		if l != nil {
			p.Printf("C kernel not measured: %s\n", l.Skipped)
		}
		p.Printf("target: executor <= %.1f× native %s (the target is stated for LLVM-compiled guests; this module is built by Go's compiler)\n",
			r.Target, measure.Verdict(r.MeetsTarget))
	}
	if r.IO != nil {
		r.IO.write(p)
	}
	return p.Err()
}

// write prints the I/O workload's table: native, then the executor on
// each engine, metered and whole Run.
func (o *IO) write(p *measure.Report) {
	if o.Skipped != "" {
		p.Printf("\nI/O workload not measured: %s\n", o.Skipped)
		return
	}
	p.Printf("\nI/O workload (examples/fileio %s): %d input files (%s) read, %d MiB written in %d files, %d B a write\n",
		strings.Join(o.Args, " "), o.Inputs, sandbox.FormatBytes(uint64(o.InputBytes)), o.MiB, o.Files, o.Record)
	tw := p.Table()
	fmt.Fprintln(tw, "variant\tp50\tmin\tmax\t× native\twhole Run p50\t× native\t")
	fmt.Fprintf(tw, "native\t%.1fms\t%.1fms\t%.1fms\t1.00\t-\t-\t\n", o.NativeP50Ms, o.NativeMinMs, o.NativeMaxMs)
	for _, e := range o.Engines {
		fmt.Fprintf(tw, "%s (metered)\t%.1fms\t%.1fms\t%.1fms\t%.2f\t%.1fms\t%.2f\t\n", e.Engine, e.MeteredP50Ms, e.MeteredMinMs, e.MeteredMaxMs, e.Ratio, e.WallP50Ms, e.WallRatio)
	}
	tw.Flush()
	engine := "default engine"
	if len(o.Engines) > 0 {
		engine = o.Engines[0].Engine
	}
	p.Printf("target: metered in the executor (%s) <= %.1f× native: %.2f× native, %s\n", engine, o.Target, o.Ratio, measure.Verdict(o.MeetsTarget))
}

// writeLLVM prints the C kernels' table (the executor on its default
// engine, and bare wazero) and the target, which is about their geometric
// mean on that engine and each kernel's ratio.
func (r *Result) writeLLVM(p *measure.Report, l *LLVM) {
	p.Printf("\nC kernels (%s, %s): native build (a process) against its wasm32-wasi module in the executor\n", l.Clang, l.Flags)
	tw := p.Table()
	fmt.Fprintln(tw, "kernel\targs\tnative p50\texecutor p50\t× native\t<= target\tbare wazero p50\t× native\t")
	for _, k := range l.Kernels {
		fmt.Fprintf(tw, "%s\t%s\t%.1fms\t%.1fms\t%.2f\t%s\t%.1fms\t%.2f\t\n", k.Name, strings.Join(k.Args, " "),
			k.NativeP50Ms, k.ExecutorP50Ms, k.Ratio, measure.Verdict(k.MeetsTarget), k.BareP50Ms, k.BareRatio)
	}
	tw.Flush()
	p.Printf("geometric mean %.2f× native\n", l.GeoMeanRatio)
	engine := "default engine"
	if len(l.Kernels) > 0 && len(l.Kernels[0].Engines) > 0 {
		engine = l.Kernels[0].Engines[0].Engine
	}
	worst := 0.0
	for _, k := range l.Kernels {
		worst = max(worst, k.Ratio)
	}
	p.Printf("target: C kernels in the executor (%s), geometric mean <= %.1f× native and each <= %.1f×: %.2f× native, the slowest %.2f×, %s\n",
		engine, r.Target, r.KernelTarget, l.GeoMeanRatio, worst, measure.Verdict(r.MeetsTarget))
}
