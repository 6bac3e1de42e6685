package receipt_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/examples/tinylm/server"
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/receipt"
)

const chain = "gpunet-test"

func key(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(name))
	return ed25519.NewKeyFromSeed(seed[:])
}

func signed(t testing.TB) *ledger.ServiceReceipt {
	k := key("prov")
	r := &ledger.ServiceReceipt{ServiceID: 7, Provider: address.FromPubKey(k.Public().(ed25519.PublicKey)),
		RequestHash: ledger.Hash{1}, ResponseHash: ledger.Hash{2}, ParamsHash: ledger.Hash{3}, PromptTokens: 4, CompletionTokens: 5, Time: 1_700_000_000_123}
	r.Sign(chain, k)
	return r
}

func TestEncodeDecode(t *testing.T) {
	r := signed(t)
	s := receipt.Encode(r)
	if len(s) != receipt.MaxEncoded {
		t.Fatalf("encoded length %d, want %d", len(s), receipt.MaxEncoded)
	}
	got, err := receipt.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Verify(chain); err != nil {
		t.Fatalf("decoded receipt does not verify: %v", err)
	}
	if receipt.Encode(got) != s {
		t.Errorf("decode then encode changed the receipt")
	}
	if err := got.Verify("other-chain"); err == nil {
		t.Errorf("a receipt verified on another chain")
	}
	// A bit changed anywhere breaks it: the form or the signature.
	b := []byte(s)
	for i := range b {
		c := b[i]
		b[i] = map[bool]byte{true: 'A', false: 'B'}[c != 'A']
		if r2, err := receipt.Decode(string(b)); err == nil && r2.Verify(chain) == nil && receipt.Encode(r2) != s {
			t.Fatalf("changing character %d gave another receipt that verifies", i)
		}
		b[i] = c
	}
	for _, bad := range []string{"", "x", s + "A", s[:len(s)-1], strings.Repeat("!", len(s))} {
		if _, err := receipt.Decode(bad); err == nil {
			t.Errorf("Decode(%.20q…) took it", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(receipt.Encode(signed(f)))
	f.Add("")
	f.Add(strings.Repeat("A", receipt.MaxEncoded))
	f.Fuzz(func(t *testing.T, s string) {
		r, err := receipt.Decode(s)
		if err != nil {
			return
		}
		if again := receipt.Encode(r); again != s {
			// base64url has one encoding per byte string without
			// padding, except in the last character's unused bits.
			r2, err := receipt.Decode(again)
			if err != nil || receipt.Encode(r2) != again {
				t.Fatalf("re-encoding is not stable: %q → %q", s, again)
			}
		}
		r.Verify(chain) // must not panic
	})
}

// TestOutputsStreamedAndWholeAlike: tinylm's answer to a request, whole
// and streamed, hashes the same; another seed hashes otherwise; the id and
// created fields do not count.
func TestOutputsStreamedAndWholeAlike(t *testing.T) {
	srv := server.New(model.Default(), server.Options{})
	ask := func(body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != 200 {
			t.Fatalf("tinylm answered %d: %s", rec.Code, rec.Body)
		}
		return rec
	}
	whole := func(seed int) ledger.Hash {
		var o receipt.Outputs
		if err := o.Add(ask(`{"model":"tinylm","messages":[{"role":"user","content":"the cat"}],"seed":` + string(rune('0'+seed)) + `,"max_tokens":12}`).Body.Bytes()); err != nil {
			t.Fatal(err)
		}
		if !o.Usage || o.CompletionTokens == 0 {
			t.Fatalf("no usage read: %+v", o)
		}
		return o.Hash()
	}
	var o receipt.Outputs
	sc := bufio.NewScanner(ask(`{"model":"tinylm","messages":[{"role":"user","content":"the cat"}],"seed":1,"max_tokens":12,"stream":true,"stream_options":{"include_usage":true}}`).Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "[DONE]" {
			if err := o.Add([]byte(d)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if h1, h1again, h2 := whole(1), whole(1), whole(2); h1 != h1again || h1 != o.Hash() || h1 == h2 {
		t.Errorf("hashes: seed 1 whole %x, again %x, streamed %x; seed 2 %x: want the first three equal, the last different", h1[:4], h1again[:4], func() []byte { h := o.Hash(); return h[:4] }(), h2[:4])
	}
}

func TestDeterministic(t *testing.T) {
	for body, want := range map[string]bool{
		`{"temperature":0}`: true, `{"seed":3}`: true, `{"temperature":0.7}`: false, `{}`: false, `{"seed":null}`: false, `nope`: false,
	} {
		if got := receipt.Deterministic([]byte(body)); got != want {
			t.Errorf("Deterministic(%s) = %v, want %v", body, got, want)
		}
	}
	if receipt.ParamsHash([]byte(`{"seed":1,"messages":[]}`)) != receipt.ParamsHash([]byte(`{"messages":[1], "seed": 1}`)) {
		t.Errorf("ParamsHash depends on the messages or the spacing")
	}
	if receipt.ParamsHash([]byte(`{"seed":1}`)) == receipt.ParamsHash([]byte(`{"seed":2}`)) {
		t.Errorf("ParamsHash ignores the seed")
	}
}

// proxied is an HTTP client whose every connection goes through a Proxy
// to tinylm.
func proxied(t *testing.T, p *receipt.Proxy) *http.Client {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: server.New(model.Default(), server.Options{})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		back, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return nil, err
		}
		a, b := net.Pipe()
		go p.Serve(b, back)
		return a, nil
	}}}
}

// TestProxySignsWhatItSends: through a Proxy, each completion (whole and
// streamed, several on one connection) comes with a receipt that verifies
// and matches the request sent and the answer received; a faulty proxy's
// answers differ from the honest one's and its receipts sign what it sent,
// so they too match what the client got.
func TestProxySignsWhatItSends(t *testing.T) {
	k := key("prov")
	prov := address.FromPubKey(k.Public().(ed25519.PublicKey))
	honest := proxied(t, &receipt.Proxy{Signer: &receipt.Signer{Key: k, ChainID: chain}, Service: 7})
	faulty := proxied(t, &receipt.Proxy{Signer: &receipt.Signer{Key: k, ChainID: chain}, Service: 7, Wrong: func() bool { return true }})
	body := []byte(`{"model":"tinylm","messages":[{"role":"user","content":"a dog"}],"seed":5,"max_tokens":10}`)
	sbody := []byte(`{"model":"tinylm","messages":[{"role":"user","content":"a dog"}],"seed":5,"max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`)
	ask := func(c *http.Client, b []byte) (ledger.Hash, *ledger.ServiceReceipt) {
		t.Helper()
		resp, err := c.Post("http://replica/v1/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var o receipt.Outputs
		if resp.Header.Get("Content-Type") == "text/event-stream" || bytes.HasPrefix(data, []byte("data:")) {
			for line := range strings.SplitSeq(string(data), "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
					o.Add([]byte(d))
				}
			}
		} else if err := o.Add(data); err != nil {
			t.Fatal(err)
		}
		enc := resp.Header.Get(receipt.Header)
		if enc == "" {
			enc = resp.Trailer.Get(receipt.Header)
		}
		r, err := receipt.Decode(enc)
		if err != nil {
			t.Fatalf("receipt %q: %v", enc, err)
		}
		if err := receipt.Check(r, chain, 7, prov, b, &o); err != nil {
			t.Fatalf("receipt does not match the exchange: %v", err)
		}
		return o.Hash(), r
	}
	h1, r1 := ask(honest, body)
	h2, _ := ask(honest, sbody)
	h3, _ := ask(honest, body) // the same connection, again
	if h1 != h2 || h1 != h3 {
		t.Errorf("honest answers differ: %x %x %x", h1[:4], h2[:4], h3[:4])
	}
	if r1.CompletionTokens == 0 || r1.ParamsHash != receipt.ParamsHash(body) {
		t.Errorf("receipt %+v: want tokens and the params hash", r1)
	}
	w1, _ := ask(faulty, body)
	w2, _ := ask(faulty, sbody)
	if w1 == h1 || w2 == h1 {
		t.Errorf("the faulty proxy answered as the honest one")
	}
	// Not a completion: passed through, no receipt.
	resp, err := honest.Get("http://replica/health")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(receipt.Header) != "" {
		t.Errorf("GET /health: %d, receipt %q", resp.StatusCode, resp.Header.Get(receipt.Header))
	}
}

// TestEquivalent: answers read from a replica's JSON are judged by
// logprob.Equivalent on exact log-probabilities: equivalent when both
// carry log-probabilities that agree before the first different token and
// rate each other's token there within the tolerance.
func TestEquivalent(t *testing.T) {
	answer := func(second string, lp1, lp2 float64, top string) *receipt.Outputs {
		var o receipt.Outputs
		err := o.Add(fmt.Appendf(nil, `{"choices":[{"index":0,"message":{"content":"a%s"},"finish_reason":"stop","logprobs":{"content":[`+
			`{"token":"a","logprob":%g,"top_logprobs":[]},{"token":%q,"logprob":%g,"top_logprobs":[%s]}]}}]}`, second, lp1, second, lp2, top))
		if err != nil {
			t.Fatal(err)
		}
		return &o
	}
	x := answer("b", -0.1, -0.50, `{"token":"b","logprob":-0.50},{"token":"c","logprob":-0.505}`)
	y := answer("c", -0.1, -0.502, `{"token":"c","logprob":-0.502},{"token":"b","logprob":-0.506}`)
	for _, tc := range []struct {
		name string
		a, b *receipt.Outputs
		tol  int64
		want bool
	}{
		{"near tie", x, y, 10_000_000, true},
		{"tolerance too tight", x, y, 1_000_000, false},
		{"just within: -0.500 against -0.505", x, y, 5_000_000, true},
		{"just out", x, y, 4_999_999, false},
		{"the same answer", x, x, 0, true},
		{"a clear lead", x, answer("d", -0.1, -0.1, `{"token":"d","logprob":-0.1}`), 10_000_000, false},
		{"the prefix rated otherwise", x, answer("c", -0.9, -0.502, `{"token":"c","logprob":-0.502},{"token":"b","logprob":-0.506}`), 10_000_000, false},
		{"no log-probabilities", x, func() *receipt.Outputs {
			var o receipt.Outputs
			o.Add([]byte(`{"choices":[{"index":0,"message":{"content":"ac"}}]}`))
			return &o
		}(), 1e9, false},
	} {
		if got := receipt.Equivalent(tc.a, tc.b, tc.tol); got != tc.want {
			t.Errorf("%s: Equivalent = %v, want %v", tc.name, got, tc.want)
		}
	}
	if x.Hash() == y.Hash() {
		t.Errorf("different texts hash alike")
	}
	// The logprobs hash binds the exact decimals read.
	if got := x.Answer().Choices[0].Tokens[1].Top[1].Logprob; got != -505_000_000 {
		t.Errorf("-0.505 read as %d, want -505000000", got)
	}
	if x.LogprobsHash() == (ledger.Hash{}) || x.LogprobsHash() == answer("b", -0.1, -0.50, `{"token":"b","logprob":-0.50},{"token":"c","logprob":-0.5050001}`).LogprobsHash() {
		t.Error("the logprobs hash is zero, or misses a change in the seventh decimal")
	}
}

// FuzzOutputs: any answer a replica sends is read within the bounds or
// refused, and hashes the same when read again.
func FuzzOutputs(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"message":{"content":"hi"},"finish_reason":"stop","logprobs":{"content":[{"token":"hi","logprob":-0.1,"top_logprobs":[{"token":"ho","logprob":-2}]}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`))
	f.Add([]byte(`{"choices":[{"index":3,"delta":{"content":"x"}}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var a, b receipt.Outputs
		if err := a.Add(data); err != nil {
			return
		}
		if err := b.Add(data); err != nil || a.Hash() != b.Hash() {
			t.Fatalf("read twice: %v, hashes %x %x", err, a.Hash(), b.Hash())
		}
		if a.LogprobsHash() != b.LogprobsHash() || !receipt.Equivalent(&a, &b, 0) {
			t.Fatal("an answer read twice is not equivalent to itself")
		}
	})
}

// TestProxyRawProtocols: bytes that are not HTTP pass through unchanged,
// whether the client speaks first (TLS's 0x16) or the server does.
func TestProxyRawProtocols(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("HELLO\n"))
				io.Copy(c, c)
			}()
		}
	}()
	p := &receipt.Proxy{Signer: &receipt.Signer{Key: key("prov"), ChainID: chain}, Service: 7}
	for _, first := range [][]byte{nil, {0x16, 0x03, 0x01}} {
		back, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		a, b := net.Pipe()
		go p.Serve(b, back)
		a.SetDeadline(time.Now().Add(5 * time.Second))
		if first != nil {
			go a.Write(first)
		}
		br := bufio.NewReader(a)
		line, err := br.ReadString('\n')
		if err != nil || line != "HELLO\n" {
			t.Fatalf("first bytes %x: the server's greeting %q, %v", first, line, err)
		}
		if first != nil {
			echo := make([]byte, len(first))
			if _, err := io.ReadFull(br, echo); err != nil || !bytes.Equal(echo, first) {
				t.Errorf("echo %x, %v; want %x", echo, err, first)
			}
		}
		a.Close()
	}
}
