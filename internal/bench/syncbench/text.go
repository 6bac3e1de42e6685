package syncbench

import (
	"fmt"
	"io"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// WriteText prints the result as `gpunet bench statesync` does.
func (r *Result) WriteText(w io.Writer) error {
	p := measure.NewReport(w)
	p.Printf("gpunet bench statesync  %s  (GOMAXPROCS %d)\n", r.Date.Format(time.RFC3339), r.GOMAXPROCS)
	p.Printf("state: %d providers, %d jobs; at height %d after %d txs; %d keys, app hash %s\n\n", r.Providers, r.Jobs, r.Height, r.Txs, r.Keys, r.AppHash)
	tw := p.Table()
	fmt.Fprintln(tw, "phase\ttime\t\t")
	fmt.Fprintf(tw, "replay: the ledger executing every block (no signatures)\t%.1fs\tCPU %.1fs\t\n", r.BuildSeconds, r.BuildCPU)
	fmt.Fprintf(tw, "replay: + %d signatures at %.1fµs (extrapolated)\t%.1fs\t\n", r.Txs, r.SigVerifyUs, r.ReplaySeconds)
	fmt.Fprintf(tw, "snapshot: the Commit that starts it\t%.1fms\t\n", r.CommitMs)
	fmt.Fprintf(tw, "snapshot: written in the background (%d chunks, %.1f MiB)\t%.1fs\t\n", r.Chunks, float64(r.SnapshotBytes)/(1<<20), r.SnapshotSeconds)
	fmt.Fprintf(tw, "restore: loading the chunks on the source\t%.1fs\t\n", r.LoadSeconds)
	fmt.Fprintf(tw, "restore: applying the chunks but the last\t%.1fs\t\n", r.ApplySeconds)
	fmt.Fprintf(tw, "restore: the last chunk, app hash and invariant checks\t%.1fs\t\n", r.VerifySeconds)
	fmt.Fprintf(tw, "restore: in all (offer, load, apply, verify)\t%.1fs\tCPU %.1fs\t\n", r.RestoreSeconds, r.RestoreCPU)
	tw.Flush()
	p.Printf("\nstate sync restores %.1f× faster than replay (%.1f× faster than the ledger alone replaying without signatures; %.1f× in CPU time)\n", r.Speedup, r.SpeedupLedgerOnly, r.SpeedupCPU)
	p.Printf("not counted: CometBFT's snapshot discovery (5 s), light client checks, and sending %.1f MiB over the network\n", float64(r.SnapshotBytes)/(1<<20))
	return p.Err()
}
