//go:build unix

package wasm

import (
	"fmt"
	"os"
	"syscall"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// The sandbox process leads its own process group (sysProcAttr), so a
// signal to the group reaches it and whatever it started.

// killProcess kills the sandbox process's group, and the process itself in
// case the group is gone.
func killProcess(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	p.Kill()
}

// stopProcess and contProcess stop and continue the sandbox process's
// group (Pause).
func stopProcess(p *os.Process) error { return signalGroup(p, syscall.SIGSTOP) }
func contProcess(p *os.Process) error { return signalGroup(p, syscall.SIGCONT) }

func signalGroup(p *os.Process, sig syscall.Signal) error {
	if err := syscall.Kill(-p.Pid, sig); err == syscall.ESRCH {
		return sandbox.ErrNotRunning
	} else if err != nil {
		return fmt.Errorf("wasm: signal %v to the sandbox process: %w", sig, err)
	}
	return nil
}
