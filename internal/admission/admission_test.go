package admission

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// server serves h on a Listener with lim over loopback, wired as the API
// wires it.
func server(t *testing.T, lim Limits, readHeader time.Duration, h http.Handler) (*Listener, string) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(inner, lim)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeader, ConnContext: ConnContext, ConnState: l.ConnState}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l, inner.Addr().String()
}

// keyed admits a request as Trusted when it carries X-Key: good, refuses
// it with 503 when Admit does, hijacks it (vouched) on /hijack, and
// otherwise reads its body and answers ok.
func keyed(hijacked chan<- net.Conn) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		class := Anonymous
		if r.Header.Get("X-Key") == "good" {
			class = Trusted
		}
		if !Admit(r, class) {
			w.Header().Set("Connection", "close")
			http.NewResponseController(w).SetReadDeadline(time.Now())
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/hijack" {
			VouchOnHijack(r)
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
				hijacked <- c
			}
			return
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
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

// slowBody sends a request's headers on c and none of its body.
func slowBody(c net.Conn) error {
	_, err := io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
	return err
}

// get sends GET path on c with hdr ("Name: value" lines) and reads the
// answer, within 5 s.
func get(c net.Conn, path string, hdr ...string) (*http.Response, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\n"
	for _, h := range hdr {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	io.ReadAll(resp.Body)
	return resp, nil
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Anonymous clients that hold every connection they get with a body that
// never comes, and open a new one as soon as one is closed, never hold
// more than Max-Reserve connections: a key holder's request is served at
// once, and so is an anonymous newcomer's (it takes the slot of the
// heaviest address).
func TestReserveKeepsRoomForTrusted(t *testing.T) {
	lim := Limits{Max: 40, Reserve: 10, PerAddr: 8}
	l, addr := server(t, lim, 10*time.Second, keyed(nil))

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
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
					slowBody(c)
					go func() { <-ctx.Done(); c.Close() }()
					io.Copy(io.Discard, c) // until the listener closes it
					c.Close()
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
	defer func() { stop(); wg.Wait() }()
	waitFor(t, "the attack to take every anonymous slot", func() bool { return l.Stats().Anonymous == lim.Max-lim.Reserve })

	watch, endWatch := context.WithCancel(t.Context())
	var worst Stats
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for watch.Err() == nil {
			s := l.Stats()
			worst.Open, worst.Anonymous = max(worst.Open, s.Open), max(worst.Anonymous, s.Anonymous)
			time.Sleep(time.Millisecond)
		}
	}()

	for i := range 5 {
		start := time.Now()
		resp, err := get(dialFrom(t, 100, addr), "/", "X-Key: good")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("key holder's request %d during the attack: %v %v", i, resp, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("key holder's request %d took %v", i, d)
		}
	}
	resp, err := get(dialFrom(t, 101, addr), "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("anonymous newcomer during the attack: %v %v, want it served in place of the heaviest address", resp, err)
	}
	endWatch()
	<-watched
	s := l.Stats()
	if worst.Anonymous > lim.Max-lim.Reserve || worst.Open > lim.Max {
		t.Errorf("at worst %d open, %d anonymous; want at most %d and %d", worst.Open, worst.Anonymous, lim.Max, lim.Max-lim.Reserve)
	}
	if s.EvictedAnonymous == 0 || s.RefusedAnonymous == 0 {
		t.Errorf("stats %+v: want anonymous requests refused, and one evicted for the newcomer", s)
	}
}

// A connection hijacked after VouchOnHijack (a provider's verified relay
// session) makes its address trusted while it stays open: the address's
// requests get in when the anonymous slots are full, and stop getting in
// once it closes.
func TestVouchedAddressIsTrustedWhileItsConnectionLasts(t *testing.T) {
	hijacked := make(chan net.Conn, 1)
	lim := Limits{Max: 12, Reserve: 4, PerAddr: 8}
	l, addr := server(t, lim, 10*time.Second, keyed(hijacked))

	session := dialFrom(t, 50, addr)
	session.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(session, "GET /hijack HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(session), nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("session: %v %v", resp, err)
	}
	srvSide := <-hijacked

	// Eight anonymous addresses, one slow body each: the anonymous slots
	// are full, and no address holds more than another.
	for a := range 8 {
		if err := slowBody(dialFrom(t, byte(60+a), addr)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "eight anonymous slots taken", func() bool { return l.Stats().Anonymous == 8 })

	c := dialFrom(t, 50, addr)
	if resp, err := get(c, "/"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("request from the vouched address: %v %v, want it served", resp, err)
	}
	c.Close()
	if resp, err := get(dialFrom(t, 70, addr), "/"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("anonymous request with the slots full: %v %v, want 503", resp, err)
	}
	srvSide.Close()
	waitFor(t, "the session's connection to be released", func() bool { return l.Stats().Open == 8 })
	if resp, err := get(dialFrom(t, 50, addr), "/"); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("request from the address after its session closed: %v %v, want 503 like any anonymous one", resp, err)
	}
}

// When every connection is pending (clients that send their headers a
// byte at a time), a newcomer closes one of the address that holds the
// most, and is served.
func TestPendingGiveWayToNewcomers(t *testing.T) {
	lim := Limits{Max: 10, Reserve: 2, PerAddr: 20}
	l, addr := server(t, lim, 30*time.Second, keyed(nil))
	for range 6 {
		io.WriteString(dialFrom(t, 80, addr), "GET / HT")
	}
	for range 4 {
		io.WriteString(dialFrom(t, 81, addr), "GET / HT")
	}
	waitFor(t, "ten pending connections", func() bool { s := l.Stats(); return s.Pending == 10 && s.Open == 10 })
	start := time.Now()
	resp, err := get(dialFrom(t, 82, addr), "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("newcomer: %v %v", resp, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("newcomer took %v", d)
	}
	l.mu.Lock()
	n80, n81 := l.addrs[netip.MustParsePrefix("127.0.0.80/32")], l.addrs[netip.MustParsePrefix("127.0.0.81/32")]
	got80, got81 := n80.pending, n81.pending
	l.mu.Unlock()
	if s := l.Stats(); s.EvictedPending != 1 || got80 != 5 || got81 != 4 {
		t.Errorf("evicted %d; pending left %d and %d; want one evicted, of the heavier address (5 and 4 left)", s.EvictedPending, got80, got81)
	}
}

// Hundreds of clients that send their headers a byte at a time hold at
// most Max connections (the rest wait in the kernel's backlog, holding no
// descriptor of the process), are cut off by ReadHeaderTimeout, and an
// honest request is served after.
func TestSlowHeaders(t *testing.T) {
	lim := Limits{Max: 50, Reserve: 10, PerAddr: 4}
	l, addr := server(t, lim, 300*time.Millisecond, keyed(nil))

	const clients = 300
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 1, byte(i/200), byte(1+i%200))}, Timeout: 10 * time.Second}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				return // the backlog may overflow; a refused connect holds nothing
			}
			defer c.Close()
			io.WriteString(c, "GET / HTTP/1.1\r\nHo")
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			io.Copy(io.Discard, c) // until the server cuts it off
		})
	}
	wg.Wait()
	if p := l.Stats().Peak; p > lim.Max || p < 10 {
		t.Errorf("peak open connections %d, want at most the cap of %d (and the attack to reach it)", p, lim.Max)
	}
	if resp, err := get(dialFrom(t, 91, addr), "/"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("honest request after the attack: %v %v", resp, err)
	}
}

// Past the per-address bound a connection is answered 429.
func TestPerAddrBound(t *testing.T) {
	lim := Limits{Max: 50, Reserve: 10, PerAddr: 4}
	l, addr := server(t, lim, 10*time.Second, keyed(nil))
	for range lim.PerAddr {
		io.WriteString(dialFrom(t, 90, addr), "GET / HT")
	}
	waitFor(t, "four connections from one address", func() bool { return l.Stats().Open == lim.PerAddr })
	c := dialFrom(t, 90, addr)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("fifth connection from one address: %v, want a 429", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "limit per client address") {
		t.Errorf("fifth connection: %d %s, want 429 naming the per-address limit", resp.StatusCode, b)
	}
	if s := l.Stats(); s.RefusedAddr != 1 || s.Open != lim.PerAddr {
		t.Errorf("stats %+v: want one refused, four open", s)
	}
}

// A trusted address (the node's own host) has no per-address bound.
func TestTrustedAddrHasNoPerAddrBound(t *testing.T) {
	lim := Limits{Max: 20, Reserve: 5, PerAddr: 2, TrustedAddr: func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") }}
	l, addr := server(t, lim, 10*time.Second, keyed(nil))
	for range 6 {
		io.WriteString(dialFrom(t, 1, addr), "GET / HT")
	}
	waitFor(t, "six connections from the trusted address", func() bool { return l.Stats().Open == 6 })
	if s := l.Stats(); s.RefusedAddr != 0 {
		t.Errorf("refused %d connections of a trusted address", s.RefusedAddr)
	}
}

func TestAddrKey(t *testing.T) {
	for _, tc := range []struct{ ip, want string }{
		{"192.0.2.7", "192.0.2.7/32"},
		{"::ffff:192.0.2.7", "192.0.2.7/32"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"},
		{"fe80::1%eth0", "fe80::/64"},
	} {
		ip := netip.MustParseAddr(tc.ip).Unmap().WithZone("")
		if got := addrKey(ip); got.String() != tc.want {
			t.Errorf("addrKey(%s) = %s, want %s", tc.ip, got, tc.want)
		}
	}
	if got := addrKey(netip.Addr{}); got.IsValid() {
		t.Errorf("addrKey of no address = %v, want the zero prefix", got)
	}
}

func TestNewListenerRefusesUnsoundLimits(t *testing.T) {
	for _, lim := range []Limits{{Max: 1, Reserve: 1}, {Max: 10}, {Max: 10, Reserve: 10}, {Max: 10, Reserve: 2, PerAddr: -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewListener(%+v) did not panic", lim)
				}
			}()
			NewListener(nil, lim)
		}()
	}
}
