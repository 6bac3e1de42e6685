package wasm

import (
	"os"
	"syscall"
)

// sysProcAttr puts the sandbox process in a process group of its own, which
// the executor kills as a whole, and has the kernel kill it if the
// executor's process dies first.
//
// Pdeathsig fires when the thread that started the child exits, not the
// process; Go only ends threads whose goroutine exited while locked to
// them (runtime.LockOSThread), which the executor's callers do not do. The
// child also exits when its stdin (held open by the executor) reaches EOF.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// selfExe is the path that starts this program again: /proc/self/exe,
// which names the running binary even after it was replaced on disk (an
// upgrade) or reached through a symbolic link.
func selfExe() (string, error) {
	const p = "/proc/self/exe"
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return executable()
}
