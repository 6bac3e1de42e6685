package cli

import (
	"context"
	"fmt"
	"io"
	"math/big"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The delegation verbs of `gpunet stake` (docs/ledger.md, Delegation): a
// holder bonds stake to a validator (named by its operator's address) or
// to a provider, takes it back after the target's unbonding period, moves
// it between targets at once; a validator operator or provider sets the
// commission it takes of its delegators' rewards.

// delegateResult is the JSON of delegate, undelegate and redelegate: the
// tx's result and what it moved.
type delegateResult struct {
	*apiwire.TxResult
	Delegator string         `json:"delegator"`
	Source    *ledger.Target `json:"source,omitempty"` // undelegate, redelegate
	Target    *ledger.Target `json:"target,omitempty"` // delegate, redelegate
	Amount    uint64         `json:"amount"`           // usync
}

func stakeDelegateCmds(e *env) []*cobra.Command {
	var from, toKind, srcKind string
	delegate := &cobra.Command{
		Use:   "delegate TARGET AMOUNT --from KEY [--to validator|provider]",
		Short: "Delegate AMOUNT of KEY's balance to a validator (its operator's address) or a provider; it votes and earns with the target",
		Long: `Bond AMOUNT of KEY's balance to TARGET: a validator, named by its
operator's address (or key name), whose power it adds to; or a provider,
whose stake requirement it helps back. The delegation earns its share of the
target's rewards less the target's commission ('provider claim-rewards' pays
them), votes in governance (as KEY votes, else as the target votes), and is
slashed with the target. What TARGET is comes from the chain; --to says it
when an address is both.`,
		Args: exactArgs("TARGET", "AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := parseAmount(args[1])
			if err != nil {
				return usageError{err}
			}
			t, err := e.delegationTarget(cmd.Context(), args[0], toKind, "--to", nil)
			if err != nil {
				return err
			}
			return e.sendDelegation(cmd, from, &ledger.MsgDelegate{Kind: t.Kind, Target: t.Address, Amount: ledger.Amount(amt)},
				delegateResult{Target: &t, Amount: amt}, "delegated %s from %s to %s\n")
		},
	}
	undelegate := &cobra.Command{
		Use:   "undelegate TARGET AMOUNT --from KEY [--to validator|provider]",
		Short: "Start unbonding AMOUNT of KEY's delegation to TARGET; it returns to the balance after the target's unbonding period",
		Args:  exactArgs("TARGET", "AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := parseAmount(args[1])
			if err != nil {
				return usageError{err}
			}
			t, err := e.delegationTarget(cmd.Context(), args[0], toKind, "--to", e.delegatorOf(from))
			if err != nil {
				return err
			}
			return e.sendDelegation(cmd, from, &ledger.MsgUndelegate{Kind: t.Kind, Target: t.Address, Amount: ledger.Amount(amt)},
				delegateResult{Source: &t, Amount: amt}, "undelegating %s of %s from %s\n")
		},
	}
	redelegate := &cobra.Command{
		Use:   "redelegate FROM TO AMOUNT --from KEY [--source validator|provider] [--to validator|provider]",
		Short: "Move AMOUNT of KEY's delegation from target FROM to target TO at once (it stays slashable for FROM's unbonding period)",
		Args:  exactArgs("FROM", "TO", "AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := parseAmount(args[2])
			if err != nil {
				return usageError{err}
			}
			src, err := e.delegationTarget(cmd.Context(), args[0], srcKind, "--source", e.delegatorOf(from))
			if err != nil {
				return err
			}
			dst, err := e.delegationTarget(cmd.Context(), args[1], toKind, "--to", nil)
			if err != nil {
				return err
			}
			msg := &ledger.MsgRedelegate{FromKind: src.Kind, From: src.Address, ToKind: dst.Kind, To: dst.Address, Amount: ledger.Amount(amt)}
			return e.sendDelegation(cmd, from, msg, delegateResult{Source: &src, Target: &dst, Amount: amt}, "redelegated %s of %s from %s to %s\n")
		},
	}
	var as string
	commission := &cobra.Command{
		Use:   "commission RATE --from KEY [--as validator|provider]",
		Short: "Set the commission KEY takes, as a validator's operator or a provider, of its delegators' rewards (e.g. 5%, 0.05 or 50000ppm)",
		Long: `Set the share of its delegators' rewards that KEY takes before the rest
is split among them: KEY operates a validator or is a provider (--as says
which when it is both). The first setting may be anything up to
params.commission_max_ppm; later ones at most one a day, each by at most
params.commission_max_change_ppm.`,
		Args: exactArgs("RATE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ppm, err := parseRatePPM(args[0])
			if err != nil {
				return usageError{err}
			}
			self := e.delegatorOf(from)
			if self == nil {
				return usageError{fmt.Errorf("name the key to sign with: --from KEY (the validator's operator or the provider)")}
			}
			t, err := e.delegationTarget(cmd.Context(), self.String(), as, "--as", nil)
			if err != nil {
				return err
			}
			res, _, err := e.signAndSend(cmd, from, 0, &ledger.MsgSetCommission{Kind: t.Kind, PPM: ppm})
			if err != nil {
				return err
			}
			out := struct {
				*apiwire.TxResult
				Kind    ledger.TargetKind `json:"kind"`
				RatePPM uint64            `json:"rate_ppm"`
			}{res, t.Kind, ppm}
			who := e.names().addr(t.Address)
			return e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "commission of %s %s set to %s\n", t.Kind, who, formatPPM(ppm))
				printTxResult(w, res)
			})
		},
	}
	for _, sub := range []*cobra.Command{delegate, undelegate, redelegate, commission} {
		sub.Flags().StringVar(&from, "from", "", "the delegator's key (default: the only key in the keyring)")
	}
	for _, sub := range []*cobra.Command{delegate, undelegate, redelegate} {
		sub.Flags().StringVar(&toKind, "to", "", "what the target is, validator or provider (default: what the chain says it is)")
	}
	redelegate.Flags().StringVar(&srcKind, "source", "", "what FROM is, validator or provider (default: what KEY has delegated to, or what the chain says it is)")
	commission.Flags().StringVar(&as, "as", "", "validator or provider: which of KEY's pools (default: the one KEY has)")
	commission.Flags().Lookup("from").Usage = "the validator operator's or provider's key (default: the only key in the keyring)"
	return []*cobra.Command{delegate, undelegate, redelegate, commission}
}

// sendDelegation signs and sends msg and prints out with format's line:
// delegate's (amount, delegator, target), undelegate's (amount,
// delegator, source) or redelegate's (amount, delegator, source, target).
func (e *env) sendDelegation(cmd *cobra.Command, from string, msg ledger.Msg, out delegateResult, format string) error {
	res, key, err := e.signAndSend(cmd, from, 0, msg)
	if err != nil {
		return err
	}
	out.TxResult, out.Delegator = res, key.Address.String()
	names := e.names()
	target := func(t *ledger.Target) string { return t.Kind.String() + " " + names.addr(t.Address) }
	args := []any{formatAmount(out.Amount), names.addr(key.Address)}
	if out.Source != nil {
		args = append(args, target(out.Source))
	}
	if out.Target != nil {
		args = append(args, target(out.Target))
	}
	return e.print(out, func(w io.Writer) {
		fmt.Fprintf(w, format, args...)
		printTxResult(w, res)
	})
}

// delegatorOf is the address of the key from (or the keyring's only key)
// when the keyring knows it without a passphrase, else nil.
func (e *env) delegatorOf(from string) *address.Address {
	name, err := e.signer(from)
	if err != nil {
		return nil
	}
	kr, err := e.keyring()
	if err != nil {
		return nil
	}
	k, err := kr.Lookup(name)
	if err != nil {
		return nil
	}
	return &k.Address
}

// delegationTarget is the target given (an address or key name) of kind
// flagVal (flag names the flag that gave it) or, when flagVal is empty,
// of the kind the chain says it is: the kind of delegator's one
// delegation to it when delegator is not nil and has one, else validator
// when the address operates a validator, provider when it is a registered
// provider. It is refused when it is neither or both.
func (e *env) delegationTarget(ctx context.Context, given, flagVal, flag string, delegator *address.Address) (ledger.Target, error) {
	a, err := e.resolveAddress(given)
	if err != nil {
		return ledger.Target{}, err
	}
	t := ledger.Target{Address: a}
	if flagVal != "" {
		if err := t.Kind.UnmarshalText([]byte(flagVal)); err != nil {
			return t, usageError{fmt.Errorf("%s %q: want validator or provider", flag, flagVal)}
		}
		return t, nil
	}
	cl, err := e.client()
	if err != nil {
		return t, err
	}
	if delegator != nil {
		ds, err := cl.Delegations(ctx, *delegator)
		if err != nil {
			return t, err
		}
		var kinds []ledger.TargetKind
		for _, d := range ds.Delegations {
			if d.Target.Address == a {
				kinds = append(kinds, d.Target.Kind)
			}
		}
		if len(kinds) == 1 {
			t.Kind = kinds[0]
			return t, nil
		}
	}
	isVal, isProv := true, true
	if _, err := cl.Validator(ctx, a.String()); chainclient.IsNotFound(err) {
		isVal = false
	} else if err != nil {
		return t, err
	}
	if _, err := cl.Provider(ctx, a); chainclient.IsNotFound(err) {
		isProv = false
	} else if err != nil {
		return t, err
	}
	who := e.names().addr(a)
	switch {
	case isVal && isProv:
		return t, usageError{fmt.Errorf("%s both operates a validator and is a registered provider: say which with %s validator or %s provider", who, flag, flag)}
	case isVal:
		t.Kind = ledger.TargetValidator
	case isProv:
		t.Kind = ledger.TargetProvider
	default:
		return t, usageError{fmt.Errorf("%s neither operates a validator nor is a registered provider (see `%s` and `%s`); give %s validator|provider to send it anyway", who, hint("query validators"), hint("query providers"), flag)}
	}
	return t, nil
}

// parseRatePPM reads a commission rate: a percentage ("5%"), a fraction
// ("0.05") or parts per million ("50000ppm"), at most 100%.
func parseRatePPM(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	scale := big.NewRat(1_000_000, 1)
	switch {
	case strings.HasSuffix(t, "ppm"):
		t, scale = strings.TrimSuffix(t, "ppm"), big.NewRat(1, 1)
	case strings.HasSuffix(t, "%"):
		t, scale = strings.TrimSuffix(t, "%"), big.NewRat(10_000, 1)
	}
	r, ok := new(big.Rat).SetString(strings.TrimSpace(t))
	if !ok || t == "" || strings.ContainsAny(t, "eE/") {
		return 0, fmt.Errorf("rate %q is not a rate: write e.g. 5%%, 0.05 or 50000ppm", s)
	}
	r.Mul(r, scale)
	if r.Sign() < 0 || !r.IsInt() || r.Cmp(big.NewRat(1_000_000, 1)) > 0 {
		return 0, fmt.Errorf("rate %q: want 0%% to 100%% in whole parts per million (e.g. 5%%, 0.05 or 50000ppm)", s)
	}
	return r.Num().Uint64(), nil
}

// formatPPM writes a rate in parts per million as a percentage.
func formatPPM(ppm uint64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%d.%04d", ppm/10_000, ppm%10_000), "0"), ".") + "%"
}
