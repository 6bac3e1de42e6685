//go:build linux

package testnet

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openTUN creates the TUN interface ifname (IFF_TUN|IFF_NO_PI: bare IP
// packets) inside the named network namespace and returns its file. The
// interface lives in that namespace, bound to the file: it goes away when
// the file is closed or the namespace deleted.
//
// The namespace switch is per OS thread, so the goroutine is locked to its
// thread for the duration; if the switch back fails, the thread stays
// locked and Go discards it when the goroutine ends.
func openTUN(ns, ifname string) (*os.File, error) {
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", ns, err)
	}
	defer unix.Close(target)

	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("open own namespace: %w", err)}
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		f, tunErr := createTUN(ifname)
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			// This thread is in the wrong namespace: leave it locked so
			// that the runtime ends it with this goroutine.
			if f != nil {
				f.Close()
			}
			ch <- result{nil, fmt.Errorf("setns back from %s: %w", ns, err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{f, tunErr}
	}()
	r := <-ch
	return r.f, r.err
}

// createTUN opens /dev/net/tun and attaches it to a new TUN interface
// named ifname in the calling thread's network namespace. The file is
// non-blocking, so reads park in Go's poller and Close interrupts them.
func createTUN(ifname string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	var req struct {
		name  [unix.IFNAMSIZ]byte
		flags uint16
		_     [22]byte
	}
	copy(req.name[:], ifname)
	req.flags = unix.IFF_TUN | unix.IFF_NO_PI
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(unix.TUNSETIFF), uintptr(unsafe.Pointer(&req))); errno != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", ifname, errno)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+ifname), nil
}
