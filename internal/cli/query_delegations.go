package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// queryDelegationsCmd is `gpunet query delegations ADDR`: an account's
// delegations, unbonding entries, redelegations and pending rewards.
func queryDelegationsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "delegations ADDR|KEY",
		Short: "Show an account's delegations (worth now, pending rewards), unbonding entries and redelegations",
		Args:  exactArgs("ADDR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := e.resolveAddress(args[0])
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			d, err := cl.Delegations(cmd.Context(), a)
			if err != nil {
				return err
			}
			names := e.names()
			return e.print(d, func(w io.Writer) { printDelegations(w, d, names) })
		},
	}
}

func printDelegations(w io.Writer, d *apiwire.DelegatorBody, names keyNames) {
	target := func(t ledger.Target) string { return t.Kind.String() + " " + names.addr(t.Address) }
	fmt.Fprintf(w, "delegator %s at height %d\n", names.addr(d.Delegator), d.Height)
	if len(d.Delegations)+len(d.Unbonding)+len(d.Redelegations) == 0 {
		fmt.Fprintf(w, "no delegations (delegate with `%s`)\n", hint("stake delegate TARGET AMOUNT --from KEY"))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(d.Delegations) > 0 {
		fmt.Fprintf(tw, "DELEGATED TO\tAMOUNT\tSHARES\tPENDING REWARDS\n")
		for _, x := range d.Delegations {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", target(x.Target), formatAmount(x.Amount), x.Shares, formatAmount(x.PendingRewards))
		}
		tw.Flush()
		fmt.Fprintf(w, "delegated %s; pending rewards %s (`%s` pays them)\n", formatAmount(d.Delegated), formatAmount(d.PendingRewards), hint("provider claim-rewards --from KEY"))
	}
	if len(d.Unbonding) > 0 {
		fmt.Fprintf(tw, "UNBONDING FROM\tBALANCE\tINITIAL\tSINCE HEIGHT\tBACK AT HEIGHT\n")
		for _, u := range d.Unbonding {
			for _, x := range u.Entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", target(u.Target), formatAmount(x.Balance), formatAmount(x.Initial), x.CreationHeight, x.CompletionHeight)
			}
		}
		tw.Flush()
		fmt.Fprintf(w, "unbonding %s\n", formatAmount(d.UnbondingTotal))
	}
	if len(d.Redelegations) > 0 {
		fmt.Fprintf(tw, "REDELEGATED FROM\tTO\tINITIAL\tSINCE HEIGHT\tSLASHABLE FOR THE SOURCE UNTIL\n")
		for _, r := range d.Redelegations {
			for _, x := range r.Entries {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", target(r.Source), target(r.Destination), formatAmount(x.Initial), x.CreationHeight, x.CompletionHeight)
			}
		}
		tw.Flush()
	}
}

// queryValidatorCmd is `gpunet query validator ADDR`: one validator, its
// bond, delegations, commission and power.
func queryValidatorCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "validator OPERATOR|KEY|CONSENSUS-ADDRESS",
		Short: "Show a validator: bond, delegated stake, commission, power, status, its delegations",
		Args:  exactArgs("ADDR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			given := args[0]
			if !isConsAddress(given) {
				a, err := e.resolveAddress(given)
				if err != nil {
					return err
				}
				given = a.String()
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			v, err := cl.Validator(cmd.Context(), given)
			if err != nil {
				return err
			}
			names := e.names()
			return e.print(v, func(w io.Writer) { printValidator(w, v, names) })
		},
	}
}

// isConsAddress reports whether s looks like a consensus address (40 hex
// digits) rather than an account address or key name.
func isConsAddress(s string) bool {
	var c ledger.ConsAddress
	return c.UnmarshalText([]byte(strings.ToUpper(s))) == nil
}

func printValidator(w io.Writer, v *apiwire.ValidatorBody, names keyNames) {
	fmt.Fprintf(w, "validator   %s %s\n", v.Address, strings.TrimSpace(v.Moniker))
	fmt.Fprintf(w, "operator    %s\n", names.addr(v.Operator))
	fmt.Fprintf(w, "status      %s\n", v.Status)
	fmt.Fprintf(w, "power       %d\n", v.Power)
	fmt.Fprintf(w, "bond        %s\n", formatAmount(v.Bond))
	fmt.Fprintf(w, "delegated   %s by %d delegator(s)\n", formatAmount(v.Delegated), len(v.Delegations))
	fmt.Fprintf(w, "total       %s\n", formatAmount(v.Total))
	fmt.Fprintf(w, "commission  %s\n", formatPPM(v.Pool.CommissionPPM))
	if v.Unbonding > 0 {
		fmt.Fprintf(w, "unbonding   %s\n", formatAmount(v.Unbonding))
	}
	if v.Slashed > 0 || v.Pool.Slashed > 0 {
		fmt.Fprintf(w, "slashed     %s of the bond, %s of its delegations\n", formatAmount(v.Slashed), formatAmount(v.Pool.Slashed))
	}
	if v.Jailed && !v.Tombstoned {
		fmt.Fprintf(w, "jailed until height %d\n", v.JailedUntil)
	}
	if len(v.Delegations) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "DELEGATOR\tAMOUNT\tSHARES\n")
		for _, d := range v.Delegations {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", names.addr(d.Delegator), formatAmount(d.Amount), d.Shares)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "height      %d\n", v.Height)
}
