package cli

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/ledger"
)

func jobWaitCmd(e *env) *cobra.Command {
	var from string
	var poll time.Duration
	wait := &cobra.Command{
		Use:   "wait ID [--from KEY]",
		Short: "Wait for a job to end (granting its key when due) and exit with its outcome",
		Long: `Wait until job ID ends, granting its key to the providers the ledger assigns
(as job run does), print how it ended, and exit with its outcome:

  0  succeeded
  4  failed
  5  cancelled
  1  the job could not be followed (node unreachable, no such job); 2 a wrong call`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			jc, _, err := e.ownerClient(cmd.Context(), from, id, "grant its key")
			if err != nil && from != "" {
				return err
			}
			var j *ledger.Job
			if err == nil {
				j, err = jc.Follow(cmd.Context(), id, poll, nil)
			} else {
				// Not the owner's home: follow without granting.
				j, err = e.followOnly(cmd.Context(), id, poll)
			}
			if err != nil {
				return err
			}
			names := e.names()
			if err := e.print(j, func(w io.Writer) { printJob(w, j, nil, names) }); err != nil {
				return err
			}
			return outcome(j)
		},
	}
	ownerFlag(wait, &from)
	wait.Flags().DurationVar(&poll, "poll", 250*time.Millisecond, "how often to look at the job")
	return wait
}

// followOnly polls job id until it ends, granting nothing.
func (e *env) followOnly(ctx context.Context, id uint64, poll time.Duration) (*ledger.Job, error) {
	cl, err := e.client()
	if err != nil {
		return nil, err
	}
	for {
		j, err := cl.Job(ctx, id)
		if err != nil || j.Done() {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(poll):
		}
	}
}
