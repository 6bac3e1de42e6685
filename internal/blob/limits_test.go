package blob

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// limitedGateway serves a fresh store with the given limits (no auth) on a
// real loopback listener.
func limitedGateway(t *testing.T, max int64, lim Limits) (*handler, *httptest.Server) {
	t.Helper()
	h := NewGateway(newStore(t, max), GatewayOptions{Limits: lim}).(*handler)
	mux := http.NewServeMux()
	mux.Handle("/v1/blobs", h)
	mux.Handle("/v1/blobs/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return h, srv
}

// rawUpload opens a connection from local (an IP, "" for any) and sends
// the head of a PUT with the given extra header lines; the body is up to
// the caller.
func rawUpload(t *testing.T, srv *httptest.Server, local string, headers ...string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.DialContext(t.Context(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "PUT /v1/blobs HTTP/1.1\r\nHost: gw\r\n" + strings.Join(headers, "\r\n")
	if len(headers) > 0 {
		head += "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// readAnswer reads the response on c, failing if none comes within wait.
func readAnswer(t *testing.T, c net.Conn, wait time.Duration) (*http.Response, errorResponse) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", wait, err)
	}
	defer resp.Body.Close()
	var e errorResponse
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &e)
	return resp, e
}

// An upload that stalls, or trickles a byte at a time, is cut off with 408
// instead of holding its connection and temporary file forever.
func TestSlowUploadIsCutOff(t *testing.T) {
	lim := Limits{IdleTimeout: 300 * time.Millisecond, MinRate: 1000, RateGrace: 500 * time.Millisecond}
	_, srv := limitedGateway(t, 1<<20, lim)

	t.Run("stalled", func(t *testing.T) {
		c := rawUpload(t, srv, "", "Content-Length: 100")
		io.WriteString(c, "abc") // then nothing
		start := time.Now()
		resp, e := readAnswer(t, c, 5*time.Second)
		if resp.StatusCode != http.StatusRequestTimeout || e.Code != "request_timeout" || !strings.Contains(e.Message, "idle limit") {
			t.Errorf("got %d %+v, want 408 naming the idle limit", resp.StatusCode, e)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("cut off after %v, want about %v", d, lim.IdleTimeout)
		}
	})
	t.Run("trickle", func(t *testing.T) {
		c := rawUpload(t, srv, "", "Transfer-Encoding: chunked")
		stop := make(chan struct{})
		defer close(stop)
		go func() { // one byte every 100 ms: never idle, far below 1000 B/s
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
					if _, err := io.WriteString(c, "1\r\nx\r\n"); err != nil {
						return
					}
				}
			}
		}()
		resp, e := readAnswer(t, c, 5*time.Second)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(e.Message, "minimum of 1000 bytes/s") {
			t.Errorf("got %d %+v, want 408 naming the minimum rate", resp.StatusCode, e)
		}
	})
}

// Past MaxUploadsPerIP uploads from one address, a further one is answered
// 429, and past MaxUploads in all 503, each before its body is read and
// naming the limit; once slow uploads end, uploads are served again.
func TestUploadConcurrencyCaps(t *testing.T) {
	h, srv := limitedGateway(t, 1<<20, Limits{MaxUploads: 4, MaxUploadsPerIP: 2, IdleTimeout: time.Minute, RateGrace: time.Minute})
	waitSlots := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			h.slots.mu.Lock()
			got := h.slots.n
			h.slots.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d uploads in progress, want %d", got, n)
			}
		}
	}
	var holding []net.Conn
	for i, ip := range []string{"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"} {
		holding = append(holding, rawUpload(t, srv, ip, "Content-Length: 1000"))
		waitSlots(i + 1)
	}
	resp, e := readAnswer(t, rawUpload(t, srv, "127.0.0.1", "Content-Length: 1000"), 5*time.Second)
	if resp.StatusCode != http.StatusTooManyRequests || e.Code != "too_many_requests" || !strings.Contains(e.Message, "max_uploads_per_ip") {
		t.Errorf("third upload from one address: %d %+v, want 429 naming max_uploads_per_ip", resp.StatusCode, e)
	}
	resp, e = readAnswer(t, rawUpload(t, srv, "127.0.0.3", "Content-Length: 1000"), 5*time.Second)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Message, "4 uploads in progress") || resp.Header.Get("Retry-After") == "" {
		t.Errorf("fifth upload: %d %+v, want 503 naming max_uploads with Retry-After", resp.StatusCode, e)
	}
	for _, c := range holding {
		c.Close()
	}
	waitSlots(0)
	c := NewClient(srv.URL)
	if _, _, err := c.Put(t.Context(), strings.NewReader("after the slow ones")); err != nil {
		t.Errorf("upload after the slow clients left: %v", err)
	}
}

// An upload that declares more than the limit is refused at once, before
// its body is sent: the server must not wait to drain it (it used to read
// up to 256 KiB of an unread body before answering).
func TestOversizeRefusedBeforeBody(t *testing.T) {
	_, srv := limitedGateway(t, 4096, Limits{})
	c := rawUpload(t, srv, "", "Content-Length: 5000") // and no body, no Expect: 100-continue
	resp, e := readAnswer(t, c, 3*time.Second)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(e.Message, "limit of this gateway is 4096 bytes") {
		t.Errorf("got %d %+v, want 413 naming the limit", resp.StatusCode, e)
	}
	if !resp.Close {
		t.Errorf("413 does not close the connection; the unread body would be parsed as the next request")
	}
}

// A chunked upload is cut off as soon as it passes the limit, without
// waiting for the rest.
func TestChunkedOversizeCutOff(t *testing.T) {
	_, srv := limitedGateway(t, 4096, Limits{})
	c := rawUpload(t, srv, "", "Transfer-Encoding: chunked")
	chunk := strings.Repeat("x", 1000)
	for range 5 { // 5000 bytes, then the client stalls without the last chunk
		fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk)
	}
	resp, e := readAnswer(t, c, 3*time.Second)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(e.Message, "more than 4096 bytes") {
		t.Errorf("got %d %+v, want 413 naming the limit", resp.StatusCode, e)
	}
}

// Many slow uploads at once from many addresses: the gateway holds at most
// MaxUploads of them, answers the others at once, and cuts the held ones
// off by the idle limit; an honest upload then goes through.
func TestManySlowUploadsAreBounded(t *testing.T) {
	h, srv := limitedGateway(t, 1<<20, Limits{MaxUploads: 20, MaxUploadsPerIP: 2, IdleTimeout: 500 * time.Millisecond})
	const clients = 200
	var wg sync.WaitGroup
	statuses := make(chan int, clients)
	peak := 0
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			h.slots.mu.Lock()
			peak = max(peak, h.slots.n)
			h.slots.mu.Unlock()
		}
	}()
	for i := range clients {
		wg.Go(func() {
			ip := fmt.Sprintf("127.0.%d.%d", 1+i/250, 1+i%250)
			c := rawUpload(t, srv, ip, "Content-Length: 1000")
			io.WriteString(c, "x")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("client %d: no answer: %v", i, err)
				return
			}
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(stop)
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if peak > 20 {
		t.Errorf("%d uploads held at once, want at most MaxUploads = 20", peak)
	}
	if count[http.StatusRequestTimeout] == 0 || count[http.StatusRequestTimeout]+count[http.StatusServiceUnavailable] != clients {
		t.Errorf("answers %v: want only 408 (cut off) and 503 (refused)", count)
	}
	if _, _, err := NewClient(srv.URL).Put(t.Context(), strings.NewReader("honest")); err != nil {
		t.Errorf("honest upload after the attack: %v", err)
	}
}
