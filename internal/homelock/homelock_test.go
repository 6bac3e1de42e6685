//go:build unix

package homelock_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/homelock"
)

// holdEnv makes the test binary a process that takes a home's lock, says
// so, and holds it until killed: the other process of TestTwoProcesses.
const holdEnv = "GPUNET_HOMELOCK_TEST_HOLD"

func TestMain(m *testing.M) {
	if home := os.Getenv(holdEnv); home != "" {
		if _, err := homelock.Acquire(home, "gpunet test-holder"); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		select {}
	}
	os.Exit(m.Run())
}

// TestTwoProcesses: while another process holds a home's lock, Acquire
// is refused with that process's pid and command and changes nothing in
// the home; once it is gone (killed, not released), the lock is free.
func TestTwoProcesses(t *testing.T) {
	home := t.TempDir()
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), holdEnv+"="+home)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("holder said %q, want locked", line)
	}
	lockFile := filepath.Join(home, homelock.File)
	before, err := os.ReadFile(lockFile)
	if err != nil {
		t.Fatal(err)
	}
	stBefore, _ := os.Stat(lockFile)

	l, err := homelock.Acquire(home, "gpunet devnet")
	var held *homelock.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("Acquire while another process holds it = %v, %v; want a HeldError", l, err)
	}
	pid := holder.Process.Pid
	if held.PID != pid || held.Command != "gpunet test-holder" || time.Since(held.Since) > time.Minute {
		t.Errorf("HeldError %+v, want pid %d, command gpunet test-holder, since just now", held, pid)
	}
	for _, want := range []string{home, "gpunet test-holder", fmt.Sprintf("pid %d", pid), fmt.Sprintf("kill %d", pid)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	after, _ := os.ReadFile(lockFile)
	stAfter, _ := os.Stat(lockFile)
	if string(after) != string(before) || !stAfter.ModTime().Equal(stBefore.ModTime()) {
		t.Errorf("the refused Acquire changed the lock file: %q → %q", before, after)
	}
	entries, _ := os.ReadDir(home)
	if len(entries) != 1 {
		t.Errorf("the home holds %d entries, want only the lock file", len(entries))
	}

	// kill -9: the kernel drops the lock with the process.
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	l, err = homelock.Acquire(home, "gpunet devnet")
	if err != nil {
		t.Fatalf("Acquire after the holder died: %v", err)
	}
	got, _ := os.ReadFile(lockFile)
	if want := fmt.Sprintf("pid %d\ncommand gpunet devnet\n", os.Getpid()); !strings.HasPrefix(string(got), want) {
		t.Errorf("lock file %q, want it to start %q", got, want)
	}
	// In this process too, a second Acquire is refused until Release.
	if _, err := homelock.Acquire(home, "gpunet node"); !errors.As(err, &held) || held.PID != os.Getpid() {
		t.Errorf("second Acquire = %v, want a HeldError naming this process", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l, err = homelock.Acquire(home, "gpunet node")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l.Release()
}

func TestMissingHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "nope")
	if _, err := homelock.Acquire(home, "gpunet node"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), home) {
		t.Errorf("Acquire of a missing home = %v, want an error naming it that wraps fs.ErrNotExist", err)
	}
	if _, err := os.Stat(home); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Acquire created the missing home")
	}
}
