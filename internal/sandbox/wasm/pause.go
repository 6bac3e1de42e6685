package wasm

import (
	"context"
	"os"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// Pausing (sandbox.Pauser): the executor stops the process group of each
// running job's sandbox process with SIGSTOP and lets it go on with
// SIGCONT. The kernel takes the whole process off the CPU where it stands,
// the guest's code and the Go runtime around it alike; the guest cannot
// see it (it has no signals, and a deterministic job's clock is its own),
// and a stopped process can still be killed. A job that would start during
// a pause waits for it to end.

var _ sandbox.Pauser = (*Executor)(nil)

// Pause stops the executor's sandbox processes that run or prepare a job
// until resume is called. See sandbox.Pauser.
func (e *Executor) Pause(ctx context.Context) (resume func() error, paused int, err error) {
	return e.pause.Pause(ctx)
}

// freeze and thaw stop and continue c's process group, unless c is gone
// (its group's ID could be anyone's then).
func (c *child) freeze() error { return c.signal(stopProcess) }
func (c *child) thaw() error   { return c.signal(contProcess) }

func (c *child) signal(f func(p *os.Process) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reaped {
		return sandbox.ErrNotRunning
	}
	return f(c.cmd.Process)
}
