package openaigw

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The key is checked on the headers, before any byte of the body is read:
// a request without a key, or with one that opens no service, is answered
// 401 at once, and its connection closed, even when its body never comes
// (issue 27: 128 such bodies from each of 8 addresses held every
// connection of a node's API).
func TestKeyCheckedBeforeBody(t *testing.T) {
	h := newHarness(t, Options{}, service(1, "tinylm", false, 1, provider(1)))
	addr := strings.TrimPrefix(h.url, "http://")
	for _, tc := range []struct {
		name, hdr string
		status    int
		code      string
	}{
		{"no key", "", http.StatusUnauthorized, CodeInvalidAPIKey},
		{"wrong key", "Authorization: Bearer sk-gpunet-wrong\r\n", http.StatusUnauthorized, CodeInvalidAPIKey},
		{"wrong X-Gpunet-Key", "X-Gpunet-Key: sk-gpunet-wrong\r\n", http.StatusUnauthorized, CodeInvalidAPIKey},
		{"text body", "Authorization: Bearer " + testKey + "\r\nContent-Type: text/plain\r\n", http.StatusUnsupportedMediaType, CodeUnsupportedMedia},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 4000\r\n\r\n{\"model\":", PathCompletions, tc.hdr)
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer while the body is missing: %v", err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if d := time.Since(start); d > drainGrace/2 {
				t.Errorf("answered in %v, want at once", d)
			}
			if e := apiErr(t, resp); str(e.Code) != tc.code {
				t.Errorf("code %q, want %q", str(e.Code), tc.code)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("after the answer: %v, want the connection closed", err)
			}
			if d := time.Since(start); d > drainGrace+time.Second {
				t.Errorf("answered and closed in %v, want within its drain grace of %v", d, drainGrace)
			}
		})
	}
	if n := len(h.dials); n != 0 {
		t.Errorf("%d dials for refused requests", n)
	}
}

func TestKeyHolder(t *testing.T) {
	h := newHarness(t, Options{}, service(1, "tinylm", false, 1, provider(1)), service(2, "open", true, 1, provider(2)))
	for _, tc := range []struct {
		hdr  []string
		want bool
	}{
		{nil, false},
		{[]string{"Authorization", "Bearer " + testKey}, true},
		{[]string{"Authorization", "bearer  " + testKey + " "}, true},
		{[]string{"X-Gpunet-Key", testKey}, true},
		{[]string{"Authorization", "Bearer sk-gpunet-wrong"}, false},
		{[]string{"Authorization", testKey}, false},
	} {
		r := httptest.NewRequest("GET", PathModels, nil)
		for i := 0; i+1 < len(tc.hdr); i += 2 {
			r.Header.Set(tc.hdr[i], tc.hdr[i+1])
		}
		if got := h.gw.KeyHolder(r); got != tc.want {
			t.Errorf("KeyHolder with %q = %v, want %v (a public service's clients hold no key)", tc.hdr, got, tc.want)
		}
	}
}

// watchedBody records whether any of it was read.
type watchedBody struct {
	r    io.Reader
	read atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.r.Read(p)
}

// FuzzChatHandler drives the gateway's chat completions with any key,
// content type and body, with and without a public service: every answer
// is a success or an OpenAI error object with a status the route
// documents; a request that can use no service is refused 401 without a
// byte of its body read and without a dial; and nothing is dialled for a
// body that does not validate.
func FuzzChatHandler(f *testing.F) {
	f.Add(false, testKey, "application/json", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add(true, "", "", []byte(`{"model":"pub","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add(false, "sk-gpunet-wrong", "application/json", []byte(`{"model":"m"}`))
	f.Add(true, testKey, "text/plain", []byte(`{`))
	f.Add(false, testKey, "application/json; charset=utf-8", []byte(`{"model":"m","messages":[],"n":2}`))
	f.Fuzz(func(t *testing.T, public bool, key, contentType string, body []byte) {
		svcs := []*ledger.Service{service(1, "m", false, 1, provider(1))}
		if public {
			svcs = append(svcs, service(2, "pub", true, 1, provider(2)))
		}
		var dials atomic.Int32
		g := New(Options{Directory: &fakeDir{svcs: svcs, rep: map[address.Address]uint64{}}, Authorized: authorized, MaxBody: 1 << 16,
			Log: slog.New(slog.DiscardHandler),
			Dial: func(context.Context, *ledger.Service, address.Address, uint64, string) (net.Conn, error) {
				dials.Add(1)
				return nil, errors.New("no replica in a fuzz test")
			}})
		defer g.Close()
		wb := &watchedBody{r: bytes.NewReader(body)}
		r := httptest.NewRequest(http.MethodPost, PathCompletions, wb)
		if key != "" && !strings.ContainsAny(key, "\r\n") {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		if contentType != "" && !strings.ContainsAny(contentType, "\r\n") {
			r.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)

		switch w.Code {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusRequestEntityTooLarge,
			http.StatusUnsupportedMediaType, http.StatusServiceUnavailable:
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		var eb struct {
			Error *errorDetail `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error == nil || eb.Error.Message == "" {
			t.Fatalf("answer %d is not an OpenAI error object: %s", w.Code, w.Body)
		}
		opens := strings.TrimSpace(key) == testKey && !strings.ContainsAny(key, "\r\n")
		if !public && !opens {
			if w.Code != http.StatusUnauthorized || wb.read.Load() || dials.Load() != 0 {
				t.Fatalf("a request that can use no service: %d, body read %v, %d dials; want 401 before the body", w.Code, wb.read.Load(), dials.Load())
			}
		}
		if _, aerr := parseChatRequest(body); aerr != nil && dials.Load() != 0 {
			t.Fatalf("dialled for a body the gateway refuses (%v)", aerr)
		}
	})
}
