package validator

import (
	"errors"
	"fmt"
	"sync"

	cmtlog "github.com/cometbft/cometbft/libs/log"
)

// ErrConsensusHalted says that CometBFT's consensus stopped on a failure
// while the process lives: this validator no longer votes or commits.
// CometBFT recovers any panic in its consensus routine (a failed write of
// the signing state, the WAL or a store, e.g. "too many open files"), logs
// "CONSENSUS FAILURE!!!" and stops consensus for good, leaving the node
// process up but halted. Node.Halted reports it so that the process can
// exit and be restarted by its supervisor: resuming in place is unsafe,
// since consensus stopped in the middle of a step.
var ErrConsensusHalted = errors.New("cometbft consensus stopped")

// consensusFailureMsg is the message CometBFT v1 logs, at Error level, when
// it recovers a panic in its consensus routine (internal/consensus/state.go,
// receiveRoutine). Logging is the only way it reports the failure; the
// test TestWriteFailureHaltsVisibly fails if a CometBFT upgrade renames it.
const consensusFailureMsg = "CONSENSUS FAILURE!!!"

// haltWatch records the first consensus failure.
type haltWatch struct {
	once sync.Once
	done chan struct{}
	err  error
}

func newHaltWatch() *haltWatch { return &haltWatch{done: make(chan struct{})} }

func (h *haltWatch) fail(cause any) {
	h.once.Do(func() {
		if err, ok := cause.(error); ok {
			h.err = fmt.Errorf("%w: %w", ErrConsensusHalted, err)
		} else {
			h.err = fmt.Errorf("%w: %v", ErrConsensusHalted, cause)
		}
		close(h.done)
	})
}

// haltLogger passes everything to the logger it wraps and reports
// CometBFT's consensus failure to its watch.
type haltLogger struct {
	cmtlog.Logger
	watch *haltWatch
}

func (l haltLogger) Error(msg string, keyvals ...any) {
	l.Logger.Error(msg, keyvals...)
	if msg != consensusFailureMsg {
		return
	}
	var cause any = "unknown cause"
	for i := 0; i+1 < len(keyvals); i += 2 {
		if keyvals[i] == "err" {
			cause = keyvals[i+1]
		}
	}
	l.watch.fail(cause)
}

func (l haltLogger) With(keyvals ...any) cmtlog.Logger {
	return haltLogger{Logger: l.Logger.With(keyvals...), watch: l.watch}
}

// Halted is closed when CometBFT's consensus has stopped on a failure
// while the node runs (Err says why). It is never closed by Stop. A halted
// node never resumes: its process should exit so that it is restarted.
func (n *Node) Halted() <-chan struct{} { return n.halt.done }

// Err returns why consensus halted (wrapping ErrConsensusHalted and the
// cause, e.g. syscall.EMFILE), or nil while it has not.
func (n *Node) Err() error {
	select {
	case <-n.halt.done:
		return n.halt.err
	default:
		return nil
	}
}
