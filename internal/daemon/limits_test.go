package daemon

import (
	"bufio"
	"crypto/ed25519"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// signer adapts a ledgertest key to blob.Signer.
type signer struct{ k lt.Key }

func (s signer) PrivateKey() ed25519.PrivateKey { return s.k.Priv }

// Hundreds of clients that open a connection and send their headers a
// byte at a time hold at most the listener's cap of connections (the rest
// wait in the kernel's backlog, holding no descriptor of the node), are
// cut off by ReadHeaderTimeout, and an honest request is served after.
func TestSlowClientsCannotExhaustConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimiter(inner, 50, 4)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 300 * time.Millisecond}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	const clients = 300
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 1, byte(i/200), byte(1+i%200))}, Timeout: 10 * time.Second}
			c, err := d.Dial("tcp", inner.Addr().String())
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
	if p := l.Peak(); p > 50 || p < 10 {
		t.Errorf("peak open connections %d, want at most the cap of 50 (and the attack to reach it)", p)
	}

	// Past the per-address cap a connection is answered 429.
	var held []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	for deadline := time.Now().Add(5 * time.Second); l.Open() < 4 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	c, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("fifth connection from one address: %v, want a 429", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "limit per client address") {
		t.Errorf("fifth connection: %d %s, want 429 naming the per-address limit", resp.StatusCode, b)
	}
	for _, c := range held {
		c.Close()
	}
	resp, err = (&http.Client{Timeout: 10 * time.Second}).Get("http://" + inner.Addr().String())
	if err != nil {
		t.Fatalf("honest request after the attack: %v", err)
	}
	resp.Body.Close()
}

func TestAPIConnLimits(t *testing.T) {
	for _, tc := range []struct {
		nofile            uint64
		wantTotal, wantIP int
	}{
		{0, 1024, 128}, {1 << 20, 1024, 128}, {4096, 1024, 128}, {1024, 256, 32}, {64, 32, 8},
	} {
		total, perIP := apiConnLimits(tc.nofile)
		if total != tc.wantTotal || perIP != tc.wantIP {
			t.Errorf("apiConnLimits(%d) = %d, %d; want %d, %d", tc.nofile, total, perIP, tc.wantTotal, tc.wantIP)
		}
		if tc.nofile > 0 && uint64(2*total) > tc.nofile/2+2*minAPIConns {
			t.Errorf("nofile %d: %d connections may hold %d descriptors, more than half", tc.nofile, total, 2*total)
		}
	}
}

// A node's gateway refuses anonymous uploads and accounts the ledger holds
// nothing for, and stores a funded account's ticketed upload.
func TestNodeBlobUploadsNeedAccount(t *testing.T) {
	d := startNode(t)
	var ge *blob.GatewayError
	_, _, err := blob.NewClient(d.APIURL).Put(t.Context(), strings.NewReader("anonymous"))
	if !errors.As(err, &ge) || ge.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous upload: %v, want 401", err)
	}
	c := blob.NewClient(d.APIURL)
	c.Signer = signer{lt.NewKey("nobody")}
	_, _, err = c.Put(t.Context(), strings.NewReader("unfunded"))
	if !errors.As(err, &ge) || ge.StatusCode != http.StatusForbidden || !strings.Contains(ge.Message, "funded accounts") {
		t.Errorf("unfunded account: %v, want 403", err)
	}
	c.Signer = signer{alice}
	if _, _, err := c.Put(t.Context(), strings.NewReader("alice's")); err != nil {
		t.Errorf("alice's upload: %v", err)
	}
}

// The sweeper keeps every blob a running job names: module, inputs, each
// replica's outputs and log.
func TestJobBlobs(t *testing.T) {
	name := func(s string) string { return blob.Sum([]byte(s)).String() }
	j := &ledger.Job{State: ledger.JobRunning, Spec: ledger.JobSpec{Module: name("module")}, InputBlob: name("input"), Assignments: []ledger.Assignment{
		{Result: &ledger.JobResult{OutputBlob: name("out1"), LogBlob: name("log1")}},
		{},
		{Result: &ledger.JobResult{OutputBlob: name("out2")}},
	}}
	plan, err := planRetention(func(fn func(*ledger.Job) bool) error { fn(j); return nil }, func(blob.Hash) (time.Time, bool) { return time.Time{}, false }, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"module", "input", "out1", "log1", "out2"} {
		if h, _ := blob.ParseHash(name(s)); !plan.keep[h] {
			t.Errorf("blob %q not kept: %v", s, plan.keep)
		}
	}
	if len(plan.keep) != 5 || len(plan.expired) != 0 {
		t.Errorf("kept %d blobs, expired %d, want 5 and 0", len(plan.keep), len(plan.expired))
	}
}
