//go:build linux

package testnet

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inNamespace runs fn on an OS thread switched into the named network
// namespace. Sockets and TUN devices fn creates stay in that namespace
// after the thread switches back.
//
// The namespace is a property of the thread, so the goroutine is locked to
// it throughout; if the switch back fails, the thread stays locked and Go
// discards it when the goroutine ends.
func inNamespace(ns string, fn func() error) error {
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", ns, err)
	}
	defer unix.Close(target)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own namespace: %w", err)
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			// Leave this thread locked: the runtime ends it with us.
			errc <- fmt.Errorf("setns back from %s: %w (and %v)", ns, err, fnErr)
			return
		}
		runtime.UnlockOSThread()
		errc <- fnErr
	}()
	return <-errc
}

// openTUN creates the TUN interface ifname (IFF_TUN|IFF_NO_PI: bare IP
// packets) inside the named network namespace and returns its file. The
// interface is bound to the file: it goes away when the file is closed or
// the namespace deleted.
func openTUN(ns, ifname string) (*os.File, error) {
	var f *os.File
	err := inNamespace(ns, func() (err error) {
		f, err = createTUN(ifname)
		return err
	})
	if err != nil && f != nil {
		f.Close()
		f = nil
	}
	return f, err
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
