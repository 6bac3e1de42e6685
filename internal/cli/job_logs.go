package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func jobLogsCmd(e *env) *cobra.Command {
	var from string
	var poll time.Duration
	var follow bool
	rank := -1
	logs := &cobra.Command{
		Use:   "logs ID [--from KEY] [-f] [--rank N]",
		Short: "Print a job's log, decrypted: live while it runs (-f, the default), the full log once it is done",
		Long: `Print a job's log, decrypted with its owner's key. While the job runs it
follows the live log until the job ends (-f/--follow, the default;
--follow=false prints what there is and returns); once the job is done it
prints the full log its result holds. A cancelled job has no result: its
log is what the node relayed while it ran, which job cancel keeps in the
home. A finished gang's log (resources.nodes > 1) is every member's, each
line prefixed with "[rank N] "; --rank N prints member N's alone. With
--output json each line is a JSON object: {"job": ID, "line": TEXT}.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			jc, j, err := e.ownerClient(cmd.Context(), from, id, "read its log")
			if err != nil {
				return err
			}
			if rank >= 0 && (!j.Spec.Gang() || !j.Done()) {
				return fmt.Errorf("--rank %d: job %d is not a finished gang (resources.nodes %d, %s); its log has no members", rank, id, j.Spec.Nodes, j.State)
			}
			var w io.Writer = e.stdout
			var lines *jsonLines
			if e.output == "json" {
				lines = &jsonLines{enc: json.NewEncoder(e.stdout), job: id}
				w = lines
			}
			if rank >= 0 {
				err = jc.FetchGangLogs(cmd.Context(), j, rank, w)
			} else if follow {
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
	logs.Flags().IntVar(&rank, "rank", -1, "a finished gang's member of this rank only")
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
