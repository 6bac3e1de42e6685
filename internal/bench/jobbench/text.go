package jobbench

import (
	"fmt"
	"io"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// WriteText prints the result as `gpunet bench job` does.
func (r *Result) WriteText(w io.Writer) error {
	met := measure.Verdict
	p := measure.NewReport(w)
	p.Printf("gpunet bench job  %s\n", r.Date.Format(time.RFC3339))
	p.Printf("devnet: block time %s, %d providers, poll %s, verification %s, no-op module of %d bytes, GOMAXPROCS %d (setup %.1fs)\n",
		r.BlockTime, r.Providers, r.Poll, r.Verification, r.ModuleBytes, r.GOMAXPROCS, r.SetupSeconds)
	if r.SerialSubmit {
		p.Println("sustained phase: submissions serialised, one per block")
	}
	p.Println()
	phases := []struct {
		name string
		ph   Phase
	}{{"warm-up", r.Warmup}, {"latency", r.Latency}, {"sustained", r.Sustained}}
	tw := p.Table()
	fmt.Fprintln(tw, "phase\tconsumers\tsucceeded\tjobs/s\tp50\tp90\tp99\tmax\tblocks p50\tmax\tsubmit p50\tseen p50\tcpu\t")
	for _, x := range phases {
		if x.ph.Jobs == 0 {
			continue
		}
		rate := "-"
		if x.ph.JobsPerS > 0 {
			rate = fmt.Sprintf("%.2f", x.ph.JobsPerS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%s\t%.0fms\t%.0fms\t%.0fms\t%.0fms\t%d\t%d\t%.0fms\t%.0fms\t%.2f\t\n",
			x.name, x.ph.Concurrency, x.ph.Succeeded, x.ph.Jobs, rate, x.ph.P50Ms, x.ph.P90Ms, x.ph.P99Ms, x.ph.MaxMs,
			x.ph.BlocksP50, x.ph.BlocksMax, x.ph.SubmitP50Ms, x.ph.ObservedP50Ms, x.ph.CPUCores)
	}
	tw.Flush()
	for _, x := range phases {
		if x.ph.Failed > 0 || x.ph.MultiAssigned > 0 {
			p.Printf("%s: %d failed, %d placed on more providers than planned; first: %s\n", x.name, x.ph.Failed, x.ph.MultiAssigned, x.ph.FirstError)
		}
	}
	p.Printf("\ntarget (at %s blocks): <= %d blocks %s; p50 <= %.0fms %s\n",
		r.Target.BlockTime, r.Target.Blocks, met(r.MeetsBlocks), r.Target.P50Ms, met(r.MeetsP50))
	if r.BlockTime != r.Target.BlockTime {
		p.Printf("(this run's blocks are %s: the verdict is for the target's figures, not its block time)\n", r.BlockTime)
	}
	if r.Dir != "" {
		p.Printf("devnet home kept in %s\n", r.Dir)
	}
	return p.Err()
}
