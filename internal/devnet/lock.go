package devnet

import (
	"os"

	"github.com/gpunet/gpunet/internal/homelock"
)

// Lock makes home if it does not exist and takes its lock for this
// process's devnet (homelock): before Setup, Configure or a reset writes
// anything there, so that a second devnet on a home in use is refused with
// the first one's pid and changes nothing (it would move the running
// node's ports in the config, then fail on the chain's own locks).
func Lock(home string) (*homelock.Lock, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	return homelock.Acquire(home, "gpunet devnet")
}
