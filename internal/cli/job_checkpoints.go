package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
)

// printCheckpoints writes a checkpointing job's checkpoints (sequence,
// time, size, provider, seconds covered), where it resumes from, and the
// last thing the ledger said about them.
func printCheckpoints(w io.Writer, j *ledger.Job, names keyNames) {
	c := j.Spec.Checkpoint
	if c == nil {
		return
	}
	fmt.Fprintf(w, "checkpoint: %s every %s", c.Path, time.Duration(c.IntervalSeconds)*time.Second)
	if j.ResumeSeq != 0 {
		fmt.Fprintf(w, "; resumes from checkpoint %d (%ds of run kept)", j.ResumeSeq, j.Progress)
	}
	fmt.Fprintln(w)
	for _, k := range j.Checkpoints {
		fmt.Fprintf(w, "  #%-4d %s  %9s  %s  covers %ds\n", k.Seq, time.Unix(k.Time, 0).UTC().Format(time.DateTime), sandbox.FormatBytes(k.Size), names.addr(k.Provider), k.Covered)
	}
	if j.CheckpointNote != "" {
		fmt.Fprintf(w, "  note: %s\n", j.CheckpointNote)
	}
}
