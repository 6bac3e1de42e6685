package cli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// TestDevnetLog: the devnet's log goes to HOME/logs/devnet.log; on stderr,
// among the step-by-step lines, only what needs the user appears (errors,
// and a provider's word to its operator, while the devnet runs), each a
// sentence that says who, about what, what went wrong and where the rest
// is, never a raw level=WARN/ERROR line (issue 33: ten in one run).
func TestDevnetLog(t *testing.T) {
	home := t.TempDir()
	var stderr bytes.Buffer
	ctx, stop := context.WithCancel(t.Context())
	log, f, err := openDevnetLog(ctx, home, slog.LevelInfo, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	p2 := log.With("provider", "provider-2")
	p2.Info("provider online")
	p2.Warn("key handover", "job", 1, "err", "job is not in the right state")
	log.Warn("FAULT INJECTION: committing a wrong result")
	log.Debug("below the level")
	if stderr.Len() != 0 {
		t.Errorf("info and warnings on stderr:\n%s", stderr.String())
	}
	p2.With("job", 7).Error("commit result", "err", errors.New("tx rejected (code 20)"))
	log.Error("netstats stopped; the dashboard and chain metrics are not updated", "err", "disk full")
	p2.Warn("UNDER-STAKED: the stake is under the ledger's minimum; send 5usync to this provider")
	// Stopping: what fails now fails because the devnet stops.
	stop()
	p2.Error("hardware challenge: commit failed", "challenge", 4, "err", context.Canceled)
	f.Close()

	want := "devnet: provider-2 (job 7): commit result: tx rejected (code 20) (the devnet's log: " + devnetLogFile(home) + ")\n" +
		"devnet: netstats stopped; the dashboard and chain metrics are not updated: disk full (the devnet's log: " + devnetLogFile(home) + ")\n" +
		"devnet: provider-2: UNDER-STAKED: the stake is under the ledger's minimum; send 5usync to this provider (the devnet's log: " + devnetLogFile(home) + ")\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(stderr.String(), "level=") {
		t.Errorf("a raw log line on stderr:\n%s", stderr.String())
	}
	b, err := os.ReadFile(devnetLogFile(home))
	if err != nil {
		t.Fatal(err)
	}
	file := string(b)
	for _, want := range []string{`level=INFO msg="provider online" provider=provider-2`, `level=WARN msg="key handover" provider=provider-2 job=1`, "FAULT INJECTION", `level=ERROR msg="commit result" provider=provider-2 job=7`, "netstats stopped", "UNDER-STAKED", `msg="hardware challenge: commit failed" provider=provider-2 challenge=4 err="context canceled"`} {
		if !strings.Contains(file, want) {
			t.Errorf("the log file lacks %q:\n%s", want, file)
		}
	}
	if strings.Contains(file, "below the level") {
		t.Errorf("the log file has a record below its level:\n%s", file)
	}
}
