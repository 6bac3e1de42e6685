package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/ledger"
)

// serviceView is a service as service status shows it: the ledger's
// record, where to reach it, and the block time its ages are reckoned at.
type serviceView struct {
	*ledger.Service
	Addresses serviceAddresses `json:"addresses"`
	// AsOf is the latest block's time (unix seconds); 0 when the node did
	// not say.
	AsOf int64 `json:"as_of"`
}

func serviceStatusCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "Show a service: state, budget and when it runs out, each replica (provider, price, ready, relay, heartbeat, paid), ended replicas and addresses",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, s, err := e.serviceArg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			id := s.ID
			v := serviceView{Service: s, Addresses: addressesOf(cl.Base(), id, &s.Spec)}
			if st, err := cl.Status(cmd.Context()); err == nil {
				v.AsOf = st.LatestBlockTime.Unix()
			}
			names := e.names()
			return e.print(v, func(w io.Writer) { printService(w, &v, names) })
		},
	}
}

// printService writes a service for people.
func printService(w io.Writer, v *serviceView, names keyNames) {
	s := v.Service
	fmt.Fprintf(w, "service %d %q: %s\n", s.ID, s.Spec.Name, s.State)
	if s.Reason != "" {
		fmt.Fprintf(w, "reason:      %s\n", s.Reason)
	}
	fmt.Fprintf(w, "owner:       %s\n", names.addr(s.Owner))
	fmt.Fprintf(w, "image:       %s\n", s.Spec.Image)
	if o := s.Spec.OpenAI; o != nil {
		// Providers read this before they serve it: exact answers are
		// disputed and an outvoted replica is slashed.
		verify := "not declared bit-exact: checked, differences reported, no one slashed for them"
		switch {
		case o.Exact:
			verify = "declared bit-exact (openai.exact): a replica outvoted on a checked request is slashed"
		case o.LogprobTolE9 > 0:
			whole, frac := o.LogprobTolE9/1e9, o.LogprobTolE9%1e9
			tol := strconv.FormatUint(whole, 10)
			if frac != 0 {
				tol += strings.TrimRight(fmt.Sprintf(".%09d", frac), "0")
			}
			verify = "tolerance " + tol + " nats on log-probabilities (openai.tolerance): a replica whose answer two others judge different beyond it is slashed"
		}
		fmt.Fprintf(w, "openai:      models %s; %s\n", strings.Join(o.Models, ", "), verify)
	}
	if s.Public {
		fmt.Fprintln(w, "access:      public (anyone, without a key)")
	} else {
		fmt.Fprintf(w, "access:      private, %d key(s) (%s)\n", len(s.KeyHashes), hint(fmt.Sprintf("service key %d", s.ID)))
	}
	fmt.Fprintf(w, "budget:      %s in all; escrow %s; paid to providers %s; fee %s", formatSync(s.Budget), formatSync(s.Escrow), formatSync(s.Cost), formatSync(s.Fee))
	if s.Refund != 0 {
		fmt.Fprintf(w, "; refunded %s", formatSync(s.Refund))
	}
	fmt.Fprintln(w)
	switch {
	case s.Done():
		fmt.Fprintf(w, "stopped at:  %s\n", unixTime(s.StoppedAt))
	case s.RunsOutAt != 0:
		fmt.Fprintf(w, "runs out at: %s%s\n", unixTime(s.RunsOutAt), inTime(s.RunsOutAt, v.AsOf))
	default:
		fmt.Fprintln(w, "runs out at: never at this rate (no replica is being paid)")
	}
	if s.BudgetWarnedAt != 0 && !s.Done() {
		fmt.Fprintf(w, "warning:     the budget runs low (warned at %s): top it up with %s\n", unixTime(s.BudgetWarnedAt), hint(fmt.Sprintf("service topup %d AMOUNT", s.ID)))
	}
	fmt.Fprintf(w, "replicas:    %d wanted, %d placed, %d ready", s.Spec.Replicas, len(s.Replicas), readyCount(s))
	if s.WaitCode != "" && len(s.Replicas) < int(s.Spec.Replicas) && !s.Done() {
		fmt.Fprintf(w, " (waiting for a provider: %s)", s.WaitCode)
	}
	fmt.Fprintln(w)
	if len(s.Replicas) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  PROVIDER\tPRICE/H\tREADY SINCE\tRELAY\tHEARTBEAT\tPAID")
		for _, r := range s.Replicas {
			ready := "starting"
			switch {
			case r.ReadyAt != 0 && r.Ready:
				ready = unixTime(r.ReadyAt)
			case r.ReadyAt != 0:
				ready = "not ready (was " + unixTime(r.ReadyAt) + ")"
			}
			relay := r.Relay
			if relay == "" {
				relay = "-"
			}
			hb := "never"
			if r.HeartbeatAt != 0 {
				hb = ago(r.HeartbeatAt, v.AsOf)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", names.addr(r.Provider), formatSync(r.PricePerHour), ready, relay, hb, formatSync(r.Paid))
		}
		tw.Flush()
	}
	if len(s.Ended) > 0 {
		fmt.Fprintln(w, "ended replicas (latest last):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  PROVIDER\tENDED\tPAID\tWHY")
		ended := s.Ended
		if len(ended) > 5 {
			ended = ended[len(ended)-5:]
		}
		for _, r := range ended {
			why := r.Why
			if r.Slashed != 0 {
				why += fmt.Sprintf(" (slashed %s)", formatSync(r.Slashed))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", names.addr(r.Provider), unixTime(r.EndedAt), formatSync(r.Paid), why)
		}
		tw.Flush()
	}
	if !s.Done() {
		fmt.Fprintln(w, "addresses (through any node):")
		printAddresses(w, s.ID, v.Addresses)
	}
}

// unixTime writes unix seconds as a UTC time.
func unixTime(t int64) string {
	return time.Unix(t, 0).UTC().Format(time.DateTime) + " UTC"
}

// inTime writes " (in 3h0m0s)" for a time after now, "" when now is not
// known or it has passed.
func inTime(t, now int64) string {
	if now == 0 || t <= now {
		return ""
	}
	return fmt.Sprintf(" (in %s)", time.Duration(t-now)*time.Second)
}

// ago writes how long before now t was: "12s ago".
func ago(t, now int64) string {
	if now == 0 {
		return unixTime(t)
	}
	return fmt.Sprintf("%s ago", time.Duration(max(now-t, 0))*time.Second)
}
