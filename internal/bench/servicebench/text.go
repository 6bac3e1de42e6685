package servicebench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText prints the result as people read it: each path's runs and
// median, then the median of each of its steps.
func (r *Result) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "service's first answer, %s blocks, heartbeats every %d s (dropped after %d s), readiness every %s; relay session before deploy: %v\n",
		fmtMs(r.BlockTimeMs), r.HeartbeatInterval, r.HeartbeatTimeout, fmtMs(r.ReadyIntervalMs), r.RelayBeforeDeploy)
	for _, p := range []struct {
		name string
		s    Summary
		runs []Path
	}{
		{"deploy → first 200 through node0", r.Deploy, r.Runs.Deploy},
		{"single replica killed → first 200 from its replacement", r.Failover, r.Runs.Failover},
		{"one of two replicas killed → first 200", r.RouteAround, r.Runs.RouteAround},
	} {
		if p.s.Runs == 0 {
			continue
		}
		fmt.Fprintf(tw, "\n%s: p50 %s, min %s, max %s (%d runs:", p.name, fmtMs(p.s.P50Ms), fmtMs(p.s.MinMs), fmtMs(p.s.MaxMs), p.s.Runs)
		for _, run := range p.runs {
			fmt.Fprintf(tw, " %s", fmtMs(run.TotalMs))
			if run.Failed > 0 {
				fmt.Fprintf(tw, " [%d failed]", run.Failed)
			}
		}
		fmt.Fprintln(tw, ")")
		for _, st := range p.s.StepsP50 {
			fmt.Fprintf(tw, "  %s\t%s\n", st.Name, fmtMs(st.Ms))
		}
	}
	return tw.Flush()
}
