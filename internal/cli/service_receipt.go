package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/receipt"
)

// receiptView is what `service receipt` reports.
type receiptView struct {
	Receipt  *ledger.ServiceReceipt `json:"receipt"`
	ChainID  string                 `json:"chain_id"`
	Replica  string                 `json:"replica"` // "running", "ended" or "never"
	Request  string                 `json:"request,omitempty"`
	Response string                 `json:"response,omitempty"`
}

func serviceReceiptCmd(e *env) *cobra.Command {
	var reqFile, respFile string
	c := &cobra.Command{
		Use:   "receipt RECEIPT [--request FILE] [--response FILE]",
		Short: "Check a replica's receipt (the Gpunet-Receipt header of an OpenAI answer) against the chain, and against the request and answer you kept",
		Long: `Every chat completion a node's /openai/v1 relays comes with its replica's
receipt in the Gpunet-Receipt header (a trailer when streamed): the replica's
provider signs, with its key, the hash of the request, the hash of the
answer's text, the tokens and the time. This checks that the receipt is
signed by that provider's key for this chain, that the provider runs (or
ran) a replica of the service, and, given the files, that the request and
the answer (JSON, or the event stream as received) are the ones it names.
It exits 1 when any check fails.`,
		Args: exactArgs("RECEIPT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := receipt.Decode(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(args[0]), receipt.Header+":")))
			if err != nil {
				return usageError{err}
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			st, err := cl.Status(cmd.Context())
			if err != nil {
				return err
			}
			v := receiptView{Receipt: r, ChainID: st.ChainID, Replica: "never"}
			var problems []string
			if err := r.Verify(st.ChainID); err != nil {
				problems = append(problems, err.Error())
			}
			s, err := cl.Service(cmd.Context(), r.ServiceID)
			if err != nil {
				return err
			}
			switch {
			case slices.ContainsFunc(s.Replicas, func(x ledger.Replica) bool { return x.Provider == r.Provider }):
				v.Replica = "running"
			case slices.ContainsFunc(s.Ended, func(x ledger.ReplicaEnd) bool { return x.Provider == r.Provider && x.EndedAt >= r.Time/1000 }):
				v.Replica = "ended"
			default:
				problems = append(problems, fmt.Sprintf("%s runs no replica of service %d, and none that ended after the receipt's time", r.Provider, r.ServiceID))
			}
			if reqFile != "" {
				b, err := os.ReadFile(reqFile)
				if err != nil {
					return err
				}
				v.Request = "matches"
				if receipt.RequestHash(b) != r.RequestHash {
					v.Request = "differs"
					problems = append(problems, fmt.Sprintf("%s is not the request the receipt names (its SHA-256 differs)", reqFile))
				}
			}
			if respFile != "" {
				b, err := os.ReadFile(respFile)
				if err != nil {
					return err
				}
				o, err := answerOutputs(b)
				if err != nil {
					return fmt.Errorf("%s: %w", respFile, err)
				}
				v.Response = "matches"
				if o.Hash() != r.ResponseHash {
					v.Response = "differs"
					problems = append(problems, fmt.Sprintf("%s is not the answer the receipt names (its text hashes otherwise)", respFile))
				}
			}
			names := e.names()
			err = e.print(v, func(w io.Writer) {
				fmt.Fprintf(w, "receipt of service %d from %s\n", r.ServiceID, names.addr(r.Provider))
				fmt.Fprintf(w, "time:      %s\n", time.UnixMilli(r.Time).UTC().Format(time.RFC3339Nano))
				fmt.Fprintf(w, "tokens:    %d prompt, %d completion\n", r.PromptTokens, r.CompletionTokens)
				fmt.Fprintf(w, "request:   %x\n", r.RequestHash[:])
				fmt.Fprintf(w, "response:  %x\n", r.ResponseHash[:])
				fmt.Fprintf(w, "replica:   %s\n", v.Replica)
				for _, p := range problems {
					fmt.Fprintf(w, "PROBLEM:   %s\n", p)
				}
				if len(problems) == 0 {
					fmt.Fprintf(w, "ok: signed by the provider's key on chain %s\n", st.ChainID)
				}
			})
			if err == nil && len(problems) > 0 {
				return fmt.Errorf("the receipt does not check out: %s", strings.Join(problems, "; "))
			}
			return err
		},
	}
	c.Flags().StringVar(&reqFile, "request", "", "the request body you sent (JSON), to check its hash")
	c.Flags().StringVar(&respFile, "response", "", "the answer you got (JSON, or the event stream as received), to check its hash")
	return c
}

// answerOutputs reads an answer kept by a client: a JSON completion, or an
// event stream (data: lines).
func answerOutputs(b []byte) (*receipt.Outputs, error) {
	var o receipt.Outputs
	t := bytes.TrimSpace(b)
	if !bytes.HasPrefix(t, []byte("data:")) {
		return &o, o.Add(t)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok {
			continue
		}
		d = bytes.TrimSpace(d)
		if string(d) == "[DONE]" {
			continue
		}
		if err := o.Add(d); err != nil {
			return nil, err
		}
	}
	return &o, sc.Err()
}
