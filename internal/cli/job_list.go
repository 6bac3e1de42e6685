package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// jobStateList is the states job list --state takes.
var jobStateList = []string{ledger.JobQueued, ledger.JobAssigned, ledger.JobRunning, ledger.JobVerifying, ledger.JobSucceeded, ledger.JobFailed, ledger.JobCancelled}

func jobListCmd(e *env) *cobra.Command {
	var from, state string
	var limit int
	list := &cobra.Command{
		Use:   "list [--from KEY|ADDR] [--state STATE]",
		Short: "List jobs, newest first: a key's (--from), or everyone's; --state filters",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != "" && !slices.Contains(jobStateList, state) {
				return usageError{fmt.Errorf("--state %q: want one of %s", state, strings.Join(jobStateList, ", "))}
			}
			if limit < 1 || limit > 1000 {
				return usageError{fmt.Errorf("--limit %d: want 1 to 1000", limit)}
			}
			var owner *address.Address
			if from != "" {
				a, err := e.resolveAddress(from)
				if err != nil {
					return err
				}
				owner = &a
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			l, err := cl.ListJobs(cmd.Context(), owner, state, limit)
			if err != nil {
				return err
			}
			names := e.names()
			return e.print(l.Jobs, func(w io.Writer) {
				if len(l.Jobs) == 0 {
					fmt.Fprintln(w, "No jobs.")
					return
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tOWNER\tSTATE\tCOST\tREASON")
				for _, j := range l.Jobs {
					who := names.name(j.Owner)
					if who == "" {
						who = shortAddr(j.Owner)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Spec.Name, who, j.State, formatSync(j.Cost+j.Fee), j.Reason)
				}
				tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&from, "from", "", "list the jobs of this key or address (default: everyone's)")
	list.Flags().StringVar(&state, "state", "", "only jobs in this state: "+strings.Join(jobStateList, ", "))
	list.Flags().IntVar(&limit, "limit", 100, "at most this many jobs")
	return list
}
