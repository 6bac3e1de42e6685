//go:build linux

package clusternet

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
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
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("clusternet: open network namespace %s: %w", path, err)
	}
	defer unix.Close(target)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("clusternet: open this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("clusternet: enter network namespace %s: %w", path, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("clusternet: return from network namespace %s: %w (and %v)", path, err, fnErr)
			return
		}
		runtime.UnlockOSThread()
		errc <- fnErr
	}()
	return <-errc
}
