package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func serviceProbeCmd(e *env) *cobra.Command {
	var key string
	probe := &cobra.Command{
		Use:   "probe ID [--key sk-gpunet-…]",
		Short: "Have the node reach each replica as a request would and run its readiness check: which answer, how fast, and why not",
		Long: `The node reaches each replica of the service the way a client's request would
(through the agent's session with it, or the replica's relay node) and runs
the service's readiness check there. A replica its provider reports ready
that fails here is paid without serving: evict it (gpunet service evict ID
PROVIDER) and a replacement is placed elsewhere. Any node can probe; ask
another with --node to tell a provider's fault from a node's. The access key
is the one kept in HOME/services/ID.key (or --key); a public service needs
none. Exits 1 when a replica reported ready fails.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, svc, err := e.serviceArg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			id := svc.ID
			if key, err = e.accessKey(svc, key); err != nil {
				return err
			}
			p, err := cl.ProbeService(cmd.Context(), id, key)
			if err != nil {
				return err
			}
			names := e.names()
			failed := 0
			err = e.print(p, func(w io.Writer) {
				fmt.Fprintf(w, "service %d probed from %s:\n", id, p.Node)
				if len(p.Replicas) == 0 {
					fmt.Fprintln(w, "  no replica is placed")
				}
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				for _, r := range p.Replicas {
					verdict := fmt.Sprintf("ok in %.1f ms", r.Millis)
					if !r.OK {
						verdict = fmt.Sprintf("FAILED after %.1f ms: %s", r.Millis, r.Error)
					}
					reported := "reported not ready"
					if r.Ready {
						reported = "reported ready"
					}
					fmt.Fprintf(tw, "  %s\t%s\tvia %s\t%s\n", names.addr(r.Provider), reported, r.Route, verdict)
				}
				tw.Flush()
			})
			for _, r := range p.Replicas {
				if r.Ready && !r.OK {
					failed++
				}
			}
			if err == nil && failed > 0 {
				return fmt.Errorf("%d replica(s) reported ready failed the probe from %s: evict with %s", failed, p.Node, hint(fmt.Sprintf("service evict %d PROVIDER", id)))
			}
			return err
		},
	}
	probe.Flags().StringVar(&key, "key", "", "the access key (default: the one kept in HOME/services/ID.key)")
	return probe
}
