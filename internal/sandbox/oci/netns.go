package oci

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
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

// NewNetNS makes a network namespace holding only loopback (up), pinned
// by a bind mount at a file in the executor's run directory, for a job to
// join (sandbox.Job.NetNS) once its caller has put into it what the job
// must have (a gang member's private network: docs/clusters.md). The
// namespace has no other interface and no route; nothing of the host's
// network is in it. release unmounts the pin; the namespace goes when
// nothing else holds it (the job's container, an interface's device).
// It needs root (a rootless executor's jobs live in a user namespace that
// cannot join a namespace the host made).
func (e *Executor) NewNetNS(name string) (path string, release func(), err error) {
	if e.caps.Rootless {
		return "", nil, errors.New("oci: a network namespace for a job to join needs an executor running as root; this one is rootless")
	}
	if name == "" || len(name) > 64 || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return "", nil, fmt.Errorf("oci: network namespace name %q: want 1 to 64 characters without '/'", name)
	}
	p := filepath.Join(e.runDir, netnsPrefix+name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("oci: network namespace pin: %w", err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// This thread moves to the new namespace and never comes back:
		// the goroutine ends still locked, so the runtime ends the thread.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare the network namespace: %w", err)
			return
		}
		if err := unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), p, "", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("pin the network namespace at %s: %w", p, err)
			return
		}
		errc <- loopbackUp()
	}()
	if err := <-errc; err != nil {
		unix.Unmount(p, unix.MNT_DETACH)
		os.Remove(p)
		return "", nil, fmt.Errorf("oci: %w", err)
	}
	return p, func() {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			e.o.Logger.Warn("oci: unpin a network namespace", "path", p, "err", err)
		}
		os.Remove(p)
	}, nil
}

// netnsPrefix begins the names of the network namespaces' pins in the run
// directory (cleanStale unmounts them).
const netnsPrefix = "netns-"

// loopbackUp sets lo up in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}
