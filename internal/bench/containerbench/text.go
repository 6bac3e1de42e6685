package containerbench

import (
	"fmt"
	"io"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// WriteText prints the result as `gpunet bench container` does.
func (r *Result) WriteText(w io.Writer) error {
	p := measure.NewReport(w)
	p.Printf("gpunet bench container  %s\n", r.Date.Format(time.RFC3339))
	p.Printf("%s, GOMAXPROCS %d\n", r.Runtime, r.GOMAXPROCS)
	for _, l := range r.Capabilities[min(1, len(r.Capabilities)):] {
		p.Printf("  %s\n", l)
	}
	p.Println()
	s := r.Start
	tw := p.Table()
	fmt.Fprintln(tw, "start (cached rootfs)\truns\tfirst output p50\tp90\tmin\tmax\twhole Run p50\tmetered p50\t")
	fmt.Fprintf(tw, "probe program\t%d\t%.1fms\t%.1fms\t%.1fms\t%.1fms\t%.1fms\t%.1fms\t\n", s.Reps, s.FirstOutputP50Ms, s.FirstOutputP90Ms, s.FirstOutputMinMs, s.FirstOutputMaxMs, s.RunP50Ms, s.MeteredP50Ms)
	tw.Flush()
	p.Println()
	pl := r.Pull
	tw = p.Table()
	fmt.Fprintln(tw, "pull+unpack (loopback)\tpulls\tlayers\tfiles\tdownloaded\tunpacked\tp50\tMB/s downloaded\tMB/s unpacked\t")
	fmt.Fprintf(tw, "into an empty cache\t%d\t%d\t%d\t%.1f MB\t%.1f MB\t%.2fs\t%.1f\t%.1f\t\n", pl.Reps, pl.Layers, pl.Files, float64(pl.CompressedBytes)/1e6, float64(pl.UnpackedBytes)/1e6, pl.P50Seconds, pl.CompressedMBps, pl.UnpackedMBps)
	tw.Flush()
	p.Printf("\ntarget: start to first instruction <= %.0fms (median) %s\n", r.TargetMs, measure.Verdict(r.MeetsTarget))
	return p.Err()
}
