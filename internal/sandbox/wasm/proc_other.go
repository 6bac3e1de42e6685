//go:build !unix

package wasm

import (
	"os"
	"syscall"
)

// sysProcAttr: no process groups here; the executor kills the process
// alone (the sandbox process starts no others).
func sysProcAttr() *syscall.SysProcAttr { return nil }

func killProcess(p *os.Process) { p.Kill() }

func selfExe() (string, error) { return executable() }
