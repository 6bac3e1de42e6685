package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// sandboxExecCmd is the wasm executor's sandbox process: one job per
// process, so that the provider can stop a job by killing it. The executor
// starts "gpunet sandbox-exec" with wasm.ChildEnv set, and then the wasm
// package's init function serves the job before this command line is even
// parsed; run by hand (a job request as JSON on stdin), the command serves
// it here, with the guest's output on stdout and the report on stderr.
func sandboxExecCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:    "sandbox-exec",
		Short:  "Run one wasm job in this process (internal: started by the provider's wasm executor)",
		Hidden: true,
		Args:   exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if code := wasm.ChildMain(cmd.InOrStdin(), e.stdout, e.stderr); code != 0 {
				return fmt.Errorf("sandbox-exec failed (code %d)", code)
			}
			return nil
		},
	}
}
