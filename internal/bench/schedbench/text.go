package schedbench

import (
	"fmt"
	"io"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// WriteText prints the result as `gpunet bench scheduler` does.
func (r *Result) WriteText(w io.Writer) error {
	p := measure.NewReport(w)
	p.Printf("gpunet bench scheduler  %s\n", r.Date.Format(time.RFC3339))
	p.Printf("store %s, %d jobs in blocks of %d, %d one-job blocks, %d consumers, seed %d, GOMAXPROCS %d\n\n",
		r.Store, r.Jobs, r.BlockJobs, r.LatencyJobs, r.Consumers, r.Seed, r.GOMAXPROCS)
	tw := p.Table()
	fmt.Fprintln(tw, "providers\tstate keys\tsetup\tplaced\tplacements/s\tw/o hash\trecords read/job\tEnd/block p50\tone-job End mean\tp50\tp90\tp99\tmax\tempty End\thash p50\t")
	for _, s := range r.Sizes {
		fmt.Fprintf(tw, "%d\t%d\t%.1fs\t%d/%d\t%.0f\t%.0f\t%.0f\t%.1fms\t%.0fµs\t%.0fµs\t%.0fµs\t%.0fµs\t%.0fµs\t%.0fµs\t%.0fµs\t\n",
			s.Providers, s.StateKeys, s.SetupSeconds, s.Placed, s.Submitted, s.PlacementsPerS, s.SchedulerPerS, s.ProviderReadsPerJob, s.EndP50Ms,
			s.LatencyMeanUs, s.LatencyP50Us, s.LatencyP90Us, s.LatencyP99Us, s.LatencyMaxUs, s.EmptyEndP50Us, s.LatencyHashP50Us)
	}
	tw.Flush()
	for _, s := range r.Sizes {
		if s.Duplicates > 0 {
			p.Printf("%d providers: %d placements of jobs already placed in the same block (ledger bug): figures suspect\n", s.Providers, s.Duplicates)
		}
	}
	if len(r.Sizes) > 1 {
		p.Printf("\nplacements/s, largest count over smallest: %.2f\n", r.RatioLargestToSmallest)
	}
	if r.MeetsPlacementsPerS != nil {
		met := measure.Verdict
		p.Printf("target at %d providers: >= %.0f placements/s %s; p99 <= %.0fµs %s",
			r.Target.Providers, r.Target.PlacementsPerS, met(*r.MeetsPlacementsPerS), r.Target.P99Us, met(*r.MeetsP99))
		if r.MeetsRatio != nil {
			p.Printf("; >= %.1f × the smallest count's rate %s", r.Target.Ratio, met(*r.MeetsRatio))
		}
		p.Println()
	}
	return p.Err()
}
