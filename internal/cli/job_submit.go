package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
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
