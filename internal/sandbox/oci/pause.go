package oci

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// Pausing (sandbox.Pauser): the executor freezes its containers, jobs'
// and services', with runc pause, which sets the cgroup freezer (v1's
// freezer controller, v2's cgroup.freeze): the kernel takes every process
// of the container off the CPU at once, where it stands, and runc resume
// lets them go on as if nothing happened. Nothing inside the container can
// see or refuse it, unlike SIGSTOP, which a program sees its children
// receive. A frozen container can still be killed: runc kill --all thaws
// it to deliver the signal. Where runc runs containers without cgroups
// (rootless, no writable cgroup file system) there is nothing to freeze
// and Pause says so.

var _ sandbox.Pauser = (*Executor)(nil)

// errNoFreezer: containers cannot be frozen on this machine.
var errNoFreezer = errors.New("oci: containers cannot be paused here")

// Pause freezes the executor's running containers, jobs' and services',
// until resume is called; containers that would start meanwhile wait. See
// sandbox.Pauser.
func (e *Executor) Pause(ctx context.Context) (resume func() error, paused int, err error) {
	return e.pause.Pause(ctx)
}

// startWait is how long freezing a container that runc is still creating
// waits for it to exist: runc run creates it right after the run joined
// the pause set.
const startWait = 3 * time.Second

// freezeTries is how often freezing a container is tried when the kernel
// does not freeze it in time (runc's "unable to freeze").
const freezeTries = 5

// joinPause adds container id to the executor's pause set, once no pause is
// in progress (a container never starts paused). ended must become true
// once the container's runc run has returned.
func (e *Executor) joinPause(ctx context.Context, id string, ended *atomic.Bool) (*sandbox.Pausable, error) {
	joined := time.Now()
	freeze := func() error {
		if !e.caps.Enforce.Cgroups || !e.caps.cg.has("freezer") {
			return fmt.Errorf("%w: %s", errNoFreezer, e.caps.Pause)
		}
		for tries := 1; ; tries++ {
			_, err := e.rt.output(context.Background(), "pause", id)
			switch {
			case err == nil:
				return nil
			case ended.Load():
				return sandbox.ErrNotRunning
			case strings.Contains(err.Error(), "unable to freeze") && tries < freezeTries:
				// The kernel did not freeze the cgroup in the time runc
				// gives it (a process of the container waiting on the
				// disk cannot be frozen until its wait ends; runc then
				// thaws the cgroup and gives up): try again.
				time.Sleep(50 * time.Millisecond)
				continue
			case strings.Contains(err.Error(), "does not exist") && time.Since(joined) < startWait:
				// runc run is still creating it.
				time.Sleep(20 * time.Millisecond)
				continue
			case notRunning(err):
				return sandbox.ErrNotRunning
			}
			return fmt.Errorf("oci: pause container %s: %w", id, err)
		}
	}
	thaw := func() error {
		_, err := e.rt.output(context.Background(), "resume", id)
		if err != nil && (ended.Load() || notRunning(err)) {
			return sandbox.ErrNotRunning
		}
		if err != nil {
			return fmt.Errorf("oci: resume container %s: %w", id, err)
		}
		return nil
	}
	return e.pause.Join(ctx, freeze, thaw)
}

// notRunning reports whether runc refused to pause or resume a container
// because it has no running (or paused) process: gone, or stopped.
func notRunning(err error) bool {
	s := err.Error()
	return strings.Contains(s, "does not exist") || strings.Contains(s, "not running") || strings.Contains(s, "not paused") || strings.Contains(s, "stopped")
}
