//go:build unix && !linux

package wasm

import (
	"os"
	"syscall"
)

// sysProcAttr puts the sandbox process in a process group of its own, which
// the executor kills as a whole.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// killProcess kills the sandbox process's group, and the process itself in
// case the group is gone.
func killProcess(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	p.Kill()
}

func selfExe() (string, error) { return executable() }
