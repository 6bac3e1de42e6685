package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHaltedValidatorExits runs a real node, then takes away its file
// descriptors (prlimit on the running process), as ~1,000 slow anonymous
// uploads did: CometBFT fails to write its signing state and stops
// consensus. The process must exit with status 3 and a message naming the
// cause, so that a supervisor restarts it, instead of living on halted.
func TestHaltedValidatorExits(t *testing.T) {
	parallel(t, weightLight)
	home := filepath.Join(t.TempDir(), "node")
	gpunet(t, withoutHWChallenges([]string{"init", "--home", home, "--chain-id", "e2e", "--block-time", "100ms"})...)
	p := startProc(t, "node", "node", "--home", home, "--output", "json")
	var info struct {
		API string `json:"api"`
	}
	p.jsonLine(60*time.Second, &info)
	book := newHashBook()
	w := watch(t, book, "node", info.API)
	waitUntil(t, 30*time.Second, "height 3", func() bool { return book.maxHeight() >= 3 })
	w.stop()

	var old unix.Rlimit
	pid := p.cmd.Process.Pid
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Skipf("cannot read the node's open-file limit: %v", err)
	}
	// Descriptors 0-2 are taken, so the node cannot open any new file.
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 3, Max: old.Max}, nil); err != nil {
		t.Skipf("cannot lower the node's open-file limit: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("node still running 60s after its descriptors ran out (old limit %d)", old.Cur)
	}
	if code := exitCode(p.err); code != 3 {
		t.Errorf("exit status %d, want 3 (consensus halted)", code)
	}
	// The CLI's exit path reports it: with --output json, the last line
	// of stderr is {"error": …}.
	stderr := p.stderr.String()
	var last struct {
		Error string `json:"error"`
	}
	if lines := p.stderr.Lines(); len(lines) == 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil {
		t.Fatalf("stderr does not end with the CLI's JSON error:\n%s", tail(stderr, 3000))
	}
	for _, want := range []string{"validator halted", "too many open files", "supervisor restarts it"} {
		if !strings.Contains(last.Error, want) {
			t.Errorf("the error %q does not say %q", last.Error, want)
		}
	}
}
