package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

func quoteCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "quote SPEC.yaml|-",
		Short: "How many providers can run a job now, what it would cost, or why nobody can (- reads the spec from stdin)",
		Args:  exactArgs("SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadSpec(cmd, args[0])
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			ls := jobclient.QuoteSpec(s)
			q, err := cl.Quote(cmd.Context(), &ls)
			if err != nil {
				return err
			}
			names := e.names()
			out := quoteView{Quote: q}
			if q.Code != "" {
				// It would wait: name the providers passed over for their
				// stake, and how to fix each.
				if out.UnderStaked, out.underStakedCount, err = underStaked(cmd.Context(), cl, names); err != nil {
					return err
				}
			}
			return e.print(out, func(w io.Writer) {
				if ls.Trust == ledger.TrustTEE {
					// Matching counts attested providers only (the
					// block time of the state quoted).
					fmt.Fprintf(w, "%d attested provider(s) can run %q now (trust: tee: only providers with valid TEE attestation%s)\n", q.Matching, s.Name, pinned(ls.TEEMeasurements))
				} else {
					fmt.Fprintf(w, "%d provider(s) can run %q now\n", q.Matching, s.Name)
				}
				if q.Nodes > 1 {
					fmt.Fprintf(w, "a gang of %d members (each on its own provider, all in one region): %d such gang(s) fit now\n", q.Nodes, q.Gangs)
				}
				if q.Reason != "" {
					fmt.Fprintf(w, "it would wait: %s\n", q.Reason)
					printStakeFixes(w, out.UnderStaked, out.underStakedCount, names)
				} else {
					what := "replica"
					if q.Nodes > 1 {
						what = "member"
					}
					fmt.Fprintf(w, "price: %s/h per %s (%d %s(s)); at most %s if it runs its full %s\n",
						formatSync(q.PricePerHour), what, q.Replicas, what, formatSync(q.MaxCost), time.Duration(s.Timeout))
				}
				fmt.Fprintf(w, "submitting locks %s in escrow (max price × timeout × replicas + fee); unused escrow is refunded\n", formatSync(q.Escrow))
				if len(q.Tiers) > 0 {
					fmt.Fprintf(w, "each tier now (a job pays the larger of its provider's ask and the class's index × the tier's factor; this spec is %s):\n", ls.TierName())
					printQuoteTiers(w, q)
				}
				for _, b := range q.Best {
					fmt.Fprintf(w, "  %s  %s/h  score %d\n", names.addr(b.Provider), formatSync(b.PricePerHour), b.Score)
				}
			})
		},
	}
}

// quoteView is a quote as quote shows it: the ledger's, and the providers
// under-staked when the job would wait.
type quoteView struct {
	*ledger.Quote
	UnderStaked      []stakeFix `json:"under_staked,omitempty"`
	underStakedCount int
}

// pinned says which measurements a trust: tee spec pins, if any.
func pinned(ms []string) string {
	switch len(ms) {
	case 0:
		return ""
	case 1:
		return ", of measurement " + ms[0]
	}
	return fmt.Sprintf(", of one of %d measurements", len(ms))
}
