package relay

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// echo is a backend that answers with what it received.
type echoed struct {
	Method string      `json:"method"`
	URI    string      `json:"uri"`
	Header http.Header `json:"header"`
	Body   string      `json:"body"`
	Host   string      `json:"host"`
}

func echoBackend(t testing.TB) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(echoed{r.Method, r.RequestURI, r.Header, string(b), r.Host})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func do(t testing.TB, method, url, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func decodeEcho(t testing.TB, b []byte) echoed {
	t.Helper()
	var e echoed
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not an echo: %s", b)
	}
	return e
}

// setup is one node A with p's agent connected and service 1 on p.
func setup(t *testing.T, edit func(*HubOptions)) (*dir, *node, *provider, *httptest.Server) {
	t.Helper()
	backend := echoBackend(t)
	d := newDir()
	a := startNode(t, d, edit)
	p := newProvider(1, map[uint64]string{8000: hostOf(backend.URL)})
	d.providers[p.addr] = true
	d.put(service(1, a.url, p))
	p.run(t, a.url)
	waitConnected(t, a.hub, p.addr)
	waitFor(t, 5*time.Second, func() bool { return p.agent.Relay() == a.url })
	return d, a, p, backend
}

func TestServiceHTTP(t *testing.T) {
	_, a, _, _ := setup(t, nil)
	resp, b := do(t, "GET", a.url+"/svc/1/8000/hello/w%2Fx?q=1", "", map[string]string{HeaderKey: testKey})
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %d %s", resp.StatusCode, b)
	}
	e := decodeEcho(t, b)
	if e.URI != "/hello/w%2Fx?q=1" {
		t.Errorf("backend URI = %q, want /hello/w%%2Fx?q=1", e.URI)
	}
	for k, want := range map[string]string{
		"X-Forwarded-Prefix": "/svc/1/8000",
		"X-Forwarded-Host":   hostOf(a.url),
		"X-Forwarded-Proto":  "http",
		"X-Forwarded-For":    "127.0.0.1",
	} {
		if got := e.Header.Get(k); got != want {
			t.Errorf("backend %s = %q, want %q", k, got, want)
		}
	}
	if got := e.Header.Get(HeaderKey); got != "" {
		t.Errorf("backend saw %s = %q", HeaderKey, got)
	}

	resp, b = do(t, "POST", a.url+"/svc/1/8000", "a body", map[string]string{HeaderKey: testKey})
	if resp.StatusCode != 200 {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	if e := decodeEcho(t, b); e.Method != "POST" || e.Body != "a body" || e.URI != "/" {
		t.Errorf("backend got %s %s %q, want POST / \"a body\"", e.Method, e.URI, e.Body)
	}
}

// TestServiceSSE: the second event is only sent after the client has read
// the first, so the test passes only if each chunk is flushed through.
func TestServiceSSE(t *testing.T) {
	next := make(chan struct{})
	sse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(5 * time.Second):
				return
			}
		}
	}))
	defer sse.Close()
	d, a, p, _ := setup(t, nil)
	p.ports[8001] = hostOf(sse.URL)
	s := service(2, a.url, p)
	s.Spec.Ports = append(s.Spec.Ports, ledger.ServicePort{Port: 8001, Protocol: ledger.PortHTTP})
	d.put(s)

	req, _ := http.NewRequest("GET", a.url+"/svc/2/8001/events", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if want := fmt.Sprintf("data: %d\n", i); line != want {
			t.Fatalf("event %d = %q, want %q", i, line, want)
		}
		br.ReadString('\n')
		next <- struct{}{}
	}
}

func TestTwoHubs(t *testing.T) {
	backend := echoBackend(t)
	d := newDir()
	a := startNode(t, d, nil)
	b := startNode(t, d, func(o *HubOptions) { o.IsPeer = func(u string) bool { return u == a.url } })
	p := newProvider(1, map[uint64]string{8000: hostOf(backend.URL)})
	d.providers[p.addr] = true
	d.put(service(1, a.url, p))
	p.run(t, a.url)
	waitConnected(t, a.hub, p.addr)
	if b.hub.Connected(p.addr) {
		t.Fatal("B holds a session it was never given")
	}
	for i := range 3 {
		resp, body := do(t, "POST", b.url+"/svc/1/8000/x", "via b "+strconv.Itoa(i), map[string]string{HeaderKey: testKey})
		if resp.StatusCode != 200 {
			t.Fatalf("at B: %d %s", resp.StatusCode, body)
		}
		if e := decodeEcho(t, body); e.Body != "via b "+strconv.Itoa(i) || e.Header.Get(HeaderHop) != "" {
			t.Errorf("backend got %+v", e)
		}
	}
	if a.tunnels.Load() == 0 {
		t.Error("B did not go through A's tunnel")
	}

	// A request already forwarded once is never forwarded again.
	resp, body := do(t, "GET", b.url+"/svc/1/8000/x", "", map[string]string{HeaderKey: testKey, HeaderHop: "1"})
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("hop request at B: %d %s, want 503", resp.StatusCode, body)
	}
	// A tunnel request without the key is refused by A itself.
	c, err := b.hub.dialTunnel(t.Context(), a.url, 1, p.addr, 8000, "")
	var ue *UpgradeError
	if !errors.As(err, &ue) || ue.Status != http.StatusUnauthorized {
		t.Errorf("tunnel without a key: %v, %v; want 401", c, err)
	}
	// A tunnel request without X-Gpunet-Hop is not a node's.
	_, _, err = dialUpgrade(t.Context(), a.url+TunnelPath+"?service=1&port=8000&provider="+p.addr.String(), ProtoTCP, nil, time.Second)
	if !errors.As(err, &ue) || ue.Status != http.StatusForbidden {
		t.Errorf("tunnel without hop: %v; want 403", err)
	}
}

// TestNonPeerNeverDialled: a replica whose relay is not in the peer book
// (nor this node) is unreachable, and nothing is dialled.
func TestNonPeerNeverDialled(t *testing.T) {
	d := newDir()
	a := startNode(t, d, nil)
	b := startNode(t, d, func(o *HubOptions) { o.IsPeer = func(string) bool { return false } })
	p := newProvider(1, nil)
	d.providers[p.addr] = true
	d.put(service(1, a.url, p))
	resp, body := do(t, "GET", b.url+"/svc/1/8000/", "", map[string]string{HeaderKey: testKey})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("non-peer relay: %d %s, want 503 with Retry-After", resp.StatusCode, body)
	}
	if _, err := b.hub.DialReplica(t.Context(), service(1, a.url, p), p.addr, 8000, testKey); !errors.Is(err, ErrNoRoute) {
		t.Errorf("DialReplica = %v, want ErrNoRoute", err)
	}
	// Nor is a relay that names the node itself.
	if _, err := a.hub.DialReplica(t.Context(), service(1, a.url+"/", p), p.addr, 8000, testKey); !errors.Is(err, ErrNoRoute) {
		t.Errorf("DialReplica via self = %v, want ErrNoRoute", err)
	}
	if n := a.tunnels.Load(); n != 0 {
		t.Errorf("A's tunnel was asked %d times", n)
	}
}

// TestTCPUpgradeTLS: a client reaches a backend that terminates TLS
// through two nodes and verifies its certificate: the relay carries the
// ciphertext and cannot read or change it.
func TestTCPUpgradeTLS(t *testing.T) {
	tlsBackend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "secret over tls %s", r.URL.Path)
	}))
	defer tlsBackend.Close()
	d := newDir()
	a := startNode(t, d, nil)
	b := startNode(t, d, func(o *HubOptions) { o.IsPeer = func(u string) bool { return u == a.url } })
	p := newProvider(1, map[uint64]string{9000: hostOf(tlsBackend.URL)})
	d.providers[p.addr] = true
	d.put(service(1, a.url, p))
	p.run(t, a.url)
	waitConnected(t, a.hub, p.addr)

	pool := x509.NewCertPool()
	pool.AddCert(tlsBackend.Certificate())
	for _, n := range []*node{a, b} {
		raw, err := DialTCP(t.Context(), n.url, 1, 9000, testKey)
		if err != nil {
			t.Fatalf("DialTCP at %s: %v", n.url, err)
		}
		tc := tls.Client(raw, &tls.Config{RootCAs: pool, ServerName: "example.com"})
		tr := &http.Transport{DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return tc, nil }}
		resp, err := (&http.Client{Transport: tr}).Get("https://example.com/e2e")
		if err != nil {
			t.Fatalf("TLS through %s: %v", n.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if string(body) != "secret over tls /e2e" {
			t.Errorf("through %s: %q", n.url, body)
		}
		if len(resp.TLS.PeerCertificates) == 0 || !resp.TLS.PeerCertificates[0].Equal(tlsBackend.Certificate()) {
			t.Error("the TLS peer is not the backend")
		}
	}
	// A wrong key is refused before any byte reaches the replica.
	before := p.dials.Load()
	_, err := DialTCP(t.Context(), b.url, 1, 9000, "sk-gpunet-wrong")
	var ue *UpgradeError
	if !errors.As(err, &ue) || ue.Status != http.StatusUnauthorized {
		t.Errorf("DialTCP with a wrong key: %v, want 401", err)
	}
	if p.dials.Load() != before {
		t.Error("the replica was dialled for a refused client")
	}
	// HTTP to a tcp port is refused: it needs the tunnel.
	resp, body := do(t, "GET", a.url+"/svc/1/9000/", "", map[string]string{HeaderKey: testKey})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("HTTP to the tcp port: %d %s, want 400", resp.StatusCode, body)
	}
}

func TestAuth(t *testing.T) {
	d, a, p, _ := setup(t, nil)
	check := func(name string, hdr map[string]string, wantStatus int) echoed {
		t.Helper()
		resp, b := do(t, "GET", a.url+"/svc/1/8000/x", "", hdr)
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s: %d %s, want %d", name, resp.StatusCode, b, wantStatus)
		}
		if wantStatus != 200 {
			var eb apiwire.ErrorBody
			if err := json.Unmarshal(b, &eb); err != nil || eb.Code != apiwire.CodeUnauthorized {
				t.Errorf("%s: body %s, want code %s", name, b, apiwire.CodeUnauthorized)
			}
			return echoed{}
		}
		return decodeEcho(t, b)
	}
	check("no key", nil, 401)
	check("wrong key", map[string]string{HeaderKey: "sk-gpunet-nope"}, 401)
	check("wrong bearer", map[string]string{"Authorization": "Bearer sk-gpunet-nope"}, 401)
	e := check("bearer", map[string]string{"Authorization": "Bearer " + testKey}, 200)
	if got := e.Header.Get("Authorization"); got != "" {
		t.Errorf("backend saw Authorization %q", got)
	}
	e = check("key header, service's own bearer", map[string]string{HeaderKey: testKey, "Authorization": "Bearer its-own"}, 200)
	if e.Header.Get(HeaderKey) != "" || e.Header.Get("Authorization") != "Bearer its-own" {
		t.Errorf("backend headers %v: want no %s and the service's own Authorization", e.Header, HeaderKey)
	}

	s := service(1, a.url, p)
	s.Public = true
	d.put(s)
	check("public, no key", nil, 200)
	e = check("public, own bearer", map[string]string{"Authorization": "Bearer its-own"}, 200)
	if e.Header.Get("Authorization") != "Bearer its-own" {
		t.Errorf("public service lost its own Authorization: %v", e.Header)
	}
	e = check("public, a gpunet key", map[string]string{"Authorization": "Bearer sk-gpunet-other"}, 200)
	if e.Header.Get("Authorization") != "" {
		t.Errorf("a gpunet key reached the backend: %v", e.Header)
	}
}

func TestServiceErrors(t *testing.T) {
	d, a, p, _ := setup(t, nil)
	stopped := service(3, a.url, p)
	stopped.State = ledger.ServiceStopped
	d.put(stopped)
	starting := service(4, a.url, p)
	starting.Replicas[0].ReadyAt = 0
	d.put(starting)
	key := map[string]string{HeaderKey: testKey}
	for _, tc := range []struct {
		path  string
		want  int
		retry bool
	}{
		{"/svc/9/8000/", 404, false},
		{"/svc/3/8000/", 404, false},
		{"/svc/1/8001/", 404, false},
		{"/svc/x/8000/", 404, false},
		{"/svc/1/", 404, false},
		{"/svc/1/9000/", 400, false},
		{"/svc/4/8000/", 503, true},
	} {
		resp, b := do(t, "GET", a.url+tc.path, "", key)
		if resp.StatusCode != tc.want || (resp.Header.Get("Retry-After") != "") != tc.retry {
			t.Errorf("%s: %d (Retry-After %q) %s, want %d", tc.path, resp.StatusCode, resp.Header.Get("Retry-After"), b, tc.want)
		}
		var eb apiwire.ErrorBody
		if err := json.Unmarshal(b, &eb); err != nil || apiwire.ErrorCodes[eb.Code] != tc.want {
			t.Errorf("%s: body %s is not an API error of status %d", tc.path, b, tc.want)
		}
	}
}

// TestRetryNextReplica: a replica whose agent refuses the dial is skipped
// for one that answers; the client sees no error.
func TestRetryNextReplica(t *testing.T) {
	d, a, good, backend := setup(t, nil)
	bad := newProvider(2, map[uint64]string{}) // dials nothing
	d.providers[bad.addr] = true
	bad.run(t, a.url)
	waitConnected(t, a.hub, bad.addr)
	d.put(service(1, a.url, bad, good))
	_ = backend
	for i := range 6 {
		resp, b := do(t, "POST", a.url+"/svc/1/8000/", "body "+strconv.Itoa(i), map[string]string{HeaderKey: testKey})
		if resp.StatusCode != 200 || decodeEcho(t, b).Body != "body "+strconv.Itoa(i) {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if bad.dials.Load() == 0 {
		t.Error("the refusing replica was never tried")
	}
	// With only the bad one, the client gets a 503.
	d.put(service(1, a.url, bad))
	resp, b := do(t, "GET", a.url+"/svc/1/8000/", "", map[string]string{HeaderKey: testKey})
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("only a refusing replica: %d %s, want 503", resp.StatusCode, b)
	}
}

// nonceFrom gets a handshake nonce from the node at url.
func nonceFrom(t testing.TB, url string) []byte {
	t.Helper()
	resp, err := http.Post(url+NoncePath, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", NoncePath, resp.StatusCode, b)
	}
	_, nonce, err := parseNonceAnswer(b)
	if err != nil {
		t.Fatal(err)
	}
	return nonce
}

// signed builds an agent's upgrade headers: key's handshake for the node
// at self on chain over nonce.
func signed(key ed25519.PrivateKey, chain, self string, nonce []byte) http.Header {
	return http.Header{
		HeaderProvider:  {addrFromKey(key).String()},
		HeaderPubkey:    {hex.EncodeToString(key.Public().(ed25519.PublicKey))},
		HeaderNonce:     {hex.EncodeToString(nonce)},
		HeaderSignature: {hex.EncodeToString(ed25519.Sign(key, AgentSignBytes(chain, self, nonce)))},
	}
}

// hello is key's good handshake with n, over a nonce n issued.
func hello(t testing.TB, n *node, key ed25519.PrivateKey) http.Header {
	t.Helper()
	return signed(key, testChain, n.url, nonceFrom(t, n.url))
}

func TestBadHandshake(t *testing.T) {
	d := newDir()
	a := startNode(t, d, nil)
	p := newProvider(1, nil)
	d.providers[p.addr] = true
	stranger := newProvider(2, nil)
	other := newProvider(3, nil)
	forged := hello(t, a, p.key)
	forged.Set(HeaderSignature, hello(t, a, other.key).Get(HeaderSignature))
	wrongKey := hello(t, a, p.key)
	wrongKey.Set(HeaderPubkey, hex.EncodeToString(other.key.Public().(ed25519.PublicKey)))
	swapped := hello(t, a, p.key) // signed over one nonce, sent with another
	swapped.Set(HeaderNonce, hex.EncodeToString(nonceFrom(t, a.url)))
	noNonce := hello(t, a, p.key)
	noNonce.Del(HeaderNonce)
	shortNonce := hello(t, a, p.key)
	shortNonce.Set(HeaderNonce, shortNonce.Get(HeaderNonce)[:2*NonceSize-2])
	unissued := make([]byte, NonceSize)
	good := hello(t, a, p.key)
	for _, tc := range []struct {
		name string
		hdr  http.Header
		want int
	}{
		{"wrong signature", forged, 403},
		{"pubkey of another address", wrongKey, 403},
		{"signed over another nonce", swapped, 403},
		{"no nonce", noNonce, 403},
		{"short nonce", shortNonce, 403},
		{"a nonce this node never issued", signed(p.key, testChain, a.url, unissued), 403},
		{"another node's", signed(p.key, testChain, "http://elsewhere:1", nonceFrom(t, a.url)), 403},
		{"another chain's", signed(p.key, "other-chain", a.url, nonceFrom(t, a.url)), 403},
		{"not a provider", hello(t, a, stranger.key), 403},
		{"good", good, 101},
		{"replayed", good, 403},
	} {
		c, resp, err := dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, tc.hdr, time.Second)
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		if status != tc.want {
			t.Errorf("%s: status %d (%v), want %d", tc.name, status, err, tc.want)
		}
		if c != nil {
			c.Close()
		}
	}
	if a.hub.Connected(stranger.addr) {
		t.Error("a stranger holds a session")
	}
}

// TestDownReplicaTriedLast (issue 36): a replica whose dial failed is
// tried after the others for a while, so that a dead replica costs one
// failed dial, not one per request (the ledger still lists it until its
// heartbeats are missed); requests keep succeeding through the other.
func TestDownReplicaTriedLast(t *testing.T) {
	d, a, good, _ := setup(t, nil)
	bad := newProvider(2, map[uint64]string{}) // refuses every stream
	d.providers[bad.addr] = true
	bad.run(t, a.url)
	waitConnected(t, a.hub, bad.addr)
	d.put(service(1, a.url, bad, good))
	for i := range 8 {
		resp, b := do(t, "GET", a.url+"/svc/1/8000/", "", map[string]string{HeaderKey: testKey})
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}
	if n := bad.dials.Load(); n != 1 {
		t.Errorf("the refusing replica was dialled %d times in 8 requests, want once: it should be tried last once seen down", n)
	}
}
