package daemon

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/chainclient"
)

// dialFrom connects to addr from the loopback address ip, and closes the
// connection when the test ends.
func dialFrom(t *testing.T, ip net.IP, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// apiConns reads the node's gpunet_api_connections{state}.
func apiConns(t *testing.T, d *Daemon, state string) float64 {
	t.Helper()
	mfs, err := d.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gpunet_api_connections" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == state {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no gpunet_api_connections{state=%q}", state)
	return 0
}

func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// TestOpenAIEndpointCannotLockOutTheAPI is issue 27's attack on a real
// node: 128 connections from each of 8 addresses send the headers of a 4
// MiB chat completion, without a key, and then nothing. Before, the
// gateway read the body before it checked the key, with no time limit:
// the connections filled the API's cap and no client reached the node.
// Now each is answered 401 at once and closed (or 503, when the anonymous
// connections are all taken), and all along the node's clients are
// served at once: one on the node's host and one elsewhere.
// One more connection from an address that holds its 128 is answered 429,
// and a slow body on an ordinary route is cut off at its route's 15 s.
func TestOpenAIEndpointCannotLockOutTheAPI(t *testing.T) {
	d := startNode(t)
	addr := strings.TrimPrefix(d.APIURL, "http://")
	const addrs, perAddr = 8, maxAPIConnsPerIP

	// A few slow bodies on POST /v1/quote, from an address of their own.
	type cut struct {
		after time.Duration
		err   error
	}
	quotes := make(chan cut, 4)
	for range cap(quotes) {
		c, err := dialFrom(t, net.IPv4(127, 0, 0, 30), addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		io.WriteString(c, "POST /v1/quote HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		go func() {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := io.Copy(io.Discard, c) // until the node closes it
			quotes <- cut{time.Since(start), err}
		}()
	}

	// The attack.
	type answer struct {
		status int
		after  time.Duration
		err    error
	}
	answers := make(chan answer, addrs*perAddr)
	var sent, wg sync.WaitGroup
	sent.Add(addrs * perAddr)
	for a := range addrs {
		for range perAddr {
			wg.Go(func() {
				c, err := dialFrom(t, net.IPv4(127, 0, 0, byte(2+a)), addr)
				if err != nil {
					sent.Done()
					answers <- answer{err: err}
					return
				}
				start := time.Now()
				_, err = io.WriteString(c, "POST /openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4194304\r\n\r\n{")
				sent.Done()
				if err != nil {
					answers <- answer{err: err}
					return
				}
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					answers <- answer{after: time.Since(start), err: err}
					return
				}
				resp.Body.Close()
				answers <- answer{status: resp.StatusCode, after: time.Since(start)}
			})
		}
	}
	sent.Wait()

	// The node's clients, while the attack's connections are open.
	local := chainclient.New(d.APIURL)
	remote := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 70)}}).DialContext}}
	for i := range 3 {
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if _, err := local.Status(ctx); err != nil {
			t.Fatalf("a client on the node's host, during the attack (%d): %v", i, err)
		}
		cancel()
		resp, err := remote.Get(d.APIURL + "/v1/status")
		if err != nil {
			t.Fatalf("a client elsewhere, during the attack (%d): %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("a client elsewhere, during the attack (%d): %s", i, resp.Status)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("the clients' requests %d took %v", i, took)
		}
	}
	wg.Wait()
	close(answers)
	// Each attacking connection is answered 401 before its body; or 503
	// when the anonymous connections are all taken (refused ones are
	// closed gracefully, which takes a moment); or closed to make room,
	// when more than the cap are open at once. None waits for its body.
	slowest, count := time.Duration(0), map[string]int{}
	for a := range answers {
		switch {
		case a.err == nil && (a.status == http.StatusUnauthorized || a.status == http.StatusServiceUnavailable):
			count[http.StatusText(a.status)]++
		case a.err != nil && a.after > 0 && !isTimeout(a.err):
			count["closed"]++
		default:
			t.Fatalf("an attacking connection got %d %v, want 401 before its body", a.status, a.err)
		}
		slowest = max(slowest, a.after)
	}
	if slowest > 5*time.Second || count[http.StatusText(http.StatusUnauthorized)] == 0 {
		t.Errorf("attacking connections ended %v, the slowest after %v; want 401s, all at once", count, slowest)
	}
	t.Logf("attacking connections ended: %v, the slowest after %v", count, slowest)

	// The refused connections close gracefully (net/http waits 500 ms for
	// a client still sending): let them, so that the node has room.
	for deadline := time.Now().Add(10 * time.Second); apiConns(t, d, "open") > 16; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v API connections still open after the attack", apiConns(t, d, "open"))
		}
	}

	// The per-address bound: 128 connections that have not finished their
	// headers, then one more.
	for range perAddr {
		c, err := dialFrom(t, net.IPv4(127, 0, 0, 20), addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /v1/status HT")
	}
	for deadline := time.Now().Add(10 * time.Second); apiConns(t, d, "pending") < perAddr; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v of %d connections pending", apiConns(t, d, "pending"), perAddr)
		}
	}
	c, err := dialFrom(t, net.IPv4(127, 0, 0, 20), addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("connection %d from one address: %v %v, want 429", perAddr+1, resp, err)
	}
	resp.Body.Close()

	for range cap(quotes) {
		q := <-quotes
		if q.err != nil || q.after < 14*time.Second || q.after > 20*time.Second {
			t.Errorf("a slow body on /v1/quote was cut after %v (%v), want its route's 15 s", q.after, q.err)
		}
	}
}
