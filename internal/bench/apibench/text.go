package apibench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// WriteText prints the result as `gpunet bench api` does.
func (r *Result) WriteText(w io.Writer) error {
	p := measure.NewReport(w)
	p.Printf("gpunet bench api  %s  (GOMAXPROCS %d)\n", r.Date.Format(time.RFC3339), r.GOMAXPROCS)
	p.Printf("state: %d providers, %d jobs %v, built in %.0fs (%d blocks, %d txs); node start %.1fs, stats load %.1fs\n",
		r.Providers, r.Jobs, r.JobStates, r.SetupSeconds, r.StateBlocks, r.StateTxs, r.NodeStartSeconds, r.StatsLoadSeconds)
	p.Printf("load: %d single reads/s + %d list reads/s for %.0fs; the validator made %d blocks holding %d txs (%d transfers/s sent)\n\n",
		r.Rate, r.ListRate, r.DurationSeconds, r.Blocks, r.BlockTxs, r.TxRate)
	tw := p.Table()
	fmt.Fprintln(tw, "class\trequests\terrors\tachieved/s\tp50\tp90\tp99\tmax\t")
	for _, c := range []struct {
		name string
		c    Class
	}{{"single-object", r.Single}, {"lists", r.List}} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.2fms\t%.2fms\t%.2fms\t%.1fms\t\n", c.name, c.c.Requests, c.c.Errors, c.c.RatePerS, c.c.P50Ms, c.c.P90Ms, c.c.P99Ms, c.c.MaxMs)
	}
	tw.Flush()
	p.Println()
	tw = tabwriter.NewWriter(p, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "request\tn\tp50\tp99\tmax\t")
	for _, ep := range r.Endpoints {
		fmt.Fprintf(tw, "%s\t%d\t%.2fms\t%.2fms\t%.1fms\t\n", ep.Name, ep.N, ep.P50Ms, ep.P99Ms, ep.MaxMs)
	}
	tw.Flush()
	for _, e := range r.ErrorSamples {
		p.Printf("error: %s\n", e)
	}
	if r.MeetsSingle != nil {
		met := measure.Verdict
		p.Printf("\ntarget: single reads p99 <= %.0fms %s; lists p99 <= %.0fms %s\n", r.Target.SingleP99Ms, met(*r.MeetsSingle), r.Target.ListP99Ms, met(*r.MeetsList))
	}
	return p.Err()
}
