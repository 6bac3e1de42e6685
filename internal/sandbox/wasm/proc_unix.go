//go:build unix && !linux

package wasm

import "syscall"

// sysProcAttr puts the sandbox process in a process group of its own, which
// the executor kills as a whole.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func selfExe() (string, error) { return executable() }
