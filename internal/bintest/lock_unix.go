//go:build unix

package bintest

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lock takes an exclusive lock on the file path (created if need be),
// waiting for it until ctx ends, and returns its release.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bintest: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases it
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("bintest: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("bintest: waiting for another test process to build (lock %s): %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
