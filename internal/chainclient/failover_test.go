package chainclient_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

// node is one node's API in front of the shared in-memory chain: it counts
// the requests it served, can answer 503 as a node that is up but cannot
// serve, and goes away for good with stop.
type node struct {
	srv  *httptest.Server
	hits atomic.Int64
	down atomic.Bool // answer 503
}

func newNode(t *testing.T, api string) *node {
	n := &node{}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.hits.Add(1)
		if n.down.Load() {
			http.Error(w, `{"code":"unavailable","message":"node halted"}`, http.StatusServiceUnavailable)
			return
		}
		proxy(w, r, api)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// stop closes the node's listener and its connections: later requests are
// refused.
func (n *node) stop() {
	n.srv.CloseClientConnections()
	n.srv.Close()
}

// TestFailoverMovesOnAndSticks: a client of three nodes uses the first
// until it goes away, then the next that answers, and stays with it;
// a node answering 503 is passed over as well; with every node gone the
// error is ErrUnreachable naming them all. Txs sent across the switch land
// once each.
func TestFailoverMovesOnAndSticks(t *testing.T) {
	_, _, srv := newChain(t)
	a, b, c := newNode(t, srv.URL), newNode(t, srv.URL), newNode(t, srv.URL)
	cl := chainclient.New(a.srv.URL + ", " + b.srv.URL + "," + c.srv.URL)
	ctx := t.Context()
	if got := cl.Bases(); len(got) != 3 || got[1] != b.srv.URL {
		t.Fatalf("Bases = %v, want the three URLs in order", got)
	}
	before, err := cl.Balance(ctx, bob.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SendMsg(ctx, signer(alice), 0, &ledger.MsgSend{To: bob.Addr, Amount: 1}); err != nil {
		t.Fatal(err)
	}
	if a.hits.Load() == 0 || b.hits.Load() != 0 || cl.Base() != a.srv.URL {
		t.Fatalf("hits a=%d b=%d, current %s: want everything on a", a.hits.Load(), b.hits.Load(), cl.Base())
	}

	// a goes away: the next call moves to b and stays there.
	a.stop()
	if _, err := cl.SendMsg(ctx, signer(alice), 0, &ledger.MsgSend{To: bob.Addr, Amount: 1}); err != nil {
		t.Fatalf("SendMsg with a gone: %v", err)
	}
	if cl.Base() != b.srv.URL {
		t.Errorf("current %s after a went away, want b %s", cl.Base(), b.srv.URL)
	}
	hb := b.hits.Load()
	if _, err := cl.Status(ctx); err != nil || b.hits.Load() != hb+1 || c.hits.Load() != 0 {
		t.Errorf("Status = %v; hits b %d→%d, c %d: want b to serve it alone", err, hb, b.hits.Load(), c.hits.Load())
	}

	// b answers 503 (a halted node): c serves, and is kept.
	b.down.Store(true)
	if _, err := cl.Status(ctx); err != nil || cl.Base() != c.srv.URL {
		t.Errorf("Status with b answering 503 = %v, current %s; want c", err, cl.Base())
	}
	if got, err := cl.Balance(ctx, bob.Addr); err != nil || got.Balance != before.Balance+2 {
		t.Errorf("bob's balance %+v, %v; want %d (each transfer once)", got, err, before.Balance+2)
	}

	// All gone.
	b.stop()
	c.stop()
	_, err = cl.Status(ctx)
	if !errors.Is(err, chainclient.ErrUnreachable) {
		t.Fatalf("Status with every node gone: %v, want ErrUnreachable", err)
	}
	for _, n := range []*node{a, b, c} {
		if !strings.Contains(err.Error(), n.srv.URL) {
			t.Errorf("error %q does not name %s", err, n.srv.URL)
		}
	}
}

// TestFailoverDoesNotRepeatAPostThatWasSent: a POST whose connection broke
// after it was sent (the node may have acted on it) comes back as an
// error, not repeated on the next node; the next request goes there.
func TestFailoverDoesNotRepeatAPostThatWasSent(t *testing.T) {
	var posts atomic.Int64
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close() // a reset after the request arrived
		}
	}))
	defer broken.Close()
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		w.Write([]byte(`{"tx_hash":"AB","height":3}`))
	}))
	defer good.Close()
	cl := chainclient.New(broken.URL + "," + good.URL)
	if _, err := cl.BroadcastTx(t.Context(), []byte("tx"), true); !errors.Is(err, chainclient.ErrUnreachable) {
		t.Errorf("a POST whose connection broke: %v, want ErrUnreachable", err)
	}
	if posts.Load() != 0 {
		t.Errorf("the POST was repeated on the second node")
	}
	if res, err := cl.BroadcastTx(t.Context(), []byte("tx"), true); err != nil || res.Height != 3 || cl.Base() != good.URL {
		t.Errorf("the next POST = %+v, %v via %s; want it on the second node", res, err, cl.Base())
	}
}

// TestBlobClientFollowsTheChainClient: a blob client built on the chain
// client's transport uploads and downloads through the node the chain
// client uses, and moves with it when that node goes away.
func TestBlobClientFollowsTheChainClient(t *testing.T) {
	stores := [2]map[string][]byte{{}, {}}
	var servers [2]*httptest.Server
	for i := range servers {
		servers[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodPut && r.URL.Path == "/v1/blobs":
				b, _ := io.ReadAll(r.Body)
				h := blob.Sum(b)
				stores[i][h.String()] = b
				w.WriteHeader(http.StatusCreated)
				w.Write([]byte(`{"hash":"` + h.String() + `","size":` + strconv.Itoa(len(b)) + `}`))
			case r.Method == http.MethodGet:
				b, ok := stores[i][strings.TrimPrefix(r.URL.Path, "/v1/blobs/")]
				if !ok {
					http.NotFound(w, r)
					return
				}
				w.Write(b)
			}
		}))
		defer servers[i].Close()
	}
	cl := chainclient.New(servers[0].URL + "," + servers[1].URL)
	bc := blob.NewClient(cl.Base())
	bc.HTTPClient = &http.Client{Transport: cl.Transport()}

	h, _, err := bc.Put(t.Context(), strings.NewReader("sealed bytes"))
	if err != nil || len(stores[0]) != 1 {
		t.Fatalf("Put = %v; stores %d, %d: want it on the first node", err, len(stores[0]), len(stores[1]))
	}
	servers[0].CloseClientConnections()
	servers[0].Close()
	// The download's node has gone: the next one is asked (it lacks the
	// blob until a gateway fetches it across nodes).
	var buf bytes.Buffer
	if _, err := bc.Get(t.Context(), h, &buf); err == nil {
		t.Errorf("Get from the second node found a blob only the first had")
	}
	if cl.Base() != servers[1].URL {
		t.Errorf("chain client on %s after the blob client moved, want %s", cl.Base(), servers[1].URL)
	}
	if h2, _, err := bc.PutFile(t.Context(), writeTemp(t, "again")); err != nil || stores[1][h2.String()] == nil {
		t.Errorf("PutFile after the move = %v, want it stored on the second node", err)
	}
}

func writeTemp(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBlobPutFileMovesWhenTheNodeDiesMidUpload: a node whose connection
// breaks while a file is being uploaded (it read part of the body, then
// died: a CI run's netns test, where a killed node failed a provider's
// output upload and with it the job) makes the upload go again, from the
// file's start, to the next node, which stores the whole file.
func TestBlobPutFileMovesWhenTheNodeDiesMidUpload(t *testing.T) {
	dying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadFull(r.Body, make([]byte, 1000))
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0) // a reset, as a killed process's
			conn.Close()
		}
	}))
	defer dying.Close()
	var stored []byte
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		stored = b
		h := blob.Sum(b)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"hash":"` + h.String() + `","size":` + strconv.Itoa(len(b)) + `}`))
	}))
	defer good.Close()
	cl := chainclient.New(dying.URL + "," + good.URL)
	bc := blob.NewClient(cl.Base())
	bc.HTTPClient = &http.Client{Transport: cl.Transport()}
	content := strings.Repeat("outputs of a long job ", 1<<14) // 352 KiB
	h, n, err := bc.PutFile(t.Context(), writeTemp(t, content))
	if err != nil {
		t.Fatalf("PutFile with the first node dying mid-upload: %v", err)
	}
	if string(stored) != content || h != blob.Sum([]byte(content)) || n != int64(len(content)) {
		t.Errorf("stored %d bytes as %s (%d), want the whole file, %s", len(stored), h, n, blob.Sum([]byte(content)))
	}
	if cl.Base() != good.URL {
		t.Errorf("the chain client is on %s, want the node that took the upload", cl.Base())
	}
}
