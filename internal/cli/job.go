package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
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

// ownerClient returns the consumer client of job id's owner, with the job:
// the key named from, or, without from, the keyring's key of the job's
// owner (the only key that can read its logs and outputs or cancel it).
// A key that does not own the job is refused here, naming the owner, so
// that no command gets as far as a decryption error; what names the
// refusal ("read its logs", "cancel it").
func (e *env) ownerClient(ctx context.Context, from string, id uint64, what string) (*jobclient.Client, *ledger.Job, error) {
	cl, err := e.client()
	if err != nil {
		return nil, nil, err
	}
	j, err := cl.Job(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	names := e.names()
	owner := names.name(j.Owner)
	if from == "" {
		if owner == "" {
			return nil, j, fmt.Errorf("job %d belongs to %s, whose key is not in %s/keyring: only its owner can %s", id, j.Owner, e.home, what)
		}
		from = owner
	}
	kr, err := e.keyring()
	if err != nil {
		return nil, j, err
	}
	if k, err := kr.Lookup(from); err != nil {
		return nil, j, err
	} else if k.Address != j.Owner {
		return nil, j, notOwner(&jobclient.NotOwnerError{Job: id, Owner: j.Owner, Key: k.Address}, names, what)
	}
	jc, err := e.jobClient(ctx, from)
	return jc, j, err
}

// notOwner says whose job it is, by name where the keyring knows the
// owner: "job 3 belongs to gpu1… (alice), not to carol (gpu1…)".
func notOwner(no *jobclient.NotOwnerError, names keyNames, what string) error {
	owner := no.Owner.String()
	if n := names.name(no.Owner); n != "" {
		owner += " (" + n + ")"
	}
	return fmt.Errorf("job %d belongs to %s, not to %s: only its owner can %s", no.Job, owner, names.addr(no.Key), what)
}

// signer returns the name of the key to sign with: from, or the only key
// in the keyring. With several keys and no from it says which there are.
func (e *env) signer(from string) (string, error) {
	if from != "" {
		return from, nil
	}
	kr, err := e.keyring()
	if err != nil {
		return "", err
	}
	ks, err := kr.List()
	if err != nil {
		return "", err
	}
	switch len(ks) {
	case 0:
		return "", usageError{fmt.Errorf("no keys in %s: create one with `gpunet keys add NAME`, then pass --from NAME", kr.Dir())}
	case 1:
		return ks[0].Name, nil
	}
	var names []string
	for _, k := range ks {
		names = append(names, k.Name)
	}
	return "", usageError{fmt.Errorf("name the key to sign with: --from KEY (keys in %s: %s)", kr.Dir(), strings.Join(names, ", "))}
}

// loadSpec reads the job spec at path, or from stdin when path is "-"
// (then relative paths in it are relative to the working directory).
func loadSpec(cmd *cobra.Command, path string) (*jobspec.Spec, error) {
	var s *jobspec.Spec
	var err error
	if path == "-" {
		s, err = jobspec.LoadFrom(cmd.InOrStdin(), "<stdin>", ".")
	} else {
		s, err = jobspec.Load(path)
	}
	if err != nil {
		return nil, usageError{err}
	}
	if s.IsService() {
		return nil, usageError{fmt.Errorf("%s is a service (kind: service), not a job: deploy it with gpunet service deploy %s", path, path)}
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
		Use:   "quote SPEC.yaml|-",
		Short: "How many providers can run a job now, what it would cost, or why nobody can (- reads the spec from stdin)",
		Args:  exactArgs("SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadSpec(cmd, args[0])
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
			names := e.names()
			out := quoteView{Quote: q}
			if q.Code != "" {
				// It would wait: name the providers passed over for their
				// stake, and how to fix each.
				if out.UnderStaked, out.underStakedCount, err = underStaked(cmd.Context(), cl, names); err != nil {
					return err
				}
			}
			return e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "%d provider(s) can run %q now\n", q.Matching, s.Name)
				if q.Reason != "" {
					fmt.Fprintf(w, "it would wait: %s\n", q.Reason)
					printStakeFixes(w, out.UnderStaked, out.underStakedCount, names)
				} else {
					fmt.Fprintf(w, "price: %s/h per replica (%d replica(s)); at most %s if it runs its full %s\n",
						formatSync(q.PricePerHour), q.Replicas, formatSync(q.MaxCost), time.Duration(s.Timeout))
				}
				fmt.Fprintf(w, "submitting locks %s in escrow (max price × timeout × replicas + fee); unused escrow is refunded\n", formatSync(q.Escrow))
				if len(q.Tiers) > 0 {
					fmt.Fprintf(w, "each tier now (a job pays the larger of its provider's ask and the class's index × the tier's factor; this spec is %s):\n", ls.TierName())
					printQuoteTiers(w, q)
				}
				for _, b := range q.Best {
					fmt.Fprintf(w, "  %s  %s/h  score %d\n", names.addr(b.Provider), formatSync(b.PricePerHour), b.Score)
				}
			})
		},
	}
}

// quoteView is a quote as quote shows it: the ledger's, and the providers
// under-staked when the job would wait.
type quoteView struct {
	*ledger.Quote
	UnderStaked      []stakeFix `json:"under_staked,omitempty"`
	underStakedCount int
}

func jobCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "job", Short: "Run and manage jobs"}
	c.AddCommand(jobRunCmd(e), jobSubmitCmd(e), jobStatusCmd(e), jobLogsCmd(e), jobGetCmd(e), jobCancelCmd(e), jobWaitCmd(e), jobListCmd(e))
	return c
}

// fromFlag adds --from KEY to a command that signs: without it, the only
// key of the keyring signs.
func fromFlag(cmd *cobra.Command, from *string) {
	cmd.Flags().StringVar(from, "from", "", "the consumer's key (default: the only key in the keyring)")
}

// ownerFlag adds --from KEY to a command on an existing job.
func ownerFlag(cmd *cobra.Command, from *string) {
	cmd.Flags().StringVar(from, "from", "", "the job owner's key (default: the keyring's key of the job's owner)")
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
		Use:   "run SPEC.yaml|- [--from KEY] [--out DIR]",
		Short: "Submit a job, follow it to the end, then fetch and decrypt its outputs",
		Long: `Validate the spec, encrypt and upload its module and inputs, submit it with
escrow, follow it through queued → assigned → running → verifying → done,
then download and decrypt the outputs into --out and print the cost.
SPEC - reads the spec from stdin (paths in it relative to the working
directory). Ctrl-C detaches without cancelling: reattach with
gpunet job status|logs|wait|get ID.

Exit codes: 0 the job succeeded, 4 it failed, 5 it was cancelled (as job
wait); 1 and 2 as for every command.`,
		Args: exactArgs("SPEC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			jc, id, err := e.submitSpec(cmd, args[0], from, queue)
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
				fmt.Fprintf(e.stderr, "detached; job %d goes on. Reattach with: gpunet job status %d, gpunet job logs %d, gpunet job wait %d, gpunet job get %d\n", id, id, id, id, id)
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

// waitsForKey reports whether an assigned provider of j lacks the job key.
func waitsForKey(j *ledger.Job) bool {
	if j.Done() {
		return false
	}
	for _, a := range j.Assignments {
		if a.KeyGrant == nil {
			return true
		}
	}
	return false
}

// jobView is a job as job status shows it: the ledger's record and, while
// it runs, how far it is.
type jobView struct {
	*ledger.Job
	Progress *jobProgress `json:"progress,omitempty"`
	// UnderStaked are the providers passed over for their stake while
	// the job waits for one.
	UnderStaked      []stakeFix `json:"under_staked,omitempty"`
	underStakedCount int
}

// jobProgress is a running job's time and cost so far, by the latest
// block's time.
type jobProgress struct {
	// ElapsedSeconds is how long its longest-running replica has run;
	// LeftSeconds what its timeout leaves it.
	ElapsedSeconds uint64 `json:"elapsed_seconds"`
	LeftSeconds    uint64 `json:"left_seconds"`
	// CostSoFar is what its paid replicas have earned at their price, in
	// usync (settled when the job ends).
	CostSoFar uint64 `json:"cost_so_far"`
	// AsOf is the block time it is reckoned at (unix seconds).
	AsOf int64 `json:"as_of"`
}

// progressOf reckons a running job's progress at time now (unix seconds),
// or nil for a job that has not started or has ended.
func progressOf(j *ledger.Job, now int64) *jobProgress {
	if j.Done() {
		return nil
	}
	p := &jobProgress{AsOf: now}
	started := false
	for _, a := range j.Assignments {
		if a.StartedAt == 0 {
			continue
		}
		started = true
		ran := uint64(max(now-a.StartedAt, 0))
		if a.Commitment != nil || a.Result != nil {
			ran = a.Metered // reported: paid for what it reported
		}
		ran = min(ran, j.Spec.TimeoutSeconds)
		p.ElapsedSeconds = max(p.ElapsedSeconds, ran)
		if !a.Extra {
			p.CostSoFar += a.PricePerHour * ran / 3600
		}
	}
	if !started {
		return nil
	}
	p.LeftSeconds = j.Spec.TimeoutSeconds - p.ElapsedSeconds
	return p
}

func jobStatusCmd(e *env) *cobra.Command {
	var from string
	status := &cobra.Command{
		Use:   "status ID [--from KEY]",
		Short: "Show a job: state, reason, assignment, cost (so far and time left while it runs); with --from, also grants its key if due",
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
			// With --from, the owner's key grants the job key if the job
			// waits for it; without, status only reads (anyone may look,
			// and a status poll from the owner's home must not stand in
			// for the owner being online: audits then get the key handed
			// over by a committed replica).
			if from != "" && waitsForKey(j) {
				jc, _, err := e.ownerClient(cmd.Context(), from, id, "grant its key")
				switch {
				case err == nil:
					if granted, err := jc.GrantIfNeeded(cmd.Context(), j); err != nil {
						return err
					} else if granted {
						j, _ = cl.Job(cmd.Context(), id)
					}
				case from != "":
					return err
				}
			}
			v := jobView{Job: j}
			if st, err := cl.Status(cmd.Context()); err == nil {
				v.Progress = progressOf(j, st.LatestBlockTime.Unix())
			}
			names := e.names()
			if j.WaitCode != "" && !j.Done() {
				// It waits for a provider: name those passed over for
				// their stake, and how to fix each.
				if v.UnderStaked, v.underStakedCount, err = underStaked(cmd.Context(), cl, names); err != nil {
					return err
				}
			}
			return e.print(v, func(w io.Writer) {
				printJob(w, j, v.Progress, names)
				printStakeFixes(w, v.UnderStaked, v.underStakedCount, names)
			})
		},
	}
	ownerFlag(status, &from)
	return status
}

func jobLogsCmd(e *env) *cobra.Command {
	var from string
	var poll time.Duration
	var follow bool
	logs := &cobra.Command{
		Use:   "logs ID [--from KEY] [-f]",
		Short: "Print a job's log, decrypted: live while it runs (-f, the default), the full log once it is done",
		Long: `Print a job's log, decrypted with its owner's key. While the job runs it
follows the live log until the job ends (-f/--follow, the default;
--follow=false prints what there is and returns); once the job is done it
prints the full log its result holds. A cancelled job has no result: its
log is what the node relayed while it ran, which job cancel keeps in the
home. With --output json each line is a JSON object: {"job": ID, "line": TEXT}.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			jc, _, err := e.ownerClient(cmd.Context(), from, id, "read its log")
			if err != nil {
				return err
			}
			var w io.Writer = e.stdout
			var lines *jsonLines
			if e.output == "json" {
				lines = &jsonLines{enc: json.NewEncoder(e.stdout), job: id}
				w = lines
			}
			if follow {
				err = jc.FollowLogs(cmd.Context(), id, poll, w)
			} else {
				err = jc.Log(cmd.Context(), id, w)
			}
			if lines != nil {
				lines.flush()
			}
			return err
		},
	}
	ownerFlag(logs, &from)
	logs.Flags().BoolVarP(&follow, "follow", "f", true, "follow the live log until the job ends")
	logs.Flags().DurationVar(&poll, "poll", 300*time.Millisecond, "how often to look for new log output")
	return logs
}

// jsonLines writes a log as JSON lines, one object per line of text.
type jsonLines struct {
	enc *json.Encoder
	job uint64
	buf []byte
}

func (l *jsonLines) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if err := l.line(l.buf[:i]); err != nil {
			return 0, err
		}
		l.buf = l.buf[i+1:]
	}
}

func (l *jsonLines) line(b []byte) error {
	return l.enc.Encode(struct {
		Job  uint64 `json:"job"`
		Line string `json:"line"`
	}{l.job, string(b)})
}

func (l *jsonLines) flush() {
	if len(l.buf) > 0 {
		l.line(l.buf)
		l.buf = nil
	}
}

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

// cancelResult is job cancel's JSON: the job as the ledger settled it.
type cancelResult struct {
	*ledger.Job
	// Charged is what the cancel cost: the providers' pay and the fee.
	Charged uint64 `json:"charged"`
	// LogKept is where the job's log so far was kept, if it had one.
	LogKept string `json:"log_kept,omitempty"`
}

func jobCancelCmd(e *env) *cobra.Command {
	var from string
	cancel := &cobra.Command{
		Use:   "cancel ID [--from KEY]",
		Short: "Cancel a job: its providers are paid for the time they held or ran it, the rest of the escrow is refunded",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			jc, _, err := e.ownerClient(cmd.Context(), from, id, "cancel it")
			if err != nil {
				return err
			}
			j, err := jc.Cancel(cmd.Context(), id)
			if errors.Is(err, jobclient.ErrAlreadyDone) {
				return fmt.Errorf("job %d already %s; nothing to cancel (it cost %s, %s refunded)", j.ID, j.State, formatSync(j.Cost+j.Fee), formatSync(j.Refund))
			}
			if err != nil {
				return err
			}
			r := cancelResult{Job: j, Charged: j.Cost + j.Fee}
			if jc.SavedLog(id) != nil {
				r.LogKept = fmt.Sprintf("gpunet job logs %d", id)
			}
			names := e.names()
			return e.print(r, func(w io.Writer) {
				fmt.Fprintf(w, "job %d cancelled: charged %s (%s to providers, %s fee), refunded %s\n", j.ID, formatSync(r.Charged), formatSync(j.Cost), formatSync(j.Fee), formatSync(j.Refund))
				for _, a := range j.Assignments {
					if a.Paid > 0 {
						fmt.Fprintf(w, "  %s was paid %s\n", names.addr(a.Provider), formatSync(a.Paid))
					}
				}
				if r.LogKept != "" {
					fmt.Fprintf(w, "its log so far is kept: %s\n", r.LogKept)
				}
			})
		},
	}
	ownerFlag(cancel, &from)
	return cancel
}

func jobWaitCmd(e *env) *cobra.Command {
	var from string
	var poll time.Duration
	wait := &cobra.Command{
		Use:   "wait ID [--from KEY]",
		Short: "Wait for a job to end (granting its key when due) and exit with its outcome",
		Long: `Wait until job ID ends, granting its key to the providers the ledger assigns
(as job run does), print how it ended, and exit with its outcome:

  0  succeeded
  4  failed
  5  cancelled
  1  the job could not be followed (node unreachable, no such job); 2 a wrong call`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			jc, j, err := e.ownerClient(cmd.Context(), from, id, "grant its key")
			if err != nil && from != "" {
				return err
			}
			if err == nil {
				j, err = jc.Follow(cmd.Context(), id, poll, nil)
			} else {
				// Not the owner's home: follow without granting.
				j, err = e.followOnly(cmd.Context(), id, poll)
			}
			if err != nil {
				return err
			}
			names := e.names()
			if err := e.print(j, func(w io.Writer) { printJob(w, j, nil, names) }); err != nil {
				return err
			}
			return outcome(j)
		},
	}
	ownerFlag(wait, &from)
	wait.Flags().DurationVar(&poll, "poll", 250*time.Millisecond, "how often to look at the job")
	return wait
}

// followOnly polls job id until it ends, granting nothing.
func (e *env) followOnly(ctx context.Context, id uint64, poll time.Duration) (*ledger.Job, error) {
	cl, err := e.client()
	if err != nil {
		return nil, err
	}
	for {
		j, err := cl.Job(ctx, id)
		if err != nil || j.Done() {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// jobStateList is the states job list --state takes.
var jobStateList = []string{ledger.JobQueued, ledger.JobAssigned, ledger.JobRunning, ledger.JobVerifying, ledger.JobSucceeded, ledger.JobFailed, ledger.JobCancelled}

func jobListCmd(e *env) *cobra.Command {
	var from, state string
	var limit int
	list := &cobra.Command{
		Use:   "list [--from KEY|ADDR] [--state STATE]",
		Short: "List jobs, newest first: a key's (--from), or everyone's; --state filters",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != "" && !slices.Contains(jobStateList, state) {
				return usageError{fmt.Errorf("--state %q: want one of %s", state, strings.Join(jobStateList, ", "))}
			}
			if limit < 1 || limit > 1000 {
				return usageError{fmt.Errorf("--limit %d: want 1 to 1000", limit)}
			}
			var owner *address.Address
			if from != "" {
				a, err := e.resolveAddress(from)
				if err != nil {
					return err
				}
				owner = &a
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			l, err := cl.ListJobs(cmd.Context(), owner, state, limit)
			if err != nil {
				return err
			}
			names := e.names()
			return e.print(l.Jobs, func(w io.Writer) {
				if len(l.Jobs) == 0 {
					fmt.Fprintln(w, "No jobs.")
					return
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tOWNER\tSTATE\tCOST\tREASON")
				for _, j := range l.Jobs {
					who := names.name(j.Owner)
					if who == "" {
						who = shortAddr(j.Owner)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Spec.Name, who, j.State, formatSync(j.Cost+j.Fee), j.Reason)
				}
				tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&from, "from", "", "list the jobs of this key or address (default: everyone's)")
	list.Flags().StringVar(&state, "state", "", "only jobs in this state: "+strings.Join(jobStateList, ", "))
	list.Flags().IntVar(&limit, "limit", 100, "at most this many jobs")
	return list
}

// shortAddr is an address cut for a table: "gpu1abcd…wxyz".
func shortAddr(a address.Address) string {
	s := a.String()
	if len(s) <= 16 {
		return s
	}
	return s[:8] + "…" + s[len(s)-4:]
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

// submitSpec loads the spec at path (- for stdin), checks that its
// max_price is not below every ask that fits it (unless queue), and
// submits it as key from (default: the keyring's only key).
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
		if err := jc.CheckPrice(ctx, s); errors.As(err, &pe) {
			return nil, 0, usageError{fmt.Errorf("max_price %s/h is below every ask that fits this job (%s); raise max_price, or pass --queue to submit it anyway and wait for a cheaper provider", formatSync(pe.MaxPrice), pe.Quote.Reason)}
		} else if err != nil {
			return nil, 0, err
		}
	}
	id, err := jc.Submit(ctx, s)
	return jc, id, err
}

// jobOutcomeError is a job that ended other than succeeded, for the exit
// code (ExitJobFailed, ExitJobCancelled).
type jobOutcomeError struct{ j *ledger.Job }

func (e jobOutcomeError) Error() string {
	return fmt.Sprintf("job %d %s: %s", e.j.ID, e.j.State, e.j.Reason)
}

// outcome is nil for a job that succeeded, a jobOutcomeError otherwise.
func outcome(j *ledger.Job) error {
	if j.State == ledger.JobSucceeded {
		return nil
	}
	return jobOutcomeError{j}
}

// finishJob fetches a finished job's outputs into out and prints its end.
func (e *env) finishJob(ctx context.Context, jc *jobclient.Client, j *ledger.Job, out string) error {
	if !j.Done() {
		return fmt.Errorf("job %d is %s (%s); outputs arrive when it is done (gpunet job wait %d)", j.ID, j.State, j.Reason, j.ID)
	}
	if out == "" {
		out = fmt.Sprintf("job-%d", j.ID)
	}
	var fetchErr error
	if j.DeliveredResult() != nil {
		fetchErr = jc.FetchOutputs(ctx, j, out)
	}
	type summary struct {
		*ledger.Job
		Out string `json:"out,omitempty"`
	}
	s := summary{Job: j}
	if fetchErr == nil && j.DeliveredResult() != nil {
		s.Out = out
	}
	names := e.names()
	if err := e.print(s, func(w io.Writer) {
		printJob(w, j, nil, names)
		if s.Out != "" {
			fmt.Fprintf(w, "outputs:  %s\n", s.Out)
		}
	}); err != nil {
		return err
	}
	if fetchErr != nil {
		return fmt.Errorf("job %d: outputs: %w", j.ID, fetchErr)
	}
	return outcome(j)
}

func printJob(w io.Writer, j *ledger.Job, p *jobProgress, names keyNames) {
	fmt.Fprintf(w, "job %d %q (%s) owned by %s\nstate:    %s\n", j.ID, j.Spec.Name, j.Spec.Executor, names.addr(j.Owner), j.State)
	if j.Reason != "" {
		fmt.Fprintf(w, "reason:   %s\n", j.Reason)
	}
	if j.Released != "" {
		fmt.Fprintf(w, "handed back: %s\n", j.Released)
	}
	printCheckpoints(w, j, names)
	for _, a := range j.Assignments {
		role := "provider:"
		if a.Extra {
			role = "auditor: "
		}
		fmt.Fprintf(w, "%s %s at %s/h", role, names.addr(a.Provider), formatSync(a.PricePerHour))
		switch {
		case a.Result != nil:
			fmt.Fprintf(w, ", ran %ds, exit %d", a.Result.MeteredSeconds, a.Result.ExitCode)
		case a.Commitment != nil:
			fmt.Fprintf(w, ", ran %ds, result committed", a.Metered)
		case a.StartedAt != 0 && !j.Done():
			fmt.Fprintf(w, ", running")
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
		return
	}
	if p != nil {
		timeout := time.Duration(j.Spec.TimeoutSeconds) * time.Second
		fmt.Fprintf(w, "running:  %s of its %s timeout, %s left\n", time.Duration(p.ElapsedSeconds)*time.Second, timeout, time.Duration(p.LeftSeconds)*time.Second)
		fmt.Fprintf(w, "so far:   %s (settled when it ends)\n", formatSync(p.CostSoFar))
	}
	fmt.Fprintf(w, "escrow:   %s\n", formatSync(j.Escrow))
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
