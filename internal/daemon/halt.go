package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/gpunet/gpunet/internal/validator"
)

// ExitConsensusHalted is the exit status of a node process whose consensus
// stopped on a failure (validator.ErrConsensusHalted).
const ExitConsensusHalted = 3

// haltStopTimeout bounds the attempt to close the stores of a halted node
// before the process exits; its stores are crash-safe if it runs out.
const haltStopTimeout = 10 * time.Second

// watchHalt waits for n's consensus to halt and then calls onHalt, unless
// ctx ends first.
func watchHalt(ctx context.Context, n *validator.Node, onHalt func(error)) {
	select {
	case <-ctx.Done():
	case <-n.Halted():
		onHalt(n.Err())
	}
}

// exitOnHalt is the default Options.OnHalt: a validator whose consensus
// stopped never votes again, so rather than live on halted it names the
// cause on stderr, closes its stores (bounded) and exits with
// ExitConsensusHalted, for its supervisor (systemd, a container runtime)
// to restart it.
func exitOnHalt(n *validator.Node, log *slog.Logger) func(error) {
	return func(err error) {
		log.Error("validator halted; exiting so that a supervisor restarts it", "err", err)
		fmt.Fprintf(os.Stderr, "gpunet: validator halted: %v; exiting with status %d so that a supervisor restarts it (fix the cause first if it persists)\n", err, ExitConsensusHalted)
		done := make(chan struct{})
		go func() {
			n.Stop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(haltStopTimeout):
		}
		os.Exit(ExitConsensusHalted)
	}
}
