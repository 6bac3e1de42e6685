package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// Services (sandbox.ServiceRunner): a long-running container with no
// outputs and no timeout, kept until its handle's Stop. It is confined as a
// job is (the same spec: namespaces, read-only rootfs, no capabilities,
// seccomp, cgroup limits), with its scratch directory (Service.WorkDir)
// writable at /tmp and bounded by Limits.DiskBytes, checked every
// diskCheckInterval. Its ports are reached with Dial, which opens the
// connection inside the container's network namespace: no port is
// published on the host, and nothing but the agent can reach the
// service.

var _ sandbox.ServiceRunner = (*Executor)(nil)

// ServiceScratch is where a service's scratch directory appears.
const ServiceScratch = "/tmp"

// diskCheckInterval is how often a service's scratch directory is measured
// against its disk limit.
const diskCheckInterval = 5 * time.Second

// ErrRootlessDial is wrapped by the error of a service that could not be
// dialled into because the agent is not root: entering a container's
// network namespace needs CAP_SYS_ADMIN over it.
var ErrRootlessDial = errors.New("dialling into a container's network namespace needs a root agent (rootless runc cannot); run the agent as root, or allow host networking")

// StartService pulls svc's image (unless cached), starts its container and
// returns once the container's process exists. An image that could not be
// pulled is a *PullError, whose text says no more than the reference and
// a fixed cause.
func (e *Executor) StartService(ctx context.Context, svc *sandbox.Service, logs io.Writer) (sandbox.ServiceHandle, error) {
	job := &sandbox.Job{
		ID: svc.ID, Image: svc.Image, Command: svc.Command, Args: svc.Args, Env: svc.Env, WorkDir: svc.WorkDir,
		GPUs: svc.GPUs, Network: svc.Network, Limits: svc.Limits,
	}
	job.Limits.Timeout = math.MaxInt64 // validated, never used
	if err := sandbox.ValidateJob(job); err != nil {
		return nil, err
	}
	if _, err := ParseRef(svc.Image); err != nil {
		return nil, fmt.Errorf("%w: Image: %v", sandbox.ErrInvalidJob, err)
	}
	hostNet := svc.Network && e.o.AllowNetwork
	switch {
	case svc.Network && !e.o.AllowNetwork:
		return nil, errors.New("oci: the service asks for network access, which this provider does not allow")
	case e.caps.Rootless && !hostNet:
		return nil, fmt.Errorf("oci: %w", ErrRootlessDial)
	}
	var gpu *cdispec.ContainerEdits
	if len(svc.GPUs) > 0 {
		if e.caps.gpus == nil {
			return nil, errors.New("oci: the service needs GPUs but this provider has none for containers: " + e.caps.noGPU)
		}
		var err error
		if gpu, err = e.caps.gpus.edits(svc.GPUs); err != nil {
			return nil, fmt.Errorf("oci: %w", err)
		}
	}
	out := sandbox.NewLogWriter(logs, math.MaxInt64)
	img, pull, err := e.store.Get(ctx, svc.Image)
	var pe *PullError
	if errors.As(err, &pe) {
		// Its text is fit for a release reason and the owner's log;
		// what the registry said is for the provider's log.
		e.o.Logger.Warn("oci: image pull failed", "service", svc.ID, "err", pe)
		return nil, pe
	}
	if err != nil {
		return nil, fmt.Errorf("oci: image %s: %w", svc.Image, err)
	}
	// The image is in use until the service's cleanup; released here if
	// it never gets one.
	handedOff := false
	defer func() {
		if !handedOff {
			img.Release()
		}
	}()
	if pull.Cached {
		out.Notef("image %s (cached)", img.Digest)
	} else {
		out.Notef("image %s pulled in %s: %d layers, %s downloaded, %s unpacked",
			img.Digest, pull.Duration.Round(time.Millisecond), img.Layers, sandbox.FormatBytes(uint64(img.CompressedBytes)), sandbox.FormatBytes(uint64(img.UnpackedBytes)))
	}
	argv := argvOf(img.Config.Entrypoint, img.Config.Cmd, svc.Command, svc.Args)
	if len(argv) == 0 {
		return nil, errors.New("oci: the image has no entrypoint or command: give one with command: in the spec")
	}
	uid, gid, err := resolveUser(img.Rootfs, img.Config.User)
	if err != nil {
		return nil, fmt.Errorf("oci: %w", err)
	}
	cwd := img.Config.WorkingDir
	if cwd == "" {
		cwd = "/"
	}
	if !path.IsAbs(cwd) {
		return nil, fmt.Errorf("oci: the image's working directory %q is not absolute", cwd)
	}
	if !e.caps.Rootless {
		if err := chownTree(svc.WorkDir, int(uid), int(gid)); err != nil {
			return nil, fmt.Errorf("oci: give the scratch dir to the service's user: %w", err)
		}
	}

	s := &service{e: e, done: make(chan struct{}), started: make(chan struct{}), hostNet: hostNet}
	s.id = fmt.Sprintf("gpunet-%s-%d", e.instance, e.seq.Add(1))
	s.bundle = filepath.Join(e.runDir, s.id)
	if err := os.Mkdir(s.bundle, 0o711); err != nil {
		return nil, fmt.Errorf("oci: %w", err)
	}
	rootfs, unmount, err := e.rootfs(s.bundle, img.Rootfs)
	if err != nil {
		os.RemoveAll(s.bundle)
		return nil, err
	}
	cleanup := func() {
		unmount()
		os.RemoveAll(s.bundle)
		img.Release()
	}
	handedOff = true
	mem := svc.Limits.MemoryBytes
	if mem == 0 {
		mem = sandbox.DefaultMemoryBytes
	}
	cgPath := "/gpunet/" + s.id
	spec, err := Spec(SpecParams{
		Rootfs: rootfs, Args: argv, Env: jobEnv(img.Config.Env, svc.Env), Cwd: cwd,
		UID: uid, GID: gid, Binds: []Bind{{Host: svc.WorkDir, Guest: ServiceScratch}},
		MemoryBytes: mem, CPU: svc.Limits.CPU, Pids: e.o.Pids, TmpBytes: mem,
		Enforce: e.caps.Enforce, CgroupsPath: cgPath,
		HostNetwork: hostNet,
		GPU:         gpu,
		Hostname:    "service",
	})
	if err == nil {
		err = writeSpec(s.bundle, spec)
	}
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("oci: %w", err)
	}
	// A service due to start during a pause starts after it.
	pm, err := e.joinPause(ctx, s.id, &s.ended)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("oci: %w", err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	e.svcMu.Lock()
	if e.svcClosed {
		e.svcMu.Unlock()
		stop()
		pm.Leave()
		cleanup()
		return nil, fmt.Errorf("oci: %w", sandbox.ErrClosed)
	}
	if e.svcs == nil {
		e.svcs = map[*service]bool{}
	}
	e.svcs[s] = true
	e.svcWG.Add(1)
	e.svcMu.Unlock()
	go func() {
		defer e.svcWG.Done()
		defer pm.Leave()
		s.run(runCtx, out, mem, cgPath, svc, cleanup)
	}()
	if err := s.waitStarted(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// waitStarted waits until the container's process exists: runc writes the
// pid file once it does (its namespaces with it), before the program
// starts.
func (s *service) waitStarted(ctx context.Context) error {
	pidFile := filepath.Join(s.bundle, "pid")
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(pidFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			if s.pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				close(s.started)
				return nil
			}
		}
		select {
		case <-s.done:
			if s.ran.Load() {
				// It started and already ended (a program that exits at
				// once) between two looks at the pid file: started, and
				// Done says how it ended.
				close(s.started)
				return nil
			}
			return fmt.Errorf("oci: the service's container did not start: %s", s.Reason())
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// argvOf is a container's argv: command (or the image's entrypoint)
// followed by args, or, without either, the image's entrypoint and cmd.
func argvOf(entrypoint, cmd, command, args []string) []string {
	switch {
	case len(command) > 0:
		return append(append([]string(nil), command...), args...)
	case len(args) > 0:
		return append(append([]string(nil), entrypoint...), args...)
	default:
		return append(append([]string(nil), entrypoint...), cmd...)
	}
}

// service is a running service container (sandbox.ServiceHandle).
type service struct {
	e       *Executor
	id      string
	bundle  string
	hostNet bool
	pid     int
	started chan struct{} // closed once pid is set
	stop    context.CancelFunc
	done    chan struct{}
	ended   atomic.Bool // runc run has returned (pause.go)
	// ran is set when runc ran the container's program (it exited, was
	// killed or ran out of memory), not when runc failed to start it.
	ran atomic.Bool

	mu     sync.Mutex
	reason string
}

func (s *service) setReason(r string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason == "" {
		s.reason = r
	}
}

// run runs the container until it exits or runCtx ends, then removes it.
func (s *service) run(runCtx context.Context, out *sandbox.LogWriter, mem uint64, cgPath string, svc *sandbox.Service, cleanup func()) {
	defer close(s.done)
	defer s.e.forget(s)
	defer cleanup()
	watchCtx, stopWatch := context.WithCancel(runCtx)
	defer stopWatch()
	if limit := svc.Limits.Disk(); limit > 0 {
		go s.watchDisk(watchCtx, svc.WorkDir, limit, out)
	}
	o, err := s.e.rt.run(runCtx, s.id, s.bundle, out)
	s.ended.Store(true)
	var st cgroupStats
	if s.e.caps.Enforce.Cgroups {
		st = s.e.caps.cg.readStats(cgPath)
	}
	if rerr := s.e.rt.remove(context.Background(), s.id); rerr != nil {
		s.e.o.Logger.Warn("oci: remove container", "container", s.id, "err", rerr)
	}
	switch {
	case err != nil:
		s.setReason("runc: " + err.Error())
	case o.Killed:
		s.ran.Store(true)
		s.setReason(sandbox.ReasonStopped)
	case o.StartError != "":
		out.Notef("the container did not start: %s", o.StartError)
		s.setReason("container did not start: " + clip(o.StartError))
	case st.OOMKills > 0:
		s.ran.Store(true)
		s.setReason(sandbox.OOMReason(mem))
	default:
		s.ran.Store(true)
		r := sandbox.ExitReason(o.ExitCode)
		if sig := o.ExitCode - 128; sig > 0 && sig < 65 {
			r += " (" + unix.SignalName(unix.Signal(sig)) + ")"
		}
		s.setReason(r)
	}
}

// watchDisk stops the service when its scratch directory holds more than
// limit bytes.
func (s *service) watchDisk(ctx context.Context, dir string, limit uint64, out *sandbox.LogWriter) {
	t := time.NewTicker(diskCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := dirSize(dir); n > limit {
			out.Notef("the service wrote %s to %s, more than its disk limit: stopping it", sandbox.FormatBytes(n), ServiceScratch)
			s.setReason(sandbox.DiskReason(limit))
			s.stop()
			return
		}
	}
}

// dirSize is the bytes the regular files under dir hold.
func dirSize(dir string) uint64 {
	var n uint64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += uint64(fi.Size())
			}
		}
		return nil
	})
	return n
}

func (e *Executor) forget(s *service) {
	e.svcMu.Lock()
	delete(e.svcs, s)
	e.svcMu.Unlock()
}

// stopServices stops every service and refuses new ones (Close).
func (e *Executor) stopServices() {
	e.svcMu.Lock()
	e.svcClosed = true
	var all []*service
	for s := range e.svcs {
		all = append(all, s)
	}
	e.svcMu.Unlock()
	for _, s := range all {
		s.Stop()
	}
	e.svcWG.Wait()
}

func (s *service) Done() <-chan struct{} { return s.done }

func (s *service) Reason() string {
	select {
	case <-s.done:
	default:
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

func (s *service) Stop() error {
	s.setReason(sandbox.ReasonStopped)
	s.stop()
	<-s.done
	return nil
}

// Dial connects to port on the service's loopback: inside its network
// namespace, or on the host's loopback for a service that shares the
// host's network.
func (s *service) Dial(ctx context.Context, port uint16) (net.Conn, error) {
	select {
	case <-s.done:
		return nil, fmt.Errorf("oci: service %s has ended (%s)", s.id, s.Reason())
	case <-s.started:
	}
	if s.hostNet {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	}
	if s.e.caps.Rootless {
		return nil, fmt.Errorf("oci: %w", ErrRootlessDial)
	}
	c, err := dialNetns(ctx, fmt.Sprintf("/proc/%d/ns/net", s.pid), port)
	if err != nil {
		return nil, fmt.Errorf("oci: dial port %d of service %s: %w", port, s.id, err)
	}
	// The pid may have been reused if the container ended meanwhile.
	select {
	case <-s.done:
		c.Close()
		return nil, fmt.Errorf("oci: service %s has ended (%s)", s.id, s.Reason())
	default:
	}
	return c, nil
}
