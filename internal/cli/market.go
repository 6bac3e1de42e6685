package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/ledger"
)

// queryMarketCmd is gpunet query market: each class's price index,
// utilisation and tier prices over time (GET /v1/market).
func queryMarketCmd(e *env) *cobra.Command {
	var class string
	var history int
	c := &cobra.Command{
		Use:   "market [--class C] [--history N]",
		Short: "Show each hardware class's price index, utilisation and tier prices, epoch by epoch, and the epoch's rewards",
		Long: `Per hardware class: the price index (usync per unit-hour: a GPU for a GPU
class, a core for cpu), the utilisation of the last closed epoch and its
smoothed value, the units offered and reserved now, and what each tier pays
at the index (a job pays the larger of that and its provider's ask). Then
the last N closed epochs (--history, default 12), oldest first, and the
open epoch's demand and emission. A class with attested providers also has
a TEE market ("trust tee"): its own index over their units and trust: tee
work, and what a trust: tee job pays at the index (the larger of the two
indexes times its tier's factor).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			m, err := cl.Market(cmd.Context(), class, history)
			if err != nil {
				return err
			}
			return e.print(m, func(w io.Writer) {
				fmt.Fprintf(w, "epoch %d (since height %d, %d blocks each), target utilisation %s\n", m.Epoch.Number, m.Epoch.StartHeight, m.EpochBlocks, pct(m.TargetPPM))
				if len(m.Classes) == 0 {
					fmt.Fprintln(w, "no class has offers yet")
				}
				for _, c := range m.Classes {
					var prices []string
					for _, tp := range c.Prices {
						prices = append(prices, fmt.Sprintf("%s %s/h", tp.Tier, formatSync(tp.PricePerHour)))
					}
					fmt.Fprintf(w, "\n%s: index %s/unit-h, utilisation %s (smoothed %s), %d of %d units reserved now\n  at the index: %s\n",
						c.Class, formatSync(c.Index), pct(c.UtilisationPPM), pct(c.EMAPPM), c.ReservedUnits, c.OfferedUnits, strings.Join(prices, ", "))
					for _, h := range c.History {
						fmt.Fprintf(w, "  epoch %-5d height %-8d utilisation %-7s smoothed %-7s index %s/unit-h\n", h.Epoch, h.Height, pct(h.UtilisationPPM), pct(h.EMAPPM), formatSync(h.IndexMicro/1_000_000))
					}
					if t := c.TEE; t != nil {
						var prices []string
						for _, tp := range t.Prices {
							prices = append(prices, fmt.Sprintf("%s %s/h", tp.Tier, formatSync(tp.PricePerHour)))
						}
						fmt.Fprintf(w, "  trust tee: index %s/unit-h, utilisation %s (smoothed %s), %d of %d attested units reserved now\n    a trust: tee job at the index: %s\n",
							formatSync(t.Index), pct(t.UtilisationPPM), pct(t.EMAPPM), t.ReservedUnits, t.OfferedUnits, strings.Join(prices, ", "))
						for _, h := range t.History {
							fmt.Fprintf(w, "    epoch %-5d height %-8d utilisation %-7s smoothed %-7s tee index %s/unit-h\n", h.Epoch, h.Height, pct(h.UtilisationPPM), pct(h.EMAPPM), formatSync(h.IndexMicro/1_000_000))
						}
					}
				}
				if r := m.Rewards; r != nil {
					fmt.Fprintf(w, "\nthis epoch: consumers paid providers %s and %s in fees; emission so far %s; reward pool %s; minted %s, burned %s in all\n",
						formatSync(r.Demand.Paid), formatSync(r.Demand.Fees), formatSync(r.Emission), formatSync(r.Pool), formatSync(r.Minted), formatSync(r.Burned))
				}
			})
		},
	}
	c.Flags().StringVar(&class, "class", "", "only this hardware class (e.g. RTX_4090, or cpu)")
	c.Flags().IntVar(&history, "history", 12, fmt.Sprintf("closed epochs to show per class (0 to %d)", ledger.MarketHistoryEpochs))
	return c
}

// pct formats parts per million as a percentage.
func pct(ppm uint64) string { return fmt.Sprintf("%.1f%%", float64(ppm)/10_000) }

// printQuoteTiers prints what each tier would pay now, and why.
func printQuoteTiers(w io.Writer, q *ledger.Quote) {
	for _, t := range q.Tiers {
		index := formatSync(t.Index)
		if t.TEEIndex > 0 {
			// trust: tee pays the larger of the class's two indexes.
			index = fmt.Sprintf("max(index %s, tee index %s)", formatSync(t.Index), formatSync(t.TEEIndex))
		}
		why := fmt.Sprintf("the ask %s/h is above the index %s/unit-h × %s", formatSync(t.Ask), index, factor(t.FactorPPM))
		if t.Why == "index" {
			why = fmt.Sprintf("index %s/unit-h × %s = %s/h", index, factor(t.FactorPPM), formatSync(t.Market))
			if t.Ask > 0 {
				why += fmt.Sprintf(", above the ask %s/h", formatSync(t.Ask))
			}
		}
		fmt.Fprintf(w, "  %-9s %s/h  (%s: %s)\n", t.Tier, formatSync(t.PricePerHour), t.Class, why)
	}
}

func factor(ppm uint64) string { return fmt.Sprintf("%.2f", float64(ppm)/1_000_000) }
