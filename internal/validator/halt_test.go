package validator

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestWriteFailureHaltsVisibly injects the failure of issue 19 into a
// running validator: it lowers the process's open-file limit so that every
// new file fails with "too many open files", as when anonymous uploads
// exhaust a node's descriptors. CometBFT then fails to write its signing
// state, logs CONSENSUS FAILURE and stops consensus while the process
// lives; the node must report it (Halted closed, Err naming the cause) so
// that the daemon exits and its supervisor restarts it. Without the
// report the node stays up and silently halted.
func TestWriteFailureHaltsVisibly(t *testing.T) {
	home := t.TempDir()
	if _, err := Init(home, InitOptions{ChainID: "c", Validators: 1, Genesis: ledger.Genesis{Params: ledger.DefaultParams()}, BlockTime: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	n, err := Start(t.Context(), home, StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	for deadline := time.Now().Add(30 * time.Second); n.Height() < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no blocks")
		}
	}
	if err := n.Err(); err != nil {
		t.Fatalf("Err before any failure: %v", err)
	}

	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
			t.Errorf("restore the open-file limit: %v", err)
		}
	}
	// Descriptors 0-2 are taken, so no new file can be opened.
	low := syscall.Rlimit{Cur: 3, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Halted():
		restore()
	case <-time.After(30 * time.Second):
		restore()
		t.Fatalf("consensus did not report a halt within 30s of the descriptors running out (height %d)", n.Height())
	}

	err = n.Err()
	if !errors.Is(err, ErrConsensusHalted) || !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Err = %v, want ErrConsensusHalted wrapping EMFILE", err)
	}
	if !strings.Contains(err.Error(), "too many open files") {
		t.Errorf("Err = %q, want it to name the cause", err)
	}
	// Halted means halted: with descriptors available again, CometBFT does
	// not resume by itself, which is why the process must exit.
	h := n.Height()
	time.Sleep(500 * time.Millisecond)
	if now := n.Height(); now > h+1 {
		t.Errorf("height went from %d to %d after the halt was reported", h, now)
	}
	done := make(chan error, 1)
	go func() { done <- n.Stop() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop of a halted node did not return within 20s")
	}
	t.Logf("halted at height %d: %v", h, err)
}
