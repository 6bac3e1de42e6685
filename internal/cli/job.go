package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/jobtext"
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
		return "", usageError{fmt.Errorf("no keys in %s: create one with `%s`, then pass --from NAME", kr.Dir(), hint("keys add NAME"))}
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

// shortAddr is an address cut for a table: "gpu1abcd…wxyz".
func shortAddr(a address.Address) string {
	s := a.String()
	if len(s) <= 16 {
		return s
	}
	return s[:8] + "…" + s[len(s)-4:]
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

// verdictText is the "verified:" line: jobtext says what the audit
// lottery and the replicas did.
func verdictText(j *ledger.Job) string { return jobtext.Verified(j) }
