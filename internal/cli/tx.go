package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

func txCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "tx", Short: "Sign and submit transactions"}
	var from, fee string
	send := &cobra.Command{
		Use:   "send TO AMOUNT --from KEY",
		Short: "Send tokens (AMOUNT: 1500usync, 2.5sync or a bare integer in usync)",
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
			return e.sendMsg(cmd, from, feeAmt, &ledger.MsgSend{To: to, Amount: ledger.Amount(amt)})
		},
	}
	send.Flags().StringVar(&from, "from", "", "name of the signing key in the keyring (required)")
	send.Flags().StringVar(&fee, "fee", "0", "fee paid to the treasury")
	send.MarkFlagRequired("from")
	c.AddCommand(send)
	return c
}

// sendMsg signs msg with the key named from, submits it, waits for its
// block and prints the result.
func (e *env) sendMsg(cmd *cobra.Command, from string, fee uint64, msg ledger.Msg) error {
	kr, err := e.keyring()
	if err != nil {
		return err
	}
	key, err := kr.Get(from)
	if err != nil {
		return err
	}
	cl, err := e.client()
	if err != nil {
		return err
	}
	res, err := cl.SendMsg(cmd.Context(), key, fee, msg)
	var txErr *chainclient.TxError
	if errors.As(err, &txErr) && e.output == "json" {
		e.print(res, nil)
		return err
	}
	if err != nil {
		return err
	}
	return e.print(res, func(w io.Writer) { printTxResult(w, res) })
}

func printTxResult(w io.Writer, r *apiwire.TxResult) {
	fmt.Fprintf(w, "tx %s included at height %d (code %d)\n", r.Hash, r.Height, r.Code)
}
