//go:build linux

package clusternet

import (
	"fmt"

	"github.com/gpunet/gpunet/internal/netns"
)

// inNetns runs fn on an OS thread switched into the network namespace at
// path (/run/netns/NAME or /proc/PID/ns/net); "" runs fn here. Sockets and
// TUN devices fn makes, and processes it starts, stay in that namespace.
// A thread that cannot switch back is never reused: its goroutine ends
// still locked, and the runtime ends the thread.
func inNetns(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	if err := netns.Do(path, fn); err != nil {
		return fmt.Errorf("clusternet: %w", err)
	}
	return nil
}
