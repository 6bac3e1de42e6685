package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

// cancelResult is job cancel's JSON: the job as the ledger settled it.
type cancelResult struct {
	*ledger.Job
	// Charged is what the cancel cost: the providers' pay and the fee.
	Charged uint64 `json:"charged"`
	// LogKept is where the job's log so far was kept, if it had one.
	LogKept string `json:"log_kept,omitempty"`
}

func jobCancelCmd(e *env) *cobra.Command {
	var from string
	cancel := &cobra.Command{
		Use:   "cancel ID [--from KEY]",
		Short: "Cancel a job: its providers are paid for the time they held or ran it, the rest of the escrow is refunded",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			jc, _, err := e.ownerClient(cmd.Context(), from, id, "cancel it")
			if err != nil {
				return err
			}
			j, err := jc.Cancel(cmd.Context(), id)
			if errors.Is(err, jobclient.ErrAlreadyDone) {
				return fmt.Errorf("job %d already %s; nothing to cancel (it cost %s, %s refunded)", j.ID, j.State, formatSync(j.Cost+j.Fee), formatSync(j.Refund))
			}
			if err != nil {
				return err
			}
			r := cancelResult{Job: j, Charged: j.Cost + j.Fee}
			if jc.SavedLog(id) != nil {
				r.LogKept = hint(fmt.Sprintf("job logs %d", id))
			}
			names := e.names()
			return e.print(r, func(w io.Writer) {
				fmt.Fprintf(w, "job %d cancelled: charged %s (%s to providers, %s fee), refunded %s\n", j.ID, formatSync(r.Charged), formatSync(j.Cost), formatSync(j.Fee), formatSync(j.Refund))
				for _, a := range j.Assignments {
					if a.Paid > 0 {
						fmt.Fprintf(w, "  %s was paid %s\n", names.addr(a.Provider), formatSync(a.Paid))
					}
				}
				if r.LogKept != "" {
					fmt.Fprintf(w, "its log so far is kept: %s\n", r.LogKept)
				}
			})
		},
	}
	ownerFlag(cancel, &from)
	return cancel
}
