package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/jobclient"
)

func jobSubmitCmd(e *env) *cobra.Command {
	var from string
	var queue bool
	submit := &cobra.Command{
		Use:   "submit SPEC.yaml|- [--from KEY]",
		Short: "Submit a job and return its id (- reads the spec from stdin)",
		Args:  exactArgs("SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			jc, id, err := e.submitSpec(cmd, args[0], from, queue)
			if err != nil {
				return err
			}
			// Grant the key at once if the job was placed in its block.
			if j, err := jc.Chain.Job(cmd.Context(), id); err == nil {
				jc.GrantIfNeeded(cmd.Context(), j)
			}
			return e.print(map[string]uint64{"id": id}, func(w io.Writer) {
				fmt.Fprintf(w, "job %d submitted; follow it with: gpunet job wait %d (or job status|logs %d)\n", id, id, id)
			})
		},
	}
	fromFlag(submit, &from)
	queueFlag(submit, &queue)
	return submit
}

// queueFlag adds --queue to cmd.
func queueFlag(cmd *cobra.Command, queue *bool) {
	cmd.Flags().BoolVar(queue, "queue", false, "submit even if no online provider could take the job: none offers what it asks (a GPU model, memory, region, …), or max_price is below every ask (the job waits, its escrow locked, until one does)")
}

// submitSpec loads the spec at path (- for stdin), checks, unless queue,
// that some online provider offers what it asks and that its max_price is
// not below every ask that fits it (jobclient.Check: before anything is
// uploaded or locked), and submits it as key from (default: the keyring's
// only key).
func (e *env) submitSpec(cmd *cobra.Command, path, from string, queue bool) (*jobclient.Client, uint64, error) {
	ctx := cmd.Context()
	s, err := loadSpec(cmd, path)
	if err != nil {
		return nil, 0, err
	}
	if from, err = e.signer(from); err != nil {
		return nil, 0, err
	}
	jc, err := e.jobClient(ctx, from)
	if err != nil {
		return nil, 0, err
	}
	if !queue {
		var pe *jobclient.PriceError
		var ue *jobclient.UnmetError
		switch err := jc.Check(ctx, s); {
		case errors.As(err, &ue):
			return nil, 0, usageError{fmt.Errorf("%w; change the spec, or pass --queue to submit it anyway and wait for such a provider", ue)}
		case errors.As(err, &pe):
			return nil, 0, usageError{fmt.Errorf("max_price %s/h is below every ask that fits this job (%s); raise max_price, or pass --queue to submit it anyway and wait for a cheaper provider", formatSync(pe.MaxPrice), pe.Quote.Reason)}
		case err != nil:
			return nil, 0, err
		}
	}
	id, err := jc.Submit(ctx, s)
	return jc, id, err
}
