//go:build linux

package testnet

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpunet/gpunet/internal/netns"
)

// inNamespace runs fn on an OS thread switched into the named network
// namespace (netns.Do).
func inNamespace(ns string, fn func() error) error {
	return netns.Do("/run/netns/"+ns, fn)
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
