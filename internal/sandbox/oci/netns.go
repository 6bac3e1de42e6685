package oci

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// dialNetns connects to 127.0.0.1:port in the network namespace at nsPath
// (a container's /proc/<pid>/ns/net). The socket is created inside the
// namespace, on an OS thread locked to a goroutine of its own that
// switches back before it lets go of the thread (a thread that cannot
// switch back is never reused: its goroutine exits still locked, so the
// runtime ends the thread); a socket stays in the namespace it was made
// in, so the connect and all I/O happen from the agent's own threads.
func dialNetns(ctx context.Context, nsPath string, port uint16) (net.Conn, error) {
	fd, err := socketInNetns(nsPath)
	if err != nil {
		return nil, err
	}
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}})
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return nil, err
	}
	// A non-blocking fd: os.NewFile hands it to the runtime's poller, so
	// waiting for the connect honours deadlines.
	f := os.NewFile(uintptr(fd), "netns-tcp")
	defer f.Close()
	if err != nil {
		if dl, ok := ctx.Deadline(); ok {
			f.SetWriteDeadline(dl)
		}
		stop := context.AfterFunc(ctx, func() { f.SetWriteDeadline(time.Unix(1, 0)) })
		defer stop()
		rc, err := f.SyscallConn()
		if err != nil {
			return nil, err
		}
		var soErr error
		// Whether the connect is done is read from the socket each time:
		// it may have finished before the poller looked, and an edge the
		// poller saw before this call is not seen again.
		werr := rc.Write(func(fd uintptr) bool {
			v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			switch {
			case err != nil:
				soErr = err
			case v != 0:
				soErr = unix.Errno(v)
			default:
				if _, err := unix.Getpeername(int(fd)); err != nil {
					return false // not connected yet: wait until writable
				}
			}
			return true
		})
		if werr != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, werr
		}
		if soErr != nil {
			return nil, soErr
		}
		f.SetWriteDeadline(time.Time{})
	}
	return net.FileConn(f)
}

// socketInNetns returns a non-blocking TCP socket made in the network
// namespace at nsPath.
func socketInNetns(nsPath string) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		back := true
		r := func() result {
			target, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return result{-1, fmt.Errorf("open %s: %w", nsPath, err)}
			}
			defer unix.Close(target)
			self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return result{-1, fmt.Errorf("open this thread's network namespace: %w", err)}
			}
			defer unix.Close(self)
			if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
				if errors.Is(err, unix.EPERM) {
					return result{-1, fmt.Errorf("enter %s: %w (%w)", nsPath, err, ErrRootlessDial)}
				}
				return result{-1, fmt.Errorf("enter %s: %w", nsPath, err)}
			}
			fd, serr := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
				back = false
				if serr == nil {
					unix.Close(fd)
				}
				return result{-1, fmt.Errorf("return to the agent's network namespace: %w", err)}
			}
			if serr != nil {
				return result{-1, fmt.Errorf("socket: %w", serr)}
			}
			return result{fd, nil}
		}()
		ch <- r
		if back {
			runtime.UnlockOSThread()
		}
	}()
	r := <-ch
	return r.fd, r.err
}
