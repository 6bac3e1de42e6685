package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/jobspec"
)

func storageCmd(e *env) *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "Show what the node's blob gateway stores, how long it keeps finished jobs' data, and an account's usage against its quota",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var acct *address.Address
			if from != "" {
				a, err := e.resolveAddress(from)
				if err != nil {
					return err
				}
				acct = &a
			}
			st, err := cl.Storage(cmd.Context(), acct)
			if err != nil {
				return err
			}
			return e.print(st, func(w io.Writer) {
				fmt.Fprintf(w, "node stores:   %d blobs, %s\n", st.Blobs, jobspec.Bytes(st.Bytes))
				fmt.Fprintf(w, "largest blob:  %s\n", jobspec.Bytes(st.MaxBlobBytes))
				fmt.Fprintf(w, "retention:     a finished job's data %s; outputs %s after their owner fetched them\n",
					time.Duration(st.RetentionSeconds)*time.Second, time.Duration(st.FetchedGraceSeconds)*time.Second)
				fmt.Fprintf(w, "uploads no job names yet: %s of %s on this node", jobspec.Bytes(st.UnreferencedBytes), quotaText(st.UnreferencedMaxBytes, true))
				if st.USyncPerGiB > 0 {
					fmt.Fprintf(w, "; an account may keep 1 GiB for each %s it holds", jobspec.Amount(st.USyncPerGiB))
				}
				fmt.Fprintln(w)
				if a := st.Account; a != nil {
					fmt.Fprintf(w, "account:       %s\n", a.Address)
					fmt.Fprintf(w, "  uploads no job names yet: %s of %s, %d of %d blobs", jobspec.Bytes(a.Bytes), quotaText(a.QuotaBytes, true), a.Blobs, a.QuotaBlobs)
					if a.InFlight > 0 {
						fmt.Fprintf(w, " (%s arriving)", jobspec.Bytes(a.InFlight))
					}
					fmt.Fprintln(w)
					if st.USyncPerGiB > 0 {
						fmt.Fprintf(w, "  holds %s (balance, provider stake, escrow of its unfinished jobs)\n", jobspec.Amount(a.Held))
					}
				}
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "also show this key's or address's usage against its quota")
	return cmd
}

func quotaText(n int64, bytes bool) string {
	if n < 0 {
		return "unlimited"
	}
	if bytes {
		return jobspec.Bytes(n).String()
	}
	return fmt.Sprint(n)
}
