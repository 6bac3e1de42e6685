package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/ledger"
)

func stakeCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "stake",
		Short: "Bond or unbond a provider's stake (the agent keeps the minimum bonded by itself)",
	}
	var from string
	add := &cobra.Command{
		Use:   "add AMOUNT [--from KEY]",
		Short: "Bond AMOUNT of KEY's balance as provider stake",
		Args:  exactArgs("AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := parseAmount(args[0])
			if err != nil {
				return usageError{err}
			}
			return e.sendMsg(cmd, from, 0, &ledger.MsgStake{Amount: ledger.Amount(amt)})
		},
	}
	unbond := &cobra.Command{
		Use:   "unbond AMOUNT [--from KEY]",
		Short: "Start unbonding AMOUNT of KEY's stake; it returns to the balance after the unbonding period",
		Args:  exactArgs("AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := parseAmount(args[0])
			if err != nil {
				return usageError{err}
			}
			return e.sendMsg(cmd, from, 0, &ledger.MsgUnstake{Amount: ledger.Amount(amt)})
		},
	}
	for _, sub := range []*cobra.Command{add, unbond} {
		sub.Flags().StringVar(&from, "from", "", "the provider's key (default: the only key in the keyring)")
		c.AddCommand(sub)
	}
	return c
}
