package cli

import "github.com/spf13/cobra"

func benchCmd(e *env) *cobra.Command {
	return &cobra.Command{Use: "bench", Short: "Run benchmarks"}
}
