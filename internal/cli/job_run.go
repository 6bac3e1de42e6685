package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

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
