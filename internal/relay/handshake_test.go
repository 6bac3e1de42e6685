package relay

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// evilNode is a node that collects the handshakes agents send it: it
// hands out nonces it got from the honest node, replays every handshake
// it receives there, and refuses the agent with whatever identity headers
// refuse sets.
type evilNode struct {
	srv    *httptest.Server
	honest *node
	// answer edits the nonce answer before it goes out.
	answer func(*NonceAnswer)
	// refuse sets the headers of the 403 the agent gets.
	refuse func(http.Header)

	mu       sync.Mutex
	nonces   int
	captured []http.Header
	replays  []int      // the honest node's status for each replay
	held     []net.Conn // sessions taken at the honest node
}

func startEvil(t *testing.T, honest *node) *evilNode {
	e := &evilNode{honest: honest}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(func() {
		e.srv.Close()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, c := range e.held {
			c.Close()
		}
	})
	return e
}

func (e *evilNode) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case NoncePath:
		// The honest node's nonce, so that a handshake over it would pass
		// there if the agent signed for the honest node.
		resp, err := http.Post(e.honest.url+NoncePath, "", nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var ans NonceAnswer
		json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		ans.Node, ans.Chain = e.srv.URL, testChain
		if e.answer != nil {
			e.answer(&ans)
		}
		e.mu.Lock()
		e.nonces++
		e.mu.Unlock()
		json.NewEncoder(w).Encode(ans)
	case AgentPath:
		hdr := r.Header.Clone()
		c, resp, _ := dialUpgrade(r.Context(), e.honest.url+AgentPath, ProtoAgent, hdr, time.Second)
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		e.mu.Lock()
		if c != nil {
			// Held, as an attacker holding the session would.
			e.held = append(e.held, c)
		}
		e.captured = append(e.captured, hdr)
		e.replays = append(e.replays, status)
		e.mu.Unlock()
		if e.refuse != nil {
			e.refuse(w.Header())
		}
		writeError(w, "forbidden", "bad signature")
	default:
		http.NotFound(w, r)
	}
}

func (e *evilNode) stats() (nonces int, captured []http.Header, replays []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nonces, append([]http.Header(nil), e.captured...), append([]int(nil), e.replays...)
}

// TestSignatureWorthNothingElsewhere is the attack of issue 27: a node a
// provider connects to collects its handshake and replays it at another
// node, to take the provider's session there and receive every client
// connection to its replicas. The handshake is bound to the node it is
// for, so the replay is refused, and a refusal naming another node or
// chain never makes the agent sign for them.
func TestSignatureWorthNothingElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name         string
		relay, chain string // the refusal's identity headers; "honest": the honest node's URL
	}{
		{"plain refusal", "", ""},
		{"refusal naming the honest node", "honest", testChain},
		{"refusal naming another chain", "honest", "evil-chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDir()
			honest := startNode(t, d, nil)
			p := newProvider(1, nil)
			d.providers[p.addr] = true
			evil := startEvil(t, honest)
			evil.refuse = func(h http.Header) {
				// What the agent signed again for before issue 27.
				if tc.relay == "honest" {
					h.Set("X-Gpunet-Relay", honest.url)
				}
				if tc.chain != "" {
					h.Set("X-Gpunet-Chain", tc.chain)
				}
			}
			p.run(t, evil.srv.URL)
			waitFor(t, 10*time.Second, func() bool { n, _, _ := evil.stats(); return n >= 2 })
			nonces, captured, replays := evil.stats()
			if len(captured) == 0 {
				t.Fatal("the agent never sent its handshake to the node it is configured with")
			}
			if len(captured) > nonces {
				t.Errorf("%d handshakes for %d nonces: the agent signed again after a refusal", len(captured), nonces)
			}
			for i, hdr := range captured {
				if replays[i] != http.StatusForbidden {
					t.Errorf("replay %d at the honest node: %d, want 403", i, replays[i])
				}
				a, err := parseAgentHello(hdr)
				if err != nil {
					t.Fatalf("handshake %d: %v", i, err)
				}
				if !a.verify(testChain, evil.srv.URL) {
					t.Errorf("handshake %d is not for the node the agent dialled", i)
				}
				for _, other := range []struct{ chain, url string }{{testChain, honest.url}, {"evil-chain", honest.url}, {"evil-chain", evil.srv.URL}} {
					if a.verify(other.chain, other.url) {
						t.Errorf("handshake %d is signed for %s on %s", i, other.url, other.chain)
					}
				}
			}
			if honest.hub.Connected(p.addr) {
				t.Error("the collected handshake took the provider's session at the honest node")
			}
		})
	}
}

// TestNoSignatureForAnotherIdentity: a node whose nonce answer names
// another node or chain gets no signature at all.
func TestNoSignatureForAnotherIdentity(t *testing.T) {
	d := newDir()
	honest := startNode(t, d, nil)
	p := newProvider(1, nil)
	d.providers[p.addr] = true
	for _, tc := range []struct {
		name   string
		answer func(*NonceAnswer)
	}{
		{"the honest node's URL", func(a *NonceAnswer) { a.Node = honest.url }},
		{"another chain", func(a *NonceAnswer) { a.Chain = "evil-chain" }},
		{"no identity", func(a *NonceAnswer) { a.Node, a.Chain = "", "" }},
		{"a bad nonce", func(a *NonceAnswer) { a.Nonce = "00" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evil := startEvil(t, honest)
			evil.answer = tc.answer
			ag := NewAgent(AgentOptions{Nodes: []string{evil.srv.URL}, Key: p.key, Dial: p.dial, ChainID: testChain})
			for range 2 {
				if c, err := ag.connect(t.Context(), evil.srv.URL); err == nil {
					c.Close()
					t.Fatal("connected")
				}
			}
			if nonces, captured, _ := evil.stats(); nonces != 2 || len(captured) != 0 {
				t.Errorf("%d nonces asked, %d handshakes sent; want 2 and none", nonces, len(captured))
			}
		})
	}
	// An honest node the agent knows by another of its URLs: the agent
	// says so, and signs nothing.
	other := strings.Replace(honest.url, "127.0.0.1", "localhost", 1)
	ag := NewAgent(AgentOptions{Nodes: []string{other}, Key: p.key, Dial: p.dial, ChainID: testChain})
	_, err := ag.connect(t.Context(), other)
	if err == nil || !strings.Contains(err.Error(), honest.url) {
		t.Errorf("connect by another URL = %v, want an error naming the node's advertised URL", err)
	}
}

// TestAgentNeedsChain: an agent knows its chain; it never learns it from
// a node.
func TestAgentNeedsChain(t *testing.T) {
	p := newProvider(1, nil)
	for _, tc := range []struct {
		name  string
		o     AgentOptions
		wants string
	}{
		{"no chain", AgentOptions{Nodes: []string{"http://n:1"}, Key: p.key, Dial: p.dial}, "chain ID"},
		{"chain with a newline", AgentOptions{Nodes: []string{"http://n:1"}, Key: p.key, Dial: p.dial, ChainID: "a\nb"}, "chain ID"},
		{"bad node", AgentOptions{Nodes: []string{"n:1"}, Key: p.key, Dial: p.dial, ChainID: testChain}, "node URL"},
	} {
		err := NewAgent(tc.o).Run(t.Context())
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("%s: Run = %v, want an error about the %s", tc.name, err, tc.wants)
		}
	}
}

// TestNonceOnce: a nonce is good for one handshake, within its lifetime.
func TestNonceOnce(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	d := newDir()
	a := startNode(t, d, func(o *HubOptions) { o.Clock = clock; o.NonceTTL = 30 * time.Second })
	p := newProvider(1, nil)
	d.providers[p.addr] = true

	good := hello(t, a, p.key)
	c, _, err := dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, good, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The same handshake again, as a node that saw it would replay it.
	_, resp, err := dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, good, time.Second)
	if resp == nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(err.Error(), "used already") {
		t.Errorf("replayed handshake: %v, want 403 (used already)", err)
	}
	// A nonce past its lifetime.
	late := hello(t, a, p.key)
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	_, resp, err = dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, late, time.Second)
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("expired nonce: %v, want 403", err)
	}
	if n := a.hub.nonces.len(); n != 0 {
		t.Errorf("%d nonces held after use and expiry, want 0", n)
	}
}

// TestNonceBounds: what an anonymous client can make a node hold.
func TestNonceBounds(t *testing.T) {
	t.Run("per client", func(t *testing.T) {
		d := newDir()
		a := startNode(t, d, func(o *HubOptions) { o.MaxNoncesPerClient = 2 })
		for i := range 3 {
			resp, err := http.Post(a.url+NoncePath, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if want := map[bool]int{true: 200, false: 429}[i < 2]; resp.StatusCode != want {
				t.Errorf("nonce %d: %d, want %d", i, resp.StatusCode, want)
			}
			if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		}
	})
	t.Run("a used nonce frees its slot", func(t *testing.T) {
		d := newDir()
		a := startNode(t, d, func(o *HubOptions) { o.MaxNoncesPerClient = 1 })
		p := newProvider(1, nil)
		d.providers[p.addr] = true
		c, _, err := dialUpgrade(t.Context(), a.url+AgentPath, ProtoAgent, hello(t, a, p.key), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		nonceFrom(t, a.url)
	})
	t.Run("in all", func(t *testing.T) {
		now := time.Unix(1000, 0)
		b := newNonceBook(3, 2, 10*time.Second)
		var got [][NonceSize]byte
		for i := range 5 {
			client := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 32)
			n, err := b.issue(client, now)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
			if b.len() > 3 {
				t.Fatalf("%d nonces held, want at most 3", b.len())
			}
		}
		if b.take(got[0][:], now) || b.take(got[1][:], now) {
			t.Error("the oldest nonces outlived the bound")
		}
		if !b.take(got[4][:], now) || b.take(got[4][:], now) {
			t.Error("the newest nonce is not good exactly once")
		}
		if b.take(got[3][:], now.Add(10*time.Second)) {
			t.Error("an expired nonce was taken")
		}
		if b.len() != 0 {
			t.Errorf("%d nonces held after expiry, want 0", b.len())
		}
	})
	t.Run("IPv6 per /64", func(t *testing.T) {
		b := newNonceBook(100, 2, time.Minute)
		now := time.Now()
		for i, addr := range []string{"[2001:db8::1]:1", "[2001:db8::2]:2", "[2001:db8::3]:3"} {
			_, err := b.issue(clientPrefix(addr), now)
			if (err == nil) != (i < 2) {
				t.Errorf("nonce %d from one /64: %v", i, err)
			}
		}
		if _, err := b.issue(clientPrefix("[2001:db8:0:1::1]:1"), now); err != nil {
			t.Errorf("another /64: %v", err)
		}
	})
}

func TestNodeURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://n:1", "http://n:1"},
		{"https://n.example/gpunet/", "https://n.example/gpunet"},
		{" http://n:1// ", "http://n:1"},
		{"n:1", ""},
		{"ftp://n", ""},
		{"http://", ""},
		{"http://u:p@n", ""},
		{"http://n/?q", ""},
		{"http://n/#f", ""},
		{"http://n/\na", ""},
		{"http://" + strings.Repeat("n", 300), ""},
	} {
		got, err := NodeURL(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("NodeURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzAgentHello: the node's reading of an agent's handshake headers.
func FuzzAgentHello(f *testing.F) {
	p := newProvider(1, nil)
	nonce := make([]byte, NonceSize)
	h := signed(p.key, testChain, "http://n:1", nonce)
	f.Add(h.Get(HeaderProvider), h.Get(HeaderPubkey), h.Get(HeaderNonce), h.Get(HeaderSignature))
	f.Add(h.Get(HeaderProvider), strings.ToUpper(h.Get(HeaderPubkey)), h.Get(HeaderNonce)+"0", h.Get(HeaderSignature)[2:])
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, provider, pubkey, nonce, sig string) {
		a, err := parseAgentHello(http.Header{HeaderProvider: {provider}, HeaderPubkey: {pubkey}, HeaderNonce: {nonce}, HeaderSignature: {sig}})
		if err != nil {
			return
		}
		if len(a.pub) != ed25519.PublicKeySize || len(a.nonce) != NonceSize || len(a.sig) != ed25519.SignatureSize {
			t.Fatalf("accepted lengths %d, %d, %d", len(a.pub), len(a.nonce), len(a.sig))
		}
		if address.FromPubKey(a.pub) != a.provider || a.provider.String() != provider {
			t.Fatalf("accepted %s with the key of %s", provider, address.FromPubKey(a.pub))
		}
		if !strings.EqualFold(hex.EncodeToString(a.nonce), nonce) || !strings.EqualFold(hex.EncodeToString(a.sig), sig) {
			t.Fatal("decoded fields do not round-trip")
		}
		a.verify(testChain, "http://n:1")
	})
}

// FuzzNonceAnswer: the agent's reading of a node's nonce answer.
func FuzzNonceAnswer(f *testing.F) {
	good, _ := json.Marshal(NonceAnswer{Nonce: strings.Repeat("ab", NonceSize), Node: "http://n:1", Chain: testChain, ExpiresIn: 30})
	f.Add(good)
	f.Add([]byte(`{"nonce":"00"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		a, nonce, err := parseNonceAnswer(body)
		if err != nil {
			return
		}
		if len(nonce) != NonceSize || !strings.EqualFold(hex.EncodeToString(nonce), a.Nonce) {
			t.Fatalf("accepted nonce %q as %x", a.Nonce, nonce)
		}
	})
}

// FuzzStreamHeader: the agent's reading of a stream's first line.
func FuzzStreamHeader(f *testing.F) {
	f.Add(`{"service":7,"port":8000}`)
	f.Add(`{"service":7,"port":0}`)
	f.Add(`{"service":7,"port":8000} {}`)
	f.Add(`{"service":7,"port":8000,"x":1}`)
	f.Fuzz(func(t *testing.T, line string) {
		h, err := parseStreamHeader(line)
		if err != nil {
			return
		}
		if h.Port == 0 || h.Port > 65535 {
			t.Fatalf("accepted port %d", h.Port)
		}
		b, _ := json.Marshal(h)
		if h2, err := parseStreamHeader(string(b)); err != nil || h2 != h {
			t.Fatalf("%s does not read back: %v", b, err)
		}
	})
}
