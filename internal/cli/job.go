package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
)

// jobClient returns the consumer client for key name.
func (e *env) jobClient(ctx context.Context, name string) (*jobclient.Client, error) {
	kr, err := e.keyring()
	if err != nil {
		return nil, err
	}
	key, err := kr.Get(name)
	if err != nil {
		return nil, err
	}
	cl, err := e.client()
	if err != nil {
		return nil, err
	}
	st, err := cl.Status(ctx)
	if err != nil {
		return nil, err
	}
	return jobclient.New(cl, key, e.home, st.ChainID), nil
}

func loadSpec(path string) (*jobspec.Spec, error) {
	s, err := jobspec.Load(path)
	if err != nil {
		return nil, usageError{err}
	}
	return s, nil
}

func parseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageError{fmt.Errorf("job id %q: want a positive integer", s)}
	}
	return id, nil
}

func quoteCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "quote SPEC.yaml",
		Short: "How many providers can run a job now, what it would cost, or why nobody can",
		Args:  exactArgs("SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadSpec(args[0])
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			ls := jobclient.QuoteSpec(s)
			q, err := cl.Quote(cmd.Context(), &ls)
			if err != nil {
				return err
			}
			return e.print(q, func(w io.Writer) {
				fmt.Fprintf(w, "%d provider(s) can run %q now\n", q.Matching, s.Name)
				if q.Reason != "" {
					fmt.Fprintf(w, "it would wait: %s\n", q.Reason)
				} else {
					fmt.Fprintf(w, "price: %s/h per replica (%d replica(s)); at most %s if it runs its full %s\n",
						formatSync(q.PricePerHour), q.Replicas, formatSync(q.MaxCost), time.Duration(s.Timeout))
				}
				fmt.Fprintf(w, "submitting locks %s in escrow (max price × timeout × replicas + fee); unused escrow is refunded\n", formatSync(q.Escrow))
				for _, b := range q.Best {
					fmt.Fprintf(w, "  %s  %s/h  score %d\n", b.Provider, formatSync(b.PricePerHour), b.Score)
				}
			})
		},
	}
}

func jobCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "job", Short: "Run and manage jobs"}
	c.AddCommand(jobRunCmd(e), jobSubmitCmd(e), jobStatusCmd(e), jobLogsCmd(e), jobGetCmd(e), jobCancelCmd(e), jobListCmd(e))
	return c
}

// fromFlag adds the required --from KEY flag to cmd.
func fromFlag(cmd *cobra.Command, from *string) {
	cmd.Flags().StringVar(from, "from", "", "the consumer's key (required)")
	cmd.MarkFlagRequired("from")
}

// queueFlag adds --queue to cmd.
func queueFlag(cmd *cobra.Command, queue *bool) {
	cmd.Flags().BoolVar(queue, "queue", false, "submit even if max_price is below every ask (the job waits for a cheaper provider)")
}

func jobRunCmd(e *env) *cobra.Command {
	var from, out string
	var poll time.Duration
	var queue bool
	run := &cobra.Command{
		Use:   "run SPEC.yaml --from KEY [--out DIR]",
		Short: "Submit a job, follow it to the end, then fetch and decrypt its outputs",
		Long: `Validate the spec, encrypt and upload its module and inputs, submit it with
escrow, follow it through queued → assigned → running → verifying → done,
then download and decrypt the outputs into --out and print the cost.
Ctrl-C detaches without cancelling: reattach with gpunet job status|logs|get ID.`,
		Args: exactArgs("SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			jc, id, err := e.submitSpec(cmd.Context(), args[0], from, queue)
			if err != nil {
				return err
			}
			start := time.Now()
			text := e.output != "json"
			if text {
				fmt.Fprintf(e.stdout, "job %d submitted\n", id)
			}
			// The job's log streams to stdout while it runs, lines marked
			// "│"; state changes are marked with their time.
			o := jobclient.WatchOptions{Poll: poll, OnChange: func(j *ledger.Job) {
				if text {
					fmt.Fprintf(e.stdout, "  %6.1fs  %-9s %s\n", time.Since(start).Seconds(), j.State, j.Reason)
				}
			}}
			logs := &prefixWriter{w: e.stdout, prefix: "  │ "}
			if text {
				o.Logs = logs
			}
			j, err := jc.Watch(cmd.Context(), id, o)
			logs.flush()
			if errors.Is(err, context.Canceled) {
				fmt.Fprintf(e.stderr, "detached; job %d goes on. Reattach with: gpunet job status %d, gpunet job logs %d --from %s, gpunet job get %d --from %s\n", id, id, id, from, id, from)
				return nil
			}
			if err != nil {
				return err
			}
			return e.finishJob(cmd.Context(), jc, j, out)
		},
	}
	fromFlag(run, &from)
	queueFlag(run, &queue)
	run.Flags().StringVar(&out, "out", "", "where to put the outputs (default ./job-ID)")
	run.Flags().DurationVar(&poll, "poll", 250*time.Millisecond, "how often to look at the job")
	return run
}

func jobSubmitCmd(e *env) *cobra.Command {
	var from string
	var queue bool
	submit := &cobra.Command{
		Use:   "submit SPEC.yaml --from KEY",
		Short: "Submit a job and return its id",
		Args:  exactArgs("SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			jc, id, err := e.submitSpec(cmd.Context(), args[0], from, queue)
			if err != nil {
				return err
			}
			// Grant the key at once if the job was placed in its block.
			if j, err := jc.Chain.Job(cmd.Context(), id); err == nil {
				jc.GrantIfNeeded(cmd.Context(), j)
			}
			return e.print(map[string]uint64{"id": id}, func(w io.Writer) {
				fmt.Fprintf(w, "job %d submitted; follow it with: gpunet job status %d --from %s\n", id, id, from)
			})
		},
	}
	fromFlag(submit, &from)
	queueFlag(submit, &queue)
	return submit
}

func jobStatusCmd(e *env) *cobra.Command {
	var from string
	status := &cobra.Command{
		Use:   "status ID [--from KEY]",
		Short: "Show a job: state, reason, assignment, cost (with --from, also grants its key if due)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			j, err := cl.Job(cmd.Context(), id)
			if err != nil {
				return err
			}
			if from != "" {
				if jc, err := e.jobClient(cmd.Context(), from); err == nil {
					if granted, err := jc.GrantIfNeeded(cmd.Context(), j); err != nil {
						return err
					} else if granted {
						j, _ = cl.Job(cmd.Context(), id)
					}
				}
			}
			return e.print(j, func(w io.Writer) { printJob(w, j) })
		},
	}
	status.Flags().StringVar(&from, "from", "", "the owner's key, to grant the job key if the job waits for it")
	return status
}

func jobLogsCmd(e *env) *cobra.Command {
	var from string
	var poll time.Duration
	logs := &cobra.Command{
		Use:   "logs ID --from KEY",
		Short: "Print a job's log, decrypted: live while it runs, the full log once it is done",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			jc, err := e.jobClient(cmd.Context(), from)
			if err != nil {
				return err
			}
			return jc.FollowLogs(cmd.Context(), id, poll, e.stdout)
		},
	}
	fromFlag(logs, &from)
	logs.Flags().DurationVar(&poll, "poll", 300*time.Millisecond, "how often to look for new log output")
	return logs
}

func jobGetCmd(e *env) *cobra.Command {
	var from, out string
	get := &cobra.Command{
		Use:   "get ID --from KEY [--out DIR]",
		Short: "Download and decrypt a finished job's outputs",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			jc, err := e.jobClient(cmd.Context(), from)
			if err != nil {
				return err
			}
			j, err := jc.Chain.Job(cmd.Context(), id)
			if err != nil {
				return err
			}
			return e.finishJob(cmd.Context(), jc, j, out)
		},
	}
	fromFlag(get, &from)
	get.Flags().StringVar(&out, "out", "", "where to put the outputs (default ./job-ID)")
	return get
}

func jobCancelCmd(e *env) *cobra.Command {
	var from string
	cancel := &cobra.Command{
		Use:   "cancel ID --from KEY",
		Short: "Cancel a job; unused escrow is refunded",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return e.sendMsg(cmd, from, 0, &ledger.MsgCancelJob{JobID: id})
		},
	}
	fromFlag(cancel, &from)
	return cancel
}

func jobListCmd(e *env) *cobra.Command {
	var from string
	list := &cobra.Command{
		Use:   "list --from KEY",
		Short: "List a key's jobs, newest first",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := e.resolveAddress(from)
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			l, err := cl.Jobs(cmd.Context(), a, 100)
			if err != nil {
				return err
			}
			return e.print(l.Jobs, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tSTATE\tCOST\tREASON")
				for _, j := range l.Jobs {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", j.ID, j.Spec.Name, j.State, formatSync(j.Cost+j.Fee), j.Reason)
				}
				tw.Flush()
			})
		},
	}
	fromFlag(list, &from)
	return list
}

// prefixWriter writes whole lines to w, each with prefix.
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
}

func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf)
		p.buf = nil
	}
}

// submitSpec loads the spec at path, checks that its max_price is not
// below every ask that fits it (unless queue), and submits it as key from.
func (e *env) submitSpec(ctx context.Context, path, from string, queue bool) (*jobclient.Client, uint64, error) {
	s, err := loadSpec(path)
	if err != nil {
		return nil, 0, err
	}
	jc, err := e.jobClient(ctx, from)
	if err != nil {
		return nil, 0, err
	}
	if !queue {
		var pe *jobclient.PriceError
		if err := jc.CheckPrice(ctx, s); errors.As(err, &pe) {
			return nil, 0, usageError{fmt.Errorf("max_price %s/h is below every ask that fits this job (%s); raise max_price, or pass --queue to submit it anyway and wait for a cheaper provider", formatSync(pe.MaxPrice), pe.Quote.Reason)}
		} else if err != nil {
			return nil, 0, err
		}
	}
	id, err := jc.Submit(ctx, s)
	return jc, id, err
}

// finishJob fetches a finished job's outputs into out and prints its end.
func (e *env) finishJob(ctx context.Context, jc *jobclient.Client, j *ledger.Job, out string) error {
	if !j.Done() {
		return fmt.Errorf("job %d is %s (%s); outputs arrive when it is done", j.ID, j.State, j.Reason)
	}
	if out == "" {
		out = fmt.Sprintf("job-%d", j.ID)
	}
	var fetchErr error
	if j.State != ledger.JobCancelled {
		fetchErr = jc.FetchOutputs(ctx, j, out)
	}
	type summary struct {
		*ledger.Job
		Out string `json:"out,omitempty"`
	}
	s := summary{Job: j}
	if fetchErr == nil && j.State != ledger.JobCancelled {
		s.Out = out
	}
	if err := e.print(s, func(w io.Writer) {
		printJob(w, j)
		if s.Out != "" {
			fmt.Fprintf(w, "outputs:  %s\n", s.Out)
		}
	}); err != nil {
		return err
	}
	if fetchErr != nil {
		return fmt.Errorf("job %d: outputs: %w", j.ID, fetchErr)
	}
	if j.State != ledger.JobSucceeded {
		return fmt.Errorf("job %d %s: %s", j.ID, j.State, j.Reason)
	}
	return nil
}

func printJob(w io.Writer, j *ledger.Job) {
	fmt.Fprintf(w, "job %d %q (%s) owned by %s\nstate:    %s\n", j.ID, j.Spec.Name, j.Spec.Executor, j.Owner, j.State)
	if j.Reason != "" {
		fmt.Fprintf(w, "reason:   %s\n", j.Reason)
	}
	for _, a := range j.Assignments {
		role := "provider:"
		if a.Extra {
			role = "auditor: "
		}
		fmt.Fprintf(w, "%s %s at %s/h", role, a.Provider, formatSync(a.PricePerHour))
		switch {
		case a.Result != nil:
			fmt.Fprintf(w, ", ran %ds, exit %d", a.Result.MeteredSeconds, a.Result.ExitCode)
		case a.Commitment != nil:
			fmt.Fprintf(w, ", ran %ds, result committed", a.Metered)
		}
		if a.Outcome != "" {
			fmt.Fprintf(w, ", %s", a.Outcome)
		}
		if a.Slashed > 0 {
			fmt.Fprintf(w, ", slashed %s", formatSync(a.Slashed))
		}
		fmt.Fprintln(w)
	}
	if j.Verdict != "" {
		fmt.Fprintf(w, "verified: %s\n", verdictText(j))
	}
	if j.Done() {
		fmt.Fprintf(w, "cost:     %s to providers + %s fee; %s refunded\n", formatSync(j.Cost), formatSync(j.Fee), formatSync(j.Refund))
		if j.AuditCost > 0 {
			fmt.Fprintf(w, "          (the treasury paid %s for verification replicas)\n", formatSync(j.AuditCost))
		}
	} else {
		fmt.Fprintf(w, "escrow:   %s\n", formatSync(j.Escrow))
	}
}

func verdictText(j *ledger.Job) string {
	switch j.Verdict {
	case ledger.VerdictValidated:
		n := 0
		for _, a := range j.Assignments {
			if a.Outcome == ledger.OutcomeMajority {
				n++
			}
		}
		return fmt.Sprintf("yes, %d of %d replicas returned the same result", n, len(j.Assignments))
	case ledger.VerdictUnverified:
		switch {
		case j.AuditDrawn && j.AuditDropped != "":
			return "no: an audit was drawn and dropped (" + j.AuditDropped + ")"
		case j.AuditDrawn:
			return "no: an audit was drawn and did not run"
		}
		return "no, one replica and no audit drawn (spot)"
	case ledger.VerdictUnchecked:
		return "not checked (verification none, or not deterministic)"
	case ledger.VerdictNoMajority:
		return "no majority among the replicas"
	}
	return j.Verdict
}
