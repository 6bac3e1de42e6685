package blob

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSlowDownloadIsCutOff: a client that stops reading a download, or
// reads a trickle, is disconnected short of the body by the progress
// deadline instead of holding the connection (and an open blob file) for
// as long as it likes. Real TCP on loopback, with a small receive buffer
// so that the server's writes block.
func TestSlowDownloadIsCutOff(t *testing.T) {
	const size = 16 << 20
	tests := []struct {
		name string
		lim  Limits
		// pause between reads of 1 KiB; 0 stalls for the whole budget
		// and then reads all.
		pause time.Duration
	}{
		{"stalled reader", Limits{IdleTimeout: 300 * time.Millisecond, MinRate: -1}, 0},
		{"trickle reader", Limits{IdleTimeout: 2 * time.Second, MinRate: 256 << 10, RateGrace: 500 * time.Millisecond}, 20 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewGateway(newStore(t, 2*size), GatewayOptions{Limits: tc.lim}).(*handler)
			srv := httptest.NewUnstartedServer(h)
			closed := make(chan struct{}, 1)
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateClosed {
					closed <- struct{}{}
				}
			}
			srv.Start()
			defer srv.Close()
			data := make([]byte, size)
			rand.Read(data)
			sum, _, err := h.store.Put(t.Context(), bytes.NewReader(data), nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4 << 10)
			if _, err := io.WriteString(c, "GET /v1/blobs/"+sum.String()+" HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			budget := 8 * time.Second
			start := time.Now()
			br := bufio.NewReaderSize(c, 1<<10)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if tc.pause > 0 {
				go func() {
					buf := make([]byte, 1<<10)
					for {
						if _, err := resp.Body.Read(buf); err != nil {
							return
						}
						time.Sleep(tc.pause)
					}
				}()
			}
			// The server's side is what matters: the bytes it already
			// queued in the kernel still reach the client after it closes.
			select {
			case <-closed:
				t.Logf("the server closed the connection after %v", time.Since(start).Round(time.Millisecond))
			case <-time.After(budget):
				t.Fatalf("the server still holds the slow client's connection after %v; want it closed by the progress deadline", budget)
			}
		})
	}
}

// TestStalledGatewayFailsTheDownload: a gateway that never answers, or
// answers and then sends nothing, fails the client's download within its
// bounds with words that say which; before, GetForJob waited for ever, and
// a provider's run that could not start without its inputs with it.
func TestStalledGatewayFailsTheDownload(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("job") == "2" {
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			w.Write(make([]byte, 10))
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	c := NewClient(srv.URL)
	c.AnswerTimeout, c.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond
	for job, want := range map[uint64]string{1: "did not answer within 300ms", 2: "sent nothing for 300ms"} {
		start := time.Now()
		_, err := c.GetForJob(t.Context(), Hash{1}, job, io.Discard)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("job %d: %v, want an error saying %q", job, err, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("job %d: failed after %v, want within its 300-ms bound", job, d)
		}
	}
}
