//go:build !unix

package wasm

import (
	"errors"
	"os"
	"syscall"
)

var errNoPause = errors.New("wasm: this system cannot pause a sandbox process")

// sysProcAttr: no process groups here; the executor kills the process
// alone (the sandbox process starts no others).
func sysProcAttr() *syscall.SysProcAttr { return nil }

func killProcess(p *os.Process) { p.Kill() }

// stopProcess and contProcess: this system has no job control signals,
// so the executor cannot pause its sandbox processes.
func stopProcess(*os.Process) error { return errNoPause }
func contProcess(*os.Process) error { return errNoPause }

func selfExe() (string, error) { return executable() }
