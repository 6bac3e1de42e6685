package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// Services (sandbox.ServiceRunner). A fake service serves an http.Handler
// on the ports it was given, over in-memory connections: Dial of one of
// them reaches the handler, of any other port is refused, as a container
// listening on those ports would behave. Tests steer it through its
// *Service: Exit ends it as if its program exited.

var _ sandbox.ServiceRunner = (*Executor)(nil)

// ErrRefused is what Dial of a port the fake service does not listen on
// wraps, as a connection refused would be.
var ErrRefused = errors.New("fake: connection refused")

// ServiceBehavior makes the fake service of svc: the ports it listens on
// and the handler that answers them, or an error (it did not start). It
// may write to logs.
type ServiceBehavior func(svc *sandbox.Service, logs io.Writer) (ports []uint16, h http.Handler, err error)

// Serve is a ServiceBehavior that listens on ports with h.
func Serve(h http.Handler, ports ...uint16) ServiceBehavior {
	return func(svc *sandbox.Service, logs io.Writer) ([]uint16, http.Handler, error) {
		fmt.Fprintf(logs, "serving on %v\n", ports)
		return ports, h, nil
	}
}

// WithService lets the executor start services with b, and returns it.
func (e *Executor) WithService(b ServiceBehavior) *Executor {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.service = b
	return e
}

// Services returns the services started so far, in order, running or
// not.
func (e *Executor) Services() []*Service {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.services)
}

// Running returns the services still running.
func (e *Executor) Running() []*Service {
	var out []*Service
	for _, s := range e.Services() {
		select {
		case <-s.done:
		default:
			out = append(out, s)
		}
	}
	return out
}

// StartService validates svc as a real executor would and starts it with
// the executor's ServiceBehavior.
func (e *Executor) StartService(ctx context.Context, svc *sandbox.Service, logs io.Writer) (sandbox.ServiceHandle, error) {
	job := &sandbox.Job{ID: svc.ID, WorkDir: svc.WorkDir, Command: svc.Command, Args: svc.Args, Env: svc.Env, GPUs: svc.GPUs, Limits: svc.Limits}
	job.Limits.Timeout = 1
	if err := sandbox.ValidateJob(job); err != nil {
		return nil, err
	}
	e.mu.Lock()
	b := e.service
	e.mu.Unlock()
	if b == nil {
		return nil, errors.New("fake: this executor runs no services (WithService)")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := sandbox.NewLogWriter(logs, 1<<62)
	ports, h, err := b(svc, out)
	if err != nil {
		return nil, err
	}
	s := &Service{Spec: *svc, Logs: out, ports: ports, done: make(chan struct{}), ln: &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}}
	s.srv = &http.Server{Handler: h}
	go s.srv.Serve(s.ln)
	e.mu.Lock()
	e.services = append(e.services, s)
	e.mu.Unlock()
	return s, nil
}

// Service is a running fake service (a sandbox.ServiceHandle).
type Service struct {
	// Spec is what it was started with.
	Spec sandbox.Service
	// Logs is its output, for a test to write lines as the program
	// would.
	Logs io.Writer

	ports []uint16
	srv   *http.Server
	ln    *pipeListener

	mu     sync.Mutex
	reason string
	done   chan struct{}
}

// Exit ends the service as if its program ended with reason ("exited
// 1").
func (s *Service) Exit(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return
	default:
	}
	s.reason = reason
	close(s.done)
	s.ln.Close()
	s.srv.Close()
}

// Dial reaches the handler on one of the service's ports.
func (s *Service) Dial(ctx context.Context, port uint16) (net.Conn, error) {
	select {
	case <-s.done:
		return nil, fmt.Errorf("fake: the service has ended (%s)", s.Reason())
	default:
	}
	if !slices.Contains(s.ports, port) {
		return nil, fmt.Errorf("dial port %d: %w", port, ErrRefused)
	}
	client, server := net.Pipe()
	select {
	case s.ln.conns <- server:
		return client, nil
	case <-s.done:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("fake: the service has ended (%s)", s.Reason())
}

// Done is closed when the service ended.
func (s *Service) Done() <-chan struct{} { return s.done }

// Reason says how it ended; "" while it runs.
func (s *Service) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// Stop ends it with sandbox.ReasonStopped.
func (s *Service) Stop() error {
	s.Exit(sandbox.ReasonStopped)
	return nil
}

// pipeListener is a net.Listener of in-memory connections.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "fake-service" }
