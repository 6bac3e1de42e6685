package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// validatorCmd is `gpunet validator`: bond stake for a node's consensus
// key, add to or withdraw from the bond, unjail.
func validatorCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "validator",
		Short: "Run a validator: bond stake for a node's consensus key, unjail it",
		Long: `A validator is an account (its operator, --from) that bonds stake for a
node's consensus key. Voting power follows the bond; the largest bonds, up to
params.max_validators, form the set. A validator that misses too many blocks
is jailed and slashed a little ('validator unjail' after params.jail_blocks);
one that signs twice at a height is slashed more and removed for good.`,
	}
	var from string
	var stake, moniker, pubkey string
	create := &cobra.Command{
		Use:   "create --from KEY --stake AMOUNT [--moniker NAME] [--pubkey KEY]",
		Short: "Bond AMOUNT of KEY's balance for the consensus key of --home's node (or --pubkey)",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stake == "" {
				return usageError{fmt.Errorf("--stake is required (at least params.min_validator_stake, 10sync by default)")}
			}
			amt, err := parseAmount(stake)
			if err != nil {
				return usageError{fmt.Errorf("--stake %q: %w", stake, err)}
			}
			pub, err := consensusKey(e.home, pubkey)
			if err != nil {
				return err
			}
			res, _, err := e.signAndSend(cmd, from, 0, &ledger.MsgCreateValidator{PubKey: pub, Stake: ledger.Amount(amt), Moniker: moniker})
			if err != nil {
				return err
			}
			out := struct {
				*apiwire.TxResult
				Validator ledger.ConsAddress `json:"validator"`
			}{res, ledger.ConsAddressOf(pub)}
			return e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "validator %s bonded %s\n", out.Validator, formatAmount(amt))
				printTxResult(w, res)
			})
		},
	}
	create.Flags().StringVar(&stake, "stake", "", "the stake to bond, e.g. 100sync")
	create.Flags().StringVar(&moniker, "moniker", "", "a name for the validator")
	create.Flags().StringVar(&pubkey, "pubkey", "", "the ed25519 consensus public key (hex or base64; default: --home's config/priv_validator_key.json)")
	unjail := &cobra.Command{
		Use:   "unjail --from KEY",
		Short: "Bring KEY's jailed validator back once its jail time is over",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.sendMsg(cmd, from, 0, &ledger.MsgUnjail{})
		},
	}
	bond := &cobra.Command{
		Use:   "bond AMOUNT --from KEY",
		Short: "Add AMOUNT of KEY's balance to its validator's bond",
		Args:  exactArgs("AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := parseAmount(args[0])
			if err != nil {
				return usageError{err}
			}
			return e.sendMsg(cmd, from, 0, &ledger.MsgValidatorBond{Amount: ledger.Amount(amt)})
		},
	}
	unbond := &cobra.Command{
		Use:   "unbond AMOUNT --from KEY",
		Short: "Withdraw AMOUNT of KEY's validator bond; it returns after params.validator_unbonding_blocks",
		Args:  exactArgs("AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			amt, err := parseAmount(args[0])
			if err != nil {
				return usageError{err}
			}
			return e.sendMsg(cmd, from, 0, &ledger.MsgValidatorUnbond{Amount: ledger.Amount(amt)})
		},
	}
	for _, sub := range []*cobra.Command{create, unjail, bond, unbond} {
		sub.Flags().StringVar(&from, "from", "", "the operator's key (default: the only key in the keyring)")
		c.AddCommand(sub)
	}
	return c
}

// consensusKey returns the key given with --pubkey (hex or base64), or
// else home's consensus key.
func consensusKey(home, given string) ([]byte, error) {
	if given == "" {
		return validator.ConsensusPubKey(home)
	}
	if b, err := hex.DecodeString(given); err == nil && len(b) == 32 {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(given); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, usageError{fmt.Errorf("--pubkey %q is not an ed25519 public key: want 64 hex digits or 44 characters of base64 (32 bytes)", given)}
}

// queryValidatorsCmd is `gpunet query validators`.
func queryValidatorsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "validators",
		Short: "List the validators: power, bond, missed blocks, status",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			list, err := cl.Validators(cmd.Context())
			if err != nil {
				return err
			}
			names := e.names()
			return e.print(list, func(w io.Writer) { printValidators(w, list, names) })
		},
	}
}

func printValidators(w io.Writer, list *apiwire.ValidatorList, names keyNames) {
	if !list.Managed {
		fmt.Fprintln(w, "this chain's validator set is fixed at genesis (see `gpunet status`)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "VALIDATOR\tMONIKER\tSTATUS\tPOWER\tBOND\tMISSED\tJAILED UNTIL\tOPERATOR\n")
	for _, v := range list.Validators {
		until := "-"
		if v.Jailed && !v.Tombstoned {
			until = fmt.Sprint(v.JailedUntil)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d/%d\t%s\t%s\n", v.Address, strings.TrimSpace(v.Moniker), v.Status, v.Power, formatAmount(v.Bond), v.Missed, list.Window, until, names.addr(v.Operator))
	}
	tw.Flush()
	fmt.Fprintf(w, "total power %d at height %d\n", list.TotalPower, list.Height)
}

// validatorInitFlags are init's flags for the validators it bonds at
// genesis.
type validatorInitFlags struct {
	stake, balance, paramsFile string
}

func (f *validatorInitFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.stake, "validator-stake", "100sync", "stake each validator bonds at genesis (added to the supply), operated by the key \"operator\" in its home's keyring; 0: a validator set fixed at genesis")
	c.Flags().StringVar(&f.balance, "operator-balance", "1000sync", "genesis balance of each validator's operator (for fees, more bond)")
	c.Flags().StringVar(&f.paramsFile, "genesis-params", "", "JSON file of ledger parameters to set over the defaults, e.g. {\"downtime_window\": 20}")
}

// apply sets o's genesis parameters and validator bonds from the flags.
func (f *validatorInitFlags) apply(e *env, o *validator.InitOptions) error {
	if f.paramsFile != "" {
		b, err := readLimited(f.paramsFile)
		if err != nil {
			return usageError{fmt.Errorf("--genesis-params: %w", err)}
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o.Genesis.Params); err != nil {
			return usageError{fmt.Errorf("--genesis-params %s: %w (keys are those of GET /v1/params)", f.paramsFile, err)}
		}
		if err := o.Genesis.Params.Validate(); err != nil {
			return usageError{fmt.Errorf("--genesis-params %s: %w", f.paramsFile, err)}
		}
	}
	var stake uint64
	if f.stake != "0" {
		var err error
		if stake, err = parseAmount(f.stake); err != nil {
			return usageError{fmt.Errorf("--validator-stake %q: %w (0: a set fixed at genesis)", f.stake, err)}
		}
	}
	balance, err := parseAmount(f.balance)
	if err != nil {
		return usageError{fmt.Errorf("--operator-balance %q: %w", f.balance, err)}
	}
	if stake > 0 && stake < o.Genesis.Params.MinValidatorStake {
		return usageError{fmt.Errorf("--validator-stake %s is below params.min_validator_stake %s", formatAmount(stake), formatAmount(o.Genesis.Params.MinValidatorStake))}
	}
	o.ValidatorStake, o.OperatorBalance = stake, balance
	pass := e.passphrase() // asked once for every home
	o.OperatorKey = func(home string) (address.Address, error) {
		kr, err := keys.Open(filepath.Join(home, "keyring"), keys.WithPassphrase(pass))
		if err != nil {
			return address.Address{}, err
		}
		if k, err := kr.Lookup(operatorKeyName); err == nil {
			return k.Address, nil
		}
		k, err := kr.Add(operatorKeyName)
		if errors.Is(err, keys.ErrNoPassphrase) {
			return address.Address{}, fmt.Errorf("%w (init makes a passphrase-encrypted operator key in each validator's home; --validator-stake 0 writes a fixed validator set without them)", err)
		}
		if err != nil {
			return address.Address{}, err
		}
		return k.Address, nil
	}
	return nil
}

// operatorKeyName is the key init creates in each validator's home.
const operatorKeyName = "operator"
