package cli

import (
	"github.com/spf13/cobra"
)

func jobGetCmd(e *env) *cobra.Command {
	var from, out string
	get := &cobra.Command{
		Use:   "get ID [--from KEY] [--out DIR]",
		Short: "Download and decrypt a finished job's outputs",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			jc, j, err := e.ownerClient(cmd.Context(), from, id, "fetch its outputs")
			if err != nil {
				return err
			}
			return e.finishJob(cmd.Context(), jc, j, out)
		},
	}
	ownerFlag(get, &from)
	get.Flags().StringVar(&out, "out", "", "where to put the outputs (default ./job-ID)")
	return get
}
