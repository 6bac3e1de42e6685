package relay

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxLine bounds a stream's header line and its answer.
const MaxLine = 4 << 10

// readLine reads one '\n'-terminated line of at most max bytes from r, a
// byte at a time so that nothing after the line is consumed.
func readLine(r io.Reader, max int) (string, error) {
	var b []byte
	var one [1]byte
	for len(b) <= max {
		if _, err := io.ReadFull(r, one[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			return "", err
		}
		if one[0] == '\n' {
			return strings.TrimSuffix(string(b), "\r"), nil
		}
		b = append(b, one[0])
	}
	return "", fmt.Errorf("line longer than %d bytes", max)
}

// bufConn is a net.Conn whose first bytes come from a reader that may hold
// some of them already (what an HTTP parser read past its message).
type bufConn struct {
	net.Conn
	r io.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite half-closes when the conn below can.
func (c *bufConn) CloseWrite() error { return closeWrite(c.Conn) }

// withBuffered wraps c so that the br's buffered bytes are read first.
func withBuffered(c net.Conn, br *bufio.Reader) net.Conn {
	if br == nil || br.Buffered() == 0 {
		return c
	}
	return &bufConn{Conn: c, r: io.MultiReader(io.LimitReader(br, int64(br.Buffered())), c)}
}

// closeWrite half-closes c when it can (TCP, TLS, a yamux stream, whose
// Close is a half-close) and closes it otherwise.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// onClose is a net.Conn that calls fn once when closed.
type onClose struct {
	net.Conn
	once sync.Once
	fn   func()
}

func (c *onClose) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.fn)
	return err
}

func (c *onClose) CloseWrite() error { return closeWrite(c.Conn) }

// splice copies between a and b both ways until both directions end or
// nothing moved either way for idle (0: no limit), then closes both.
func splice(a, b net.Conn, idle time.Duration) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		closeWrite(dst)
	}
	wg.Add(2)
	go cp(a, b)
	go cp(b, a)
	go func() { wg.Wait(); close(done) }()
	if idle > 0 {
		t := time.NewTicker(max(idle/4, 10*time.Millisecond))
		defer t.Stop()
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-t.C:
				if time.Since(time.Unix(0, last.Load())) > idle {
					break loop
				}
			}
		}
	} else {
		<-done
	}
	a.Close()
	b.Close()
	<-done
}

// dialUpgrade opens rawURL's host (TLS for https), sends GET rawURL with
// Upgrade: proto and the extra headers, and returns the connection once
// the answer is 101. Any other answer is an *UpgradeError.
func dialUpgrade(ctx context.Context, rawURL, proto string, header http.Header, timeout time.Duration) (net.Conn, *http.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host = net.JoinHostPort(u.Hostname(), "443")
		} else {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, nil, fmt.Errorf("url %q: scheme must be http or https", rawURL)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if u.Scheme == "https" {
		tc := tls.Client(c, &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, nil, err
		}
		c = tc
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", proto)
	if err := req.Write(c); err != nil {
		c.Close()
		return nil, nil, ctxErr(ctx, err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		c.Close()
		return nil, nil, ctxErr(ctx, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxLine))
		c.Close()
		return nil, resp, &UpgradeError{Status: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), proto) {
		c.Close()
		return nil, resp, fmt.Errorf("%s: upgraded to %q, want %q", rawURL, resp.Header.Get("Upgrade"), proto)
	}
	if !stop() {
		c.Close()
		return nil, nil, ctx.Err()
	}
	c.SetDeadline(time.Time{})
	return withBuffered(c, br), resp, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// UpgradeError is a refused upgrade: the node's status and error body.
type UpgradeError struct {
	Status int
	Body   string
}

func (e *UpgradeError) Error() string {
	return fmt.Sprintf("relay refused: %d %s: %s", e.Status, http.StatusText(e.Status), e.Body)
}

// upgradeRequested reports whether r asks to upgrade to proto.
func upgradeRequested(r *http.Request, proto string) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), proto)
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// hijack takes r's connection over after writing a 101 to proto with the
// extra headers. The returned conn reads any bytes the client sent early.
func hijack(w http.ResponseWriter, proto string, extra http.Header) (net.Conn, error) {
	c, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Time{})
	var b strings.Builder
	b.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + proto + "\r\n")
	for k, vs := range extra {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, b.String()); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return withBuffered(c, brw.Reader), nil
}
