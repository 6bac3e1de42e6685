package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/seal"
)

func serviceLogsCmd(e *env) *cobra.Command {
	var from string
	var follow bool
	var poll time.Duration
	logs := &cobra.Command{
		Use:   "logs ID [-f] [--from KEY]",
		Short: "Print a service's live log (every replica's), decrypted with its owner's key; -f follows it until the service stops",
		Long: `Print what the node holds of a service's live log: every replica's output,
sealed by its provider to the owner's key and decrypted here. -f/--follow
keeps printing new output until the service stops or Ctrl-C. With --output
json each line is a JSON object: {"service": ID, "provider": ADDR, "line": TEXT}.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseServiceID(args[0])
			if err != nil {
				return err
			}
			svc, owner, err := e.serviceOwner(cmd, from, id, "read its log")
			if err != nil {
				return err
			}
			kr, err := e.keyring()
			if err != nil {
				return err
			}
			key, err := kr.Get(owner)
			if err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var next uint64
			done := svc.Done()
			for {
				page, err := cl.ServiceLogs(ctx, id, next)
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				if page.Dropped > 0 {
					e.logLine(id, address.Address{}, fmt.Sprintf("[gpunet: %d earlier log chunks are no longer held by the node]", page.Dropped))
				}
				for _, ch := range page.Chunks {
					plain, err := seal.Decrypt(bytes.NewReader(ch.Data), key.Identity())
					var text []byte
					if err == nil {
						text, err = io.ReadAll(plain)
					}
					if err != nil {
						e.logLine(id, ch.Provider, fmt.Sprintf("[gpunet: log chunk %d from %s unreadable: %v]", ch.Seq, ch.Provider, err))
						continue
					}
					for _, l := range bytes.SplitAfter(text, []byte("\n")) {
						if len(l) > 0 {
							e.logLine(id, ch.Provider, string(bytes.TrimSuffix(l, []byte("\n"))))
						}
					}
				}
				next = page.Next
				if !follow || done {
					return nil
				}
				if len(page.Chunks) == 0 {
					select {
					case <-ctx.Done():
						return nil
					case <-time.After(poll):
					}
				}
				// One more read after the service ends picks up its last
				// output.
				if s, err := cl.Service(ctx, id); err == nil && s.Done() {
					done = true
				}
			}
		},
	}
	ownerFlagService(logs, &from)
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log until the service stops")
	logs.Flags().DurationVar(&poll, "poll", 500*time.Millisecond, "how often to look for new output with -f")
	return logs
}

// logLine prints one line of a service's log: as it is, or as a JSON
// object with --output json.
func (e *env) logLine(id uint64, provider address.Address, line string) {
	if e.output != "json" {
		fmt.Fprintln(e.stdout, line)
		return
	}
	v := struct {
		Service  uint64 `json:"service"`
		Provider string `json:"provider,omitempty"`
		Line     string `json:"line"`
	}{Service: id, Line: line}
	if provider != (address.Address{}) {
		v.Provider = provider.String()
	}
	json.NewEncoder(e.stdout).Encode(v)
}
