package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
)

func txCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "tx", Short: "Sign and submit transactions"}
	var from, fee string
	send := &cobra.Command{
		Use:   "send TO AMOUNT [--from KEY]",
		Short: "Send tokens (AMOUNT with its unit: 2.5sync or 1500usync) and say what was sent",
		Args:  exactArgs("TO", "AMOUNT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			to, err := e.resolveAddress(args[0])
			if err != nil {
				return err
			}
			amt, err := parseAmount(args[1])
			if err != nil {
				return usageError{err}
			}
			var feeAmt uint64
			if fee != "" && fee != "0" {
				if feeAmt, err = parseAmount(fee); err != nil {
					return usageError{fmt.Errorf("--fee: %w", err)}
				}
			}
			res, key, err := e.signAndSend(cmd, from, feeAmt, &ledger.MsgSend{To: to, Amount: ledger.Amount(amt)})
			if err != nil {
				return err
			}
			names := e.names()
			out := sendResult{TxResult: res, From: key.Address.String(), To: to.String(), Amount: amt, Fee: feeAmt}
			return e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "sent %s from %s to %s", formatAmount(amt), names.addr(key.Address), names.addr(to))
				if feeAmt > 0 {
					fmt.Fprintf(w, ", fee %s", formatAmount(feeAmt))
				}
				fmt.Fprintln(w)
				printTxResult(w, res)
			})
		},
	}
	send.Flags().StringVar(&from, "from", "", "name of the signing key in the keyring (default: the only key there)")
	send.Flags().StringVar(&fee, "fee", "0", "fee paid to the treasury, with its unit (e.g. 0.01sync)")
	c.AddCommand(send)
	return c
}

// sendResult is tx send's JSON: the tx's result and what it sent.
type sendResult struct {
	*apiwire.TxResult
	From   string `json:"from"`
	To     string `json:"to"`
	Amount uint64 `json:"amount"` // usync
	Fee    uint64 `json:"fee"`    // usync
}

// signAndSend signs msg with the key named from (default: the keyring's
// only key), submits it and waits for its block. A tx the ledger rejects
// is printed with --output json (its result on stdout) and returned as
// the error.
func (e *env) signAndSend(cmd *cobra.Command, from string, fee uint64, msg ledger.Msg) (*apiwire.TxResult, *keys.Key, error) {
	from, err := e.signer(from)
	if err != nil {
		return nil, nil, err
	}
	kr, err := e.keyring()
	if err != nil {
		return nil, nil, err
	}
	key, err := kr.Get(from)
	if err != nil {
		return nil, nil, err
	}
	cl, err := e.client()
	if err != nil {
		return nil, nil, err
	}
	res, err := cl.SendMsg(cmd.Context(), key, fee, msg)
	var txErr *chainclient.TxError
	if errors.As(err, &txErr) && e.output == "json" {
		e.print(res, nil)
	}
	return res, key, err
}

// sendMsg is signAndSend that prints the tx's result.
func (e *env) sendMsg(cmd *cobra.Command, from string, fee uint64, msg ledger.Msg) error {
	res, _, err := e.signAndSend(cmd, from, fee, msg)
	if err != nil {
		return err
	}
	return e.print(res, func(w io.Writer) { printTxResult(w, res) })
}

func printTxResult(w io.Writer, r *apiwire.TxResult) {
	fmt.Fprintf(w, "tx %s included at height %d (code %d)\n", r.Hash, r.Height, r.Code)
}
