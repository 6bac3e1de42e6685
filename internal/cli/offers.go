package cli

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
)

func offersCmd(e *env) *cobra.Command {
	var (
		sortKeys string
		all      bool
	)
	c := &cobra.Command{
		Use:   "offers [QUERY]",
		Short: "Search provider hardware, e.g. 'gpu=RTX_4090 count>=2 vram>=24 price<0.5 region=eu tee=any' --sort price-",
		Long: `Search the providers that can take jobs now (online, staked).

QUERY is space-separated 'field op value' terms, all of which must hold.
Operators: < <= = != >= > in notin (lists: [a,b] or a,b).
--sort sorts by fields, '-' after a field for descending: --sort price
--sort tops-,price. --all also lists providers that cannot take jobs now,
with an ONLINE column. tee=tdx, tee=sev-snp or tee=any keeps providers
with a valid TEE attestation (the TEE column), tee=none those without.

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
			// Attested offers: what a trust: tee job pays at the index
			// in their classes, below the table.
			var markets []ledger.MarketInfo
			if slices.ContainsFunc(list, func(o offers.Offer) bool { return o.TEE != "" }) {
				m, err := cl.Market(cmd.Context(), "", 0)
				if err != nil {
					return err
				}
				markets = m.Classes
			}
			names := e.names()
			return e.print(list, func(w io.Writer) {
				printOffers(w, list, all, names)
				printTEEPrices(w, list, markets)
			})
		},
	}
	c.Flags().StringVar(&sortKeys, "sort", "", "sort keys, e.g. price or tops-,price")
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

// printOffers writes offers as a table; online adds the ONLINE column
// (offers --all, query providers: lists with providers that cannot take
// jobs now). Providers the keyring knows are named. When a provider in
// the list set a label, a LABEL column beside PROVIDER shows each in
// quotes (labelCell): the provider's own words, which any provider may
// copy, so the address stays beside it. A price is per unit and hour,
// and the cell says which unit: per GPU, or per core for a CPU-only
// provider (offers.Offer.Price).
func printOffers(w io.Writer, list []offers.Offer, online bool, names keyNames) {
	if len(list) == 0 {
		fmt.Fprintln(w, "No offers match.")
		return
	}
	labels := slices.ContainsFunc(list, func(o offers.Offer) bool { return o.Label != "" })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "PROVIDER\t"
	if labels {
		head += "LABEL\t"
	}
	if online {
		head += "ONLINE\t"
	}
	fmt.Fprintln(tw, head+"GPU\tN\tVRAM\tCPU\tRAM\tTOPS\tPRICE\tREGION\tTEE\tREP\tUPTIME\tOK/BAD\tCHALLENGES\tEXECUTORS\tSTAKE")
	for _, o := range list {
		who := o.Address
		if a, err := address.Parse(o.Address); err == nil && names.name(a) != "" {
			who = names.name(a)
		}
		fmt.Fprintf(tw, "%s\t", who)
		if labels {
			fmt.Fprintf(tw, "%s\t", labelCell(o.Label))
		}
		if online {
			fmt.Fprintf(tw, "%s\t", yesNo(o.Online))
		}
		gpu, n, vram, unit := o.GPU, strconv.Itoa(o.Count), formatGiB(o.VRAM), "GPU"
		if o.Count == 0 {
			gpu, n, vram, unit = "none (cpu)", "-", "-", "core"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s SYNC/"+unit+"/h\t%s\t%s\t%.2f\t%.0f%%\t%d/%d\t%.0f%%\t%s\t%s\n",
			gpu, n, vram, o.CPU, formatGiB(o.RAM), sig(o.TOPS), sig(o.Price), o.Region, orNone(o.TEE, "-"), o.Reputation, 100*o.Uptime,
			o.Validated, o.Invalid, 100*o.ChallengePass, strings.Join(o.Executor, ","), formatSync(o.Stake))
	}
	tw.Flush()
}

// printTEEPrices writes, for each class of the attested offers in list,
// what an on-demand job pays per unit-hour at the index: a trust: tee one
// (the larger of the class's plain and TEE indexes) and a plain one. A
// job pays at least its provider's ask (the PRICE column).
func printTEEPrices(w io.Writer, list []offers.Offer, markets []ledger.MarketInfo) {
	var classes []string
	for _, o := range list {
		if o.TEE != "" && !slices.Contains(classes, o.GPU) {
			classes = append(classes, o.GPU)
		}
	}
	slices.Sort(classes)
	onDemand := func(ps []ledger.TierPrice) uint64 {
		for _, tp := range ps {
			if tp.Tier == ledger.TierOnDemand {
				return tp.PricePerHour
			}
		}
		return 0
	}
	for _, c := range classes {
		i := slices.IndexFunc(markets, func(m ledger.MarketInfo) bool { return m.Class == c })
		if i < 0 {
			continue // no market record yet: the asks set the price
		}
		m := markets[i]
		plain, tee := onDemand(m.Prices), onDemand(m.Prices)
		if m.TEE != nil {
			tee = onDemand(m.TEE.Prices)
		}
		unit := "GPU"
		if c == ledger.CPUClass {
			unit = "core"
		}
		fmt.Fprintf(w, "%s at the index (on-demand): trust: tee %s/%s/h, plain %s/%s/h; a job pays at least its provider's ask\n",
			c, formatSync(tee), unit, formatSync(plain), unit)
	}
}

// labelCell writes a provider's label for a table or a line: quoted, as
// the provider's own words (strconv.Quote: anything unprintable, which
// the ledger refuses in a label, would show escaped, never raw), or "-"
// for none.
func labelCell(label string) string {
	if label == "" {
		return "-"
	}
	return strconv.Quote(label)
}

// sig writes x with three significant digits: 0.0123, 1.23, 45.6, 789,
// 12345 (never "0.00" for a small non-zero figure).
func sig(x float64) string {
	if math.Abs(x) >= 1000 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 3, 64), 64)
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// formatGiB writes a size in GiB with its unit: "24 GiB", "62.7 GiB".
func formatGiB(g float64) string {
	if g >= 100 || g == float64(int64(g)) {
		return fmt.Sprintf("%.0f GiB", g)
	}
	return fmt.Sprintf("%.1f GiB", g)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
