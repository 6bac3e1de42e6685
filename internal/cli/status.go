package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func statusCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the node's chain: height, app hash, chain id, validators (exits 1 when unreachable)",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			st, err := cl.Status(cmd.Context())
			if err != nil {
				return err
			}
			return e.print(st, func(w io.Writer) {
				fmt.Fprintf(w, "chain id:    %s\nnode:        %s (%s)\nheight:      %d\napp hash:    %s\nblock time:  %s\napi:         %s\npeers:       %d\ncatching up: %v\nvalidators:  %d\n",
					st.ChainID, st.Moniker, st.NodeID, st.Height, st.AppHash, st.LatestBlockTime.Format("2006-01-02 15:04:05Z07:00"), st.API, st.Peers, st.CatchingUp, len(st.Validators))
				for _, v := range st.Validators {
					fmt.Fprintf(w, "  %s power %d\n", v.Address, v.VotingPower)
				}
			})
		},
	}
}
