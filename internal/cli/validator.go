package cli

import (
	"bytes"
	"crypto/ed25519"
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
one that signs twice at a height is slashed more and removed for good.

Bonding a key needs the key's proof of possession (pop): its signature over
the chain id and the operator's address, so that no one can bond another
node's key. 'validator create' makes it from --home's consensus key
(config/priv_validator_key.json); for an operator key kept off the node,
'validator pop' makes it on the node and 'validator create --pubkey --pop'
sends it from where the operator key is. A consensus key serves one
validator for good.`,
	}
	var from string
	var stake, moniker, pubkey, pop string
	create := &cobra.Command{
		Use:   "create --from KEY --stake AMOUNT [--moniker NAME] [--pubkey KEY --pop POP]",
		Short: "Bond AMOUNT of KEY's balance for the consensus key of --home's node (or --pubkey, with its --pop)",
		Long: `Bond AMOUNT of KEY's balance for a consensus key, KEY operating the validator.

Without --pubkey: the key of the node in --home (config/priv_validator_key.json),
which also signs the proof of possession for KEY's address and the chain id
of --node.

With --pubkey (the operator key kept off the node): --pop is the proof that
'gpunet validator pop --operator ADDR' printed on the node whose key it is.
It is checked here before anything is sent.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stake == "" {
				return usageError{fmt.Errorf("--stake is required (at least params.min_validator_stake, 10sync by default)")}
			}
			amt, err := parseAmount(stake)
			if err != nil {
				return usageError{fmt.Errorf("--stake %q: %w", stake, err)}
			}
			msg, name, err := e.createValidatorMsg(cmd, from, pubkey, pop)
			if err != nil {
				return err
			}
			msg.Stake, msg.Moniker = ledger.Amount(amt), moniker
			res, _, err := e.signAndSend(cmd, name, 0, msg)
			if err != nil {
				return err
			}
			out := struct {
				*apiwire.TxResult
				Validator ledger.ConsAddress `json:"validator"`
			}{res, ledger.ConsAddressOf(msg.PubKey)}
			return e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "validator %s bonded %s\n", out.Validator, formatAmount(amt))
				printTxResult(w, res)
			})
		},
	}
	create.Flags().StringVar(&stake, "stake", "", "the stake to bond, e.g. 100sync")
	create.Flags().StringVar(&moniker, "moniker", "", "a name for the validator")
	create.Flags().StringVar(&pubkey, "pubkey", "", "the ed25519 consensus public key (hex or base64; default: --home's config/priv_validator_key.json); needs --pop")
	create.Flags().StringVar(&pop, "pop", "", "with --pubkey: the key's proof of possession for --from's address on this chain, as 'gpunet validator pop' prints it (hex or base64)")
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
	c.AddCommand(validatorPoPCmd(e))
	return c
}

// createValidatorMsg returns the create_validator the flags call for, its
// stake and moniker left to set, and the name of the operator's key: for
// --home's consensus key with a proof of possession signed here for the
// operator and --node's chain, or for --pubkey with the --pop given, which
// it checks first.
func (e *env) createValidatorMsg(cmd *cobra.Command, from, pubkey, pop string) (*ledger.MsgCreateValidator, string, error) {
	var msg ledger.MsgCreateValidator
	var err error
	if pubkey != "" {
		if msg.PubKey, err = decodeFixed("--pubkey", pubkey, ed25519.PublicKeySize, "an ed25519 public key"); err != nil {
			return nil, "", err
		}
	}
	switch {
	case pubkey != "" && pop == "":
		return nil, "", usageError{fmt.Errorf("--pubkey needs --pop, the key's proof of possession for the operator: run `gpunet validator pop --operator ADDR` on the node whose key it is (its --home) and pass the pop it prints")}
	case pubkey == "" && pop != "":
		return nil, "", usageError{fmt.Errorf("--pop goes with --pubkey; without --pubkey the pop is signed here with --home's consensus key")}
	case pop != "":
		if msg.PoP, err = decodeFixed("--pop", pop, ed25519.SignatureSize, "a proof of possession (an ed25519 signature)"); err != nil {
			return nil, "", err
		}
	}
	name, err := e.signer(from)
	if err != nil {
		return nil, "", err
	}
	kr, err := e.keyring()
	if err != nil {
		return nil, "", err
	}
	key, err := kr.Lookup(name) // the address needs no passphrase
	if err != nil {
		return nil, "", err
	}
	cl, err := e.client()
	if err != nil {
		return nil, "", err
	}
	st, err := cl.Status(cmd.Context())
	if err != nil {
		return nil, "", err
	}
	if pubkey == "" {
		msg.PubKey, msg.PoP, err = validator.ConsensusPoP(e.home, st.ChainID, key.Address)
		return &msg, name, err
	}
	if !ledger.VerifyValidatorPoP(msg.PubKey, msg.PoP, st.ChainID, key.Address) {
		return nil, "", usageError{fmt.Errorf("--pop is not the proof of possession of --pubkey %X for operator %s (--from %s) on chain %q: it was made for another operator or chain, or by another key; on the node whose key it is, run `gpunet validator pop --operator %s --chain-id %s`", msg.PubKey, key.Address, name, st.ChainID, key.Address, st.ChainID)}
	}
	return &msg, name, nil
}

// validatorPoPCmd is `gpunet validator pop`: on the node, the proof of
// possession an operator elsewhere sends with `validator create --pubkey`.
func validatorPoPCmd(e *env) *cobra.Command {
	var operator, chainID string
	c := &cobra.Command{
		Use:   "pop --operator ADDR [--chain-id ID]",
		Short: "Print the proof of possession of --home's consensus key for an operator, for `validator create --pubkey --pop`",
		Long: `Sign, with the consensus key of the node in --home
(config/priv_validator_key.json), the proof that the account --operator may
bond stake for it on chain --chain-id (default: --home's chain), and print the
public key and the proof. Run it where the consensus key is; the operator key
need not be there. The proof is good for that operator on that chain only.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if operator == "" {
				return usageError{fmt.Errorf("--operator is required: the address (gpu1…) of the account that will send validator create")}
			}
			op, err := e.resolveAddress(operator)
			if err != nil {
				return err
			}
			if chainID == "" {
				cfg, err := validator.LoadConfig(e.home)
				if err != nil {
					return usageError{fmt.Errorf("no --chain-id, and --home has no node config to take it from: %w", err)}
				}
				chainID = cfg.ChainID
			}
			pub, pop, err := validator.ConsensusPoP(e.home, chainID, op)
			if err != nil {
				return err
			}
			out := struct {
				PubKey    string             `json:"pub_key"`
				PoP       string             `json:"pop"`
				Validator ledger.ConsAddress `json:"validator"`
				Operator  address.Address    `json:"operator"`
				ChainID   string             `json:"chain_id"`
			}{hex.EncodeToString(pub), hex.EncodeToString(pop), ledger.ConsAddressOf(pub), op, chainID}
			return e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "consensus key %s (validator %s)\n", out.PubKey, out.Validator)
				fmt.Fprintf(w, "pop           %s\n", out.PoP)
				fmt.Fprintf(w, "for operator %s on chain %s; where the operator's key is, run:\n", op, chainID)
				fmt.Fprintf(w, "  gpunet validator create --from KEY --stake AMOUNT --pubkey %s --pop %s\n", out.PubKey, out.PoP)
			})
		},
	}
	c.Flags().StringVar(&operator, "operator", "", "the operator's address (or the name of a key in --home's keyring)")
	c.Flags().StringVar(&chainID, "chain-id", "", "the chain the validator is for (default: --home's chain_id)")
	return c
}

// decodeFixed decodes a flag's value of n bytes given in hex or base64.
func decodeFixed(flag, given string, n int, what string) ([]byte, error) {
	if b, err := hex.DecodeString(given); err == nil && len(b) == n {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(given); err == nil && len(b) == n {
		return b, nil
	}
	return nil, usageError{fmt.Errorf("%s %q is not %s: want %d hex digits or %d characters of base64 (%d bytes)", flag, given, what, 2*n, base64.StdEncoding.EncodedLen(n), n)}
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
		fmt.Fprintf(w, "this chain's validator set is fixed at genesis (see `%s`)\n", hint("status"))
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
	o.ValidatorStake, o.OperatorBalance, o.WitnessBalance = stake, balance, validator.DefaultWitnessBalance
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
