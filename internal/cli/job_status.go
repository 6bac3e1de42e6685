package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/ledger"
)

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
