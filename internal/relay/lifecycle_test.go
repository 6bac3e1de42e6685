package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestAgentReconnect: the node restarts on the same address; the agent
// comes back by itself and traffic flows again.
func TestAgentReconnect(t *testing.T) {
	d, a, p, _ := setup(t, nil)
	addr := hostOf(a.url)
	a.stop()
	waitFor(t, 5*time.Second, func() bool { return p.agent.Relay() == "" })
	var l net.Listener
	waitFor(t, 5*time.Second, func() bool {
		var err error
		l, err = net.Listen("tcp", addr)
		return err == nil
	})
	a2 := startNodeOn(t, l, d, nil)
	waitConnected(t, a2.hub, p.addr)
	resp, b := do(t, "GET", a2.url+"/svc/1/8000/again", "", map[string]string{HeaderKey: testKey})
	if resp.StatusCode != 200 || decodeEcho(t, b).URI != "/again" {
		t.Fatalf("after the restart: %d %s", resp.StatusCode, b)
	}
}

// TestAgentTriesNextNode: the first node is down; the agent connects to
// the second.
func TestAgentTriesNextNode(t *testing.T) {
	d := newDir()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String()
	l.Close()
	b := startNode(t, d, nil)
	p := newProvider(1, nil)
	d.providers[p.addr] = true
	p.run(t, dead, b.url)
	waitConnected(t, b.hub, p.addr)
	waitFor(t, 5*time.Second, func() bool { return p.agent.Relay() == b.url })
}

// TestDeadAgentNoticed: an agent that completes its handshake and then
// stops answering (a frozen or cut-off machine: its TCP connection stays
// open) is dropped within two keepalive periods.
func TestDeadAgentNoticed(t *testing.T) {
	d := newDir()
	a := startNode(t, d, func(o *HubOptions) { o.KeepAlive = 200 * time.Millisecond })
	p := newProvider(1, nil)
	d.providers[p.addr] = true
	c, _, err := dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, hello(t, a, p.key), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // open, but never read or written
	waitConnected(t, a.hub, p.addr)
	start := time.Now()
	waitFor(t, 3*time.Second, func() bool { return !a.hub.Connected(p.addr) })
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("noticed after %v, want within ~2.5×200ms", d)
	}
	if _, err := a.hub.DialReplica(t.Context(), service(1, a.url, p), p.addr, 8000, ""); !errors.Is(err, ErrNoRoute) {
		t.Errorf("DialReplica to a dropped agent = %v, want ErrNoRoute", err)
	}
}

// TestNewSessionReplacesOld: one session per provider per node.
func TestNewSessionReplacesOld(t *testing.T) {
	d := newDir()
	a := startNode(t, d, nil)
	p := newProvider(1, nil)
	d.providers[p.addr] = true
	c1, _, err := dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, hello(t, a, p.key), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	waitConnected(t, a.hub, p.addr)
	c2, _, err := dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, hello(t, a, p.key), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	// The first connection is closed by the node.
	c1.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 512)
	for {
		if _, err := c1.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the replaced session stayed open")
			}
			break
		}
	}
	a.hub.mu.Lock()
	n := len(a.hub.sessions)
	a.hub.mu.Unlock()
	if n != 1 || !a.hub.Connected(p.addr) {
		t.Errorf("%d sessions, connected %v; want the new one only", n, a.hub.Connected(p.addr))
	}
}

func TestBounds(t *testing.T) {
	t.Run("sessions", func(t *testing.T) {
		d := newDir()
		a := startNode(t, d, func(o *HubOptions) { o.MaxSessions = 1 })
		p1, p2 := newProvider(1, nil), newProvider(2, nil)
		d.providers[p1.addr], d.providers[p2.addr] = true, true
		c, _, err := dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, hello(t, a, p1.key), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		waitConnected(t, a.hub, p1.addr)
		_, resp, err := dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, hello(t, a, p2.key), time.Second)
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("second provider over MaxSessions: %v, want 503", err)
		}
	})
	t.Run("streams", func(t *testing.T) {
		_, a, p, _ := setup(t, func(o *HubOptions) { o.MaxStreams = 2 })
		svc := service(1, a.url, p)
		var conns []net.Conn
		for range 2 {
			c, err := a.hub.DialReplica(t.Context(), svc, p.addr, 8000, "")
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		if _, err := a.hub.DialReplica(t.Context(), svc, p.addr, 8000, ""); !errors.Is(err, ErrBusy) {
			t.Errorf("third stream: %v, want ErrBusy", err)
		}
		conns[0].Close()
		c, err := a.hub.DialReplica(t.Context(), svc, p.addr, 8000, "")
		if err != nil {
			t.Errorf("after closing one: %v", err)
		} else {
			c.Close()
		}
		conns[1].Close()
	})
	t.Run("tunnels", func(t *testing.T) {
		_, a, p, backend := setup(t, func(o *HubOptions) { o.MaxTunnels = 1 })
		p.ports[9000] = hostOf(backend.URL)
		c, err := DialTCP(t.Context(), a.url, 1, 9000, testKey)
		if err != nil {
			t.Fatal(err)
		}
		_, err = DialTCP(t.Context(), a.url, 1, 9000, testKey)
		var ue *UpgradeError
		if !errors.As(err, &ue) || ue.Status != http.StatusTooManyRequests {
			t.Errorf("second tunnel: %v, want 429", err)
		}
		c.Close()
		waitFor(t, 3*time.Second, func() bool {
			c, err := DialTCP(t.Context(), a.url, 1, 9000, testKey)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	})
	t.Run("idle tunnel", func(t *testing.T) {
		_, a, p, backend := setup(t, func(o *HubOptions) { o.IdleTimeout = 200 * time.Millisecond })
		p.ports[9000] = hostOf(backend.URL)
		c, err := DialTCP(t.Context(), a.url, 1, 9000, testKey)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("idle tunnel read = %v, want it closed by the node", err)
		}
	})
	t.Run("stream header", func(t *testing.T) {
		// The agent refuses an over-long header line without reading on.
		_, err := readLine(strings.NewReader(strings.Repeat("x", MaxLine+1)+"\n"), MaxLine)
		if err == nil {
			t.Error("a header over MaxLine was read")
		}
		// And a stream that never sends its header is dropped.
		_, a, p, _ := setup(t, nil)
		a.hub.mu.Lock()
		s := a.hub.sessions[p.addr]
		a.hub.mu.Unlock()
		st, err := s.mux.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		st.SetReadDeadline(time.Now().Add(3 * DefaultHandshakeTimeout))
		start := time.Now()
		if _, err := st.Read(make([]byte, 1)); err == nil {
			t.Error("the agent answered a stream without a header")
		}
		if time.Since(start) > 2*DefaultHandshakeTimeout {
			t.Error("the agent held a headerless stream open")
		}
	})
}

// TestConcurrent: many clients at once through two nodes.
func TestConcurrent(t *testing.T) {
	backend := echoBackend(t)
	d := newDir()
	a := startNode(t, d, nil)
	b := startNode(t, d, func(o *HubOptions) { o.IsPeer = func(u string) bool { return u == a.url } })
	p := newProvider(1, map[uint64]string{8000: hostOf(backend.URL)})
	d.providers[p.addr] = true
	d.put(service(1, a.url, p))
	p.run(t, a.url)
	waitConnected(t, a.hub, p.addr)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := a
			if i%2 == 1 {
				n = b
			}
			body := strings.Repeat("y", 100_000+i)
			req, _ := http.NewRequestWithContext(context.Background(), "POST", n.url+"/svc/1/8000/c", strings.NewReader(body))
			req.Header.Set(HeaderKey, testKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var e echoed
			if err := json.Unmarshal(b, &e); err != nil || e.Body != body {
				d := 0
				for d < len(e.Body) && d < len(body) && e.Body[d] == body[d] {
					d++
				}
				errs <- fmt.Errorf("request %d at %s: %d, body %d bytes, want %d, differs at %d: %.100q; %.300s", i, n.url, resp.StatusCode, len(e.Body), len(body), d, e.Body[d:], b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestParseServicePath(t *testing.T) {
	for _, tc := range []struct {
		in       string
		id, port uint64
		rest     string
		ok       bool
	}{
		{"/svc/1/8000", 1, 8000, "", true},
		{"/svc/1/8000/", 1, 8000, "/", true},
		{"/svc/12/80/a/b", 12, 80, "/a/b", true},
		{"/svc/1", 0, 0, "", false},
		{"/svc/1/0/", 0, 0, "", false},
		{"/svc/1/65536/", 0, 0, "", false},
		{"/svc/-1/80/", 0, 0, "", false},
		{"/svcx/1/80", 0, 0, "", false},
	} {
		id, port, rest, ok := parseServicePath(tc.in)
		if id != tc.id || port != tc.port || rest != tc.rest || ok != tc.ok {
			t.Errorf("parseServicePath(%q) = %d %d %q %v, want %d %d %q %v", tc.in, id, port, rest, ok, tc.id, tc.port, tc.rest, tc.ok)
		}
	}
}

func FuzzParseServicePath(f *testing.F) {
	f.Add("/svc/1/8000/a")
	f.Add("/svc//")
	f.Fuzz(func(t *testing.T, p string) {
		id, port, rest, ok := parseServicePath(p)
		if !ok {
			return
		}
		if port == 0 || port > 65535 || (rest != "" && rest[0] != '/') || !strings.HasPrefix(p, ServicePrefix) {
			t.Errorf("parseServicePath(%q) = %d %d %q", p, id, port, rest)
		}
	})
}

func FuzzAuthorized(f *testing.F) {
	f.Add("Bearer sk-gpunet-test-key", "")
	f.Add("", "sk-gpunet-test-key")
	f.Fuzz(func(t *testing.T, auth, key string) {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", auth)
		r.Header.Set(HeaderKey, key)
		svc := &ledger.Service{KeyHashes: []ledger.Hash{keyHash(testKey)}}
		cred, ok := Authorized(svc, r)
		if ok != (cred == testKey) {
			t.Errorf("Authorized = %q, %v", cred, ok)
		}
	})
}
