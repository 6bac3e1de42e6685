package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/offers"
)

func offersCmd(e *env) *cobra.Command {
	var (
		sortKeys string
		all      bool
	)
	c := &cobra.Command{
		Use:   "offers [QUERY]",
		Short: "Search provider hardware, e.g. 'gpu=RTX_4090 count>=2 vram>=24 price<0.5 region=eu' -o price-",
		Long: `Search the providers that can take jobs now (online, staked).

QUERY is space-separated 'field op value' terms, all of which must hold.
Operators: < <= = != >= > in notin (lists: [a,b] or a,b).
-o sorts by fields, '-' after a field for descending: -o price  -o tops-,price

Fields:
` + fieldsHelp(),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := ""
			if len(args) == 1 {
				q = args[0]
			}
			// Parse here too, so a bad query is reported with its caret
			// without a round trip.
			if _, err := offers.Parse(q); err != nil {
				return usageError{err}
			}
			if _, err := offers.ParseSort(sortKeys); err != nil {
				return usageError{err}
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			list, err := cl.Offers(cmd.Context(), q, sortKeys, all)
			if err != nil {
				return err
			}
			return e.print(list, func(w io.Writer) { printOffers(w, list) })
		},
	}
	c.Flags().StringVarP(&sortKeys, "order", "o", "", "sort keys, e.g. price or tops-,price")
	c.Flags().BoolVar(&all, "all", false, "include providers that cannot take jobs now (offline or under-staked)")
	return c
}

func fieldsHelp() string {
	var b strings.Builder
	for _, f := range offers.Fields() {
		fmt.Fprintf(&b, "  %-12s %s\n", f.Name, f.Description)
	}
	return b.String()
}

func printOffers(w io.Writer, list []offers.Offer) {
	if len(list) == 0 {
		fmt.Fprintln(w, "No offers match.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tGPU\tN\tVRAM\tCPU\tRAM\tTOPS\tPRICE/h\tREGION\tREP\tUPTIME\tOK/BAD\tCHALLENGES\tEXECUTORS\tSTAKE")
	for _, o := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%d\t%.0f\t%.2f\t%.4f\t%s\t%.2f\t%.0f%%\t%d/%d\t%.0f%%\t%s\t%s\n",
			o.Address, o.GPU, o.Count, o.VRAM, o.CPU, o.RAM, o.TOPS, o.Price, o.Region, o.Reputation, 100*o.Uptime,
			o.Validated, o.Invalid, 100*o.ChallengePass, strings.Join(o.Executor, ","), formatSync(o.Stake))
	}
	tw.Flush()
}
