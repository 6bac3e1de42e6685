package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/ledger"
)

func stakeCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "stake",
		Short: "Bond or unbond a provider's stake; delegate to validators and providers",
		Long: `add and unbond move a provider's own stake (the agent keeps the minimum
bonded by itself). delegate, undelegate and redelegate let any holder bond
stake to a validator or a provider: it earns a share of the target's rewards,
votes in governance and is slashed with the target. commission sets what a
validator's operator or a provider takes of its delegators' rewards.`,
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
	c.AddCommand(stakeDelegateCmds(e)...)
	return c
}
