package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
)

// resolveAddress accepts an address or the name of a key in the keyring.
func (e *env) resolveAddress(s string) (address.Address, error) {
	a, err := address.Parse(s)
	if err == nil {
		return a, nil
	}
	if kr, kerr := e.keyring(); kerr == nil {
		if k, kerr := kr.Lookup(s); kerr == nil { // the address needs no passphrase
			return k.Address, nil
		}
	}
	return a, usageError{fmt.Errorf("%q is neither an address nor a key in %s/keyring: %w", s, e.home, err)}
}

func queryCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "query", Aliases: []string{"q"}, Short: "Read ledger state"}
	c.AddCommand(queryMarketCmd(e))
	c.AddCommand(&cobra.Command{
		Use:   "balance ADDR|KEY",
		Short: "Show an account's balance",
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
			b, err := cl.Balance(cmd.Context(), a)
			if err != nil {
				return err
			}
			who := e.names().addr(a)
			return e.print(b, func(w io.Writer) {
				fmt.Fprintf(w, "%s: %s at height %d\n", who, formatAmount(b.Balance), b.Height)
			})
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "account ADDR|KEY",
		Short: "Show an account: balance, sequence, public key",
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
			acct, err := cl.Account(cmd.Context(), a)
			if err != nil {
				return err
			}
			return e.print(acct, func(w io.Writer) {
				fmt.Fprintf(w, "address:  %s\nbalance:  %s\nsequence: %d\n", e.names().addr(a), formatAmount(acct.Balance), acct.Sequence)
				if len(acct.PubKey) > 0 {
					fmt.Fprintf(w, "pub key:  %x\n", acct.PubKey)
				}
				fmt.Fprintf(w, "height:   %d\n", acct.Height)
			})
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "providers",
		Short: "List every registered provider (as offers; see `gpunet offers` to search)",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			list, err := cl.Providers(cmd.Context())
			if err != nil {
				return err
			}
			names := e.names()
			return e.print(list, func(w io.Writer) { printOffers(w, list, true, names) })
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "provider ADDR|KEY",
		Short: "Show a provider: offer, stake, reputation, liveness, earnings",
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
			p, err := cl.Provider(cmd.Context(), a)
			if err != nil {
				return err
			}
			who := e.names().addr(a)
			return e.print(p, func(w io.Writer) {
				fmt.Fprintf(w, "provider %s\n", who)
				printProvider(w, p)
			})
		},
	})
	c.AddCommand(queryValidatorsCmd(e), queryValidatorCmd(e), queryDelegationsCmd(e))
	c.AddCommand(queryParamsCmd(e))
	return c
}
