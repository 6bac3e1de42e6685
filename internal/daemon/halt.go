package daemon

import (
	"fmt"
	"time"
)

// haltStopTimeout bounds StopHalted: a halted node may be out of file
// descriptors or stuck in a failed write, and its stores are crash-safe
// if closing them never finishes.
const haltStopTimeout = 10 * time.Second

// Halted is closed when the validator's consensus has stopped on a failure
// while the daemon runs (validator.Node.Halted); Err then says why. A
// halted validator never votes again and never resumes, so whoever runs
// the daemon should stop it (StopHalted) and end the process, for its
// supervisor to restart it. The daemon does neither itself: it only
// reports the halt here.
func (d *Daemon) Halted() <-chan struct{} { return d.Node.Halted() }

// Err returns why consensus halted, wrapping validator.ErrConsensusHalted
// and the cause (e.g. syscall.EMFILE), or nil while it has not.
func (d *Daemon) Err() error { return d.Node.Err() }

// StopHalted is Stop for a daemon whose consensus halted: it returns once
// Stop does or after haltStopTimeout, whichever is first, with an error
// in the second case (Stop then goes on in the background).
func (d *Daemon) StopHalted() error {
	done := make(chan error, 1)
	go func() { done <- d.Stop() }()
	select {
	case err := <-done:
		return err
	case <-time.After(haltStopTimeout):
		return fmt.Errorf("stores not closed within %s (they are crash-safe)", haltStopTimeout)
	}
}
