package daemon

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// connLimiter caps the connections a listener hands out: at most max open
// at once (past it Accept waits, so further clients queue in the kernel's
// backlog and hold no descriptor of this process) and at most perIP from
// one address (past it a connection is answered 429 and closed). It is
// what keeps a thousand slow clients from using up the descriptors
// CometBFT needs to save its state; the server's timeouts and the blob
// gateway's progress deadline then free the slots they hold.
type connLimiter struct {
	net.Listener
	max, perIP int
	sem        chan struct{}
	closed     chan struct{}
	closeOnce  sync.Once
	refusing   chan struct{} // bounds the goroutines answering refused connections

	mu   sync.Mutex
	byIP map[string]int
	open atomic.Int64
	peak atomic.Int64
}

func newConnLimiter(l net.Listener, max, perIP int) *connLimiter {
	return &connLimiter{Listener: l, max: max, perIP: perIP, sem: make(chan struct{}, max),
		closed: make(chan struct{}), refusing: make(chan struct{}, 32), byIP: make(map[string]int)}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		select {
		case l.sem <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.sem
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		over := l.perIP > 0 && l.byIP[ip] >= l.perIP
		if !over {
			l.byIP[ip]++
		}
		l.mu.Unlock()
		if over {
			<-l.sem
			l.refuse(c)
			continue
		}
		n := l.open.Add(1)
		for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
		}
		return &limitedConn{Conn: c, l: l, ip: ip}, nil
	}
}

// refuse answers a connection over the per-address cap with a 429 naming
// the limit, in the background, and closes it. When too many refusals are
// already being answered it just closes.
func (l *connLimiter) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		body := fmt.Sprintf(`{"code":"too_many_requests","message":"this address has %d connections open to the node's API, its limit per client address; close some or retry later"}`+"\n", l.perIP)
		c.SetWriteDeadline(time.Now().Add(time.Second))
		fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 5\r\nConnection: close\r\n\r\n%s", len(body), body)
		// Give the client a moment to read the answer before the
		// close resets the connection over its unread request.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
}

func (l *connLimiter) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Open returns the connections open now; Peak the most ever open at once.
func (l *connLimiter) Open() int64 { return l.open.Load() }
func (l *connLimiter) Peak() int64 { return l.peak.Load() }

type limitedConn struct {
	net.Conn
	l    *connLimiter
	ip   string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.l.byIP[c.ip]--; c.l.byIP[c.ip] <= 0 {
			delete(c.l.byIP, c.ip)
		}
		c.l.mu.Unlock()
		c.l.open.Add(-1)
		<-c.l.sem
	})
	return err
}

func remoteIP(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}
