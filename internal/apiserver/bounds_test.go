package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/admission"
)

// boundsServer serves s over loopback on an admission listener with lim,
// as a node does.
func boundsServer(t *testing.T, s *Server, lim admission.Limits) (*admission.Listener, string) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := admission.NewListener(inner, lim)
	ctx, cancel := context.WithCancel(context.Background())
	done := s.Serve(ctx, l)
	t.Cleanup(func() { cancel(); <-done })
	return l, inner.Addr().String()
}

// dialFrom connects to addr from the loopback address 127.0.0.last.
func dialFrom(t *testing.T, last byte, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, last)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readAnswer reads one answer on c within d.
func readAnswer(c net.Conn, br *bufio.Reader, d time.Duration) (*http.Response, string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// uploadRoute reads its whole body within a second and answers its size;
// X-Test-Key: k is its credential.
func uploadRoute() Route {
	return Route{Method: "POST", Path: "/test/upload", ID: "testUpload", Summary: "test", BodyType: "application/octet-stream",
		MaxBody: 1 << 20, BodyTimeout: time.Second, Errors: []int{400},
		Trusted: func(r *http.Request) bool { return r.Header.Get("X-Test-Key") == "k" },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				writeError(w, http.StatusBadRequest, 0, err.Error())
				return
			}
			fmt.Fprintf(w, "%d", len(b))
		})}
}

// Slow bodies from several addresses, each holding every connection its
// address may open and opening another as soon as one is closed: each is
// cut off at its route's body deadline, they never hold more than the
// anonymous part of the connections, and a key holder's and the token
// holder's requests are served at once all along.
func TestSlowBodiesCannotLockOutKeyHolders(t *testing.T) {
	s := New(newFakeChain(t), Options{Token: "tok"})
	s.Mount(uploadRoute())
	lim := admission.Limits{Max: 32, Reserve: 8, PerAddr: 6}
	l, addr := boundsServer(t, s, lim)

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []time.Duration // how long the server let each slow body hold its connection
	for a := range 5 {
		for range lim.PerAddr {
			wg.Go(func() {
				for ctx.Err() == nil {
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(10+a))}}
					c, err := d.DialContext(ctx, "tcp", addr)
					if err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					start := time.Now()
					io.WriteString(c, "POST /test/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nsome")
					stopClose := context.AfterFunc(ctx, func() { c.Close() })
					resp, _, err := readAnswer(c, bufio.NewReader(c), 10*time.Second)
					if err == nil && resp.StatusCode == http.StatusBadRequest && ctx.Err() == nil {
						mu.Lock()
						held = append(held, time.Since(start))
						mu.Unlock()
					}
					stopClose()
					c.Close()
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
	defer func() { stop(); wg.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Anonymous < lim.Max-lim.Reserve {
		if time.Now().After(deadline) {
			t.Fatalf("the attack did not take the anonymous connections: %+v", l.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 100)}}).DialContext}}
	for i := range 6 {
		start := time.Now()
		req, _ := http.NewRequest("POST", "http://"+addr+"/test/upload", strings.NewReader("hello"))
		req.Header.Set("X-Test-Key", "k")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("key holder's upload %d during the attack: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "5" {
			t.Errorf("key holder's upload %d: %d %s", i, resp.StatusCode, b)
		}
		req, _ = http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
		req.Header.Set("Authorization", "Bearer tok")
		if resp, err = hc.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("token holder's request %d during the attack: %v %v", i, resp, err)
		}
		resp.Body.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("requests %d took %v", i, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if len(held) == 0 {
		t.Fatal("no slow body was cut off by its deadline")
	}
	for _, d := range held {
		if d < 900*time.Millisecond || d > 3*time.Second {
			t.Errorf("a slow body held its connection %v, want its route's BodyTimeout of 1s", d)
		}
	}
	if st := l.Stats(); st.Peak > lim.Max || st.RefusedAnonymous == 0 {
		t.Errorf("stats %+v: want at most %d open and anonymous requests refused", st, lim.Max)
	}
}

// A request refused before its body is read (a wrong token, an unknown
// path) is answered at once and its connection closed, even when the body
// never comes: net/http would otherwise wait for up to 256 KiB of it before
// it sends the answer.
func TestRefusalBeforeBodyIsAnsweredAtOnce(t *testing.T) {
	s := New(newFakeChain(t), Options{Token: "tok"})
	s.Mount(Route{Method: "POST", Path: "/test/admin", ID: "testAdmin", Summary: "test", Auth: true, Body: map[string]any{},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })})
	_, addr := boundsServer(t, s, admission.Limits{Max: 8, Reserve: 2})
	for _, tc := range []struct {
		path, auth string
		status     int
	}{
		{"/test/admin", "Bearer wrong", http.StatusUnauthorized},
		{"/test/nowhere", "", http.StatusNotFound},
	} {
		c := dialFrom(t, 20, addr)
		start := time.Now()
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Length: 1000\r\n\r\n", tc.path, tc.auth)
		br := bufio.NewReader(c)
		resp, _, err := readAnswer(c, br, 3*time.Second)
		if err != nil || resp.StatusCode != tc.status {
			t.Fatalf("POST %s without its body: %v %v, want %d at once", tc.path, resp, err, tc.status)
		}
		if d := time.Since(start); d > drainGrace/2 {
			t.Errorf("POST %s: answered in %v, want at once", tc.path, d)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("POST %s: after the answer %v, want the connection closed", tc.path, err)
		}
		if d := time.Since(start); d > drainGrace+time.Second {
			t.Errorf("POST %s: answered and closed in %v, want within its drain grace of %v", tc.path, d, drainGrace)
		}
	}
}

// A stream (a route without a Timeout) on a connection that served a
// bounded request before is not cut by that request's deadlines, and an
// upload that keeps sending is not cut by its idle deadline, while one
// that stalls is.
func TestStreamsOutliveOtherRequestsDeadlines(t *testing.T) {
	s := New(newFakeChain(t), Options{})
	s.Mount(
		Route{Method: "POST", Path: "/test/quick", ID: "testQuick", Summary: "test", Body: map[string]any{}, Timeout: 300 * time.Millisecond,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body); io.WriteString(w, "quick") })},
		Route{Method: "GET", Path: "/test/stream", ID: "testStream", Summary: "test", RespType: "text/event-stream", MaxBody: -1, Timeout: -1,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for i := range 8 {
					select {
					case <-r.Context().Done():
						return
					case <-time.After(150 * time.Millisecond):
					}
					fmt.Fprintf(w, "tick %d\n", i)
					http.NewResponseController(w).Flush()
				}
			})},
		Route{Method: "PUT", Path: "/test/trickle", ID: "testTrickle", Summary: "test", BodyType: "application/octet-stream", MaxBody: -1, Timeout: -1,
			BodyTimeout: 10 * time.Second, BodyIdle: 400 * time.Millisecond,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					writeError(w, http.StatusRequestTimeout, 0, err.Error())
					return
				}
				fmt.Fprintf(w, "%d", len(b))
			})},
	)
	_, addr := boundsServer(t, s, admission.Limits{Max: 8, Reserve: 2})

	c := dialFrom(t, 30, addr)
	br := bufio.NewReader(c)
	io.WriteString(c, "POST /test/quick HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	if resp, body, err := readAnswer(c, br, 3*time.Second); err != nil || body != "quick" {
		t.Fatalf("quick: %v %q %v", resp, body, err)
	}
	io.WriteString(c, "GET /test/stream HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body, err := readAnswer(c, br, 5*time.Second); err != nil || strings.Count(body, "tick") != 8 {
		t.Fatalf("stream after a bounded request on its connection: %v %q %v, want all 8 ticks", resp, body, err)
	}

	trickle := func(pause time.Duration) (*http.Response, string, error) {
		c := dialFrom(t, 31, addr)
		io.WriteString(c, "PUT /test/trickle HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n")
		for range 8 {
			time.Sleep(pause)
			if _, err := io.WriteString(c, "x"); err != nil {
				break
			}
		}
		return readAnswer(c, bufio.NewReader(c), 5*time.Second)
	}
	if resp, body, err := trickle(150 * time.Millisecond); err != nil || resp.StatusCode != http.StatusOK || body != "8" {
		t.Errorf("upload sending a byte every 150ms (idle limit 400ms): %v %q %v, want it taken", resp, body, err)
	}
	if resp, body, err := trickle(time.Second); err != nil || resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "too slow") {
		t.Errorf("upload stalling for 1s (idle limit 400ms): %v %q %v, want 408", resp, body, err)
	}
}

// A connection a handler takes over keeps none of the API's deadlines:
// neither the request's before it on the connection, nor the stream's
// write deadline (a relay session lives for hours).
func TestHijackedConnectionKeepsNoDeadline(t *testing.T) {
	old := streamWriteIdle
	streamWriteIdle = 200 * time.Millisecond
	t.Cleanup(func() { streamWriteIdle = old })
	s := New(newFakeChain(t), Options{})
	s.Mount(
		Route{Method: "POST", Path: "/test/quick", ID: "testQuick", Summary: "test", Body: map[string]any{}, Timeout: 300 * time.Millisecond,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body); io.WriteString(w, "quick") })},
		Route{Method: "GET", Path: "/test/hijack", ID: "testHijack", Summary: "test", RespType: "application/octet-stream", MaxBody: -1, Timeout: -1,
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c, brw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
				go func() {
					defer c.Close()
					line, err := brw.ReadString('\n') // sent after every deadline above has passed
					if err != nil {
						t.Errorf("read on the hijacked connection: %v", err)
						return
					}
					if _, err := io.WriteString(c, "echo "+line); err != nil {
						t.Errorf("write on the hijacked connection: %v", err)
					}
				}()
			})},
	)
	_, addr := boundsServer(t, s, admission.Limits{Max: 8, Reserve: 2})
	c := dialFrom(t, 40, addr)
	br := bufio.NewReader(c)
	io.WriteString(c, "POST /test/quick HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
	if _, body, err := readAnswer(c, br, 3*time.Second); err != nil || body != "quick" {
		t.Fatalf("quick: %q %v", body, err)
	}
	io.WriteString(c, "GET /test/hijack HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	time.Sleep(time.Second)
	io.WriteString(c, "late\n")
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || line != "echo late\n" {
		t.Errorf("after a second on the hijacked connection: %q %v, want the echo", line, err)
	}
}

// A client still sending a large body when the handler refuses it gets the
// answer, not a reset: the connection is closed the way net/http closes
// one whose client may still be writing.
func TestRefusedUploadGetsItsAnswer(t *testing.T) {
	s := New(newFakeChain(t), Options{})
	s.Mount(Route{Method: "POST", Path: "/test/big", ID: "testBig", Summary: "test", BodyType: "application/octet-stream", MaxBody: 64 << 20, Timeout: time.Minute,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadFull(r.Body, make([]byte, 10))
			writeError(w, http.StatusBadRequest, 0, "no")
		})})
	_, addr := boundsServer(t, s, admission.Limits{Max: 8, Reserve: 2})
	for i := range 5 {
		resp, err := http.Post("http://"+addr+"/test/big", "application/octet-stream", bytes.NewReader(make([]byte, 32<<20)))
		if err != nil {
			t.Fatalf("upload %d: %v, want its 400", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("upload %d: %s, want 400", i, resp.Status)
		}
	}
}
