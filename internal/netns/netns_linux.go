//go:build linux

// Package netns runs code inside a Linux network namespace: the one
// mechanism the test network (internal/testnet) and a gang's private
// network (internal/clusternet) both use to make sockets and TUN devices
// there.
package netns

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread switched into the network namespace at path
// (/run/netns/NAME or /proc/PID/ns/net). Sockets and TUN devices fn makes,
// and processes it starts, stay in that namespace after the thread
// switches back.
//
// The namespace is a property of the thread, so the goroutine is locked to
// it throughout; a thread that cannot switch back is never reused: its
// goroutine ends still locked, and the runtime ends the thread.
func Do(path string, fn func() error) error {
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer unix.Close(target)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("return from network namespace %s: %w (and %v)", path, err, fnErr)
			return
		}
		runtime.UnlockOSThread()
		errc <- fnErr
	}()
	return <-errc
}
