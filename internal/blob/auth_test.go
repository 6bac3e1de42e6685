package blob

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

type testKey struct{ priv ed25519.PrivateKey }

func (k testKey) PrivateKey() ed25519.PrivateKey { return k.priv }

func (k testKey) addr() address.Address {
	return address.FromPubKey(k.priv.Public().(ed25519.PublicKey))
}

func newTestKey(seed byte) testKey {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	return testKey{ed25519.NewKeyFromSeed(s)}
}

// authGateway serves a store that requires tickets (or token) and lets
// only allowed accounts upload, up to q.
func authGateway(t *testing.T, q Quota, allowed ...address.Address) (*Store, *httptest.Server) {
	t.Helper()
	return allowanceGateway(t, q, func(a address.Address) (Allowance, error) {
		for _, b := range allowed {
			if a == b {
				return Allowance{Bytes: 1 << 40}, nil
			}
		}
		return Allowance{Basis: "unknown to the ledger: fund it first"}, nil
	})
}

// allowanceGateway serves a store that requires tickets (or token) and
// lets each account keep what allowance says, up to q.
func allowanceGateway(t *testing.T, q Quota, allowance func(address.Address) (Allowance, error)) (*Store, *httptest.Server) {
	t.Helper()
	s := newStore(t, 1<<20)
	auth := &Auth{Token: "sekrit", Quota: q, Allowance: allowance}
	h := NewGateway(s, GatewayOptions{Auth: auth})
	mux := http.NewServeMux()
	mux.Handle("/v1/blobs", h)
	mux.Handle("/v1/blobs/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return s, srv
}

// Anonymous uploads, bad tickets, replayed tickets and unknown accounts are
// refused before the body is stored; a ticket of a known account and the
// node's token are accepted.
func TestUploadsNeedAuth(t *testing.T) {
	alice, mallory := newTestKey(1), newTestKey(2)
	s, srv := authGateway(t, Quota{}, alice.addr())

	_, _, err := NewClient(srv.URL).Put(t.Context(), strings.NewReader("anonymous"))
	var ge *GatewayError
	if !errors.As(err, &ge) || ge.StatusCode != http.StatusUnauthorized || !strings.Contains(ge.Message, TicketScheme) {
		t.Errorf("anonymous upload: %v, want 401 saying how to authenticate", err)
	}

	c := NewClient(srv.URL)
	c.Signer = alice
	if _, _, err := c.Put(t.Context(), strings.NewReader("alice's input")); err != nil {
		t.Errorf("alice's ticketed upload: %v", err)
	}
	if u := s.UsageOf(alice.addr()); u.Blobs != 1 || u.Bytes != int64(len("alice's input")) {
		t.Errorf("alice's usage %+v, want 1 blob of %d bytes", u, len("alice's input"))
	}

	m := NewClient(srv.URL)
	m.Signer = mallory
	_, _, err = m.Put(t.Context(), strings.NewReader("mallory"))
	if !errors.As(err, &ge) || ge.StatusCode != http.StatusForbidden || !strings.Contains(ge.Message, "fund it first") {
		t.Errorf("unknown account: %v, want 403 with the node's reason", err)
	}

	tok := NewClient(srv.URL)
	tok.Token = "sekrit"
	if _, _, err := tok.Put(t.Context(), strings.NewReader("operator")); err != nil {
		t.Errorf("token upload: %v", err)
	}

	ticket := SignTicket(alice.priv, "PUT", "/v1/blobs", 5, Hash{}, time.Now().Add(time.Minute))
	for _, tc := range []struct {
		name, auth, path, body string
		want                   int
		msg                    string
	}{
		{"first use", ticket, "/v1/blobs", "hello", 201, ""},
		{"replay", ticket, "/v1/blobs", "hello", 401, "already used"},
		{"other size", SignTicket(alice.priv, "PUT", "/v1/blobs", 5, Hash{}, time.Now().Add(time.Minute)), "/v1/blobs", "hello!", 401, "signed for a body of 5 bytes"},
		{"expired", SignTicket(alice.priv, "PUT", "/v1/blobs", -1, Hash{}, time.Now().Add(-time.Minute)), "/v1/blobs", "x", 401, "expired"},
		{"too far ahead", SignTicket(alice.priv, "PUT", "/v1/blobs", -1, Hash{}, time.Now().Add(time.Hour)), "/v1/blobs", "x", 401, "ahead"},
		{"other path", SignTicket(alice.priv, "PUT", "/v1/blobs", 1, Hash{}, time.Now().Add(time.Minute)), "/v1/blobs/" + Sum([]byte("x")).String(), "x", 401, "signature does not match"},
		{"bound hash", SignTicket(alice.priv, "PUT", "/v1/blobs", 1, Sum([]byte("y")), time.Now().Add(time.Minute)), "/v1/blobs", "x", 422, ""},
		{"garbage", TicketScheme + " v1.nope", "/v1/blobs", "x", 401, "want v1."},
		{"wrong token", "Bearer nope", "/v1/blobs", "x", 401, "wrong API token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), "PUT", srv.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", tc.auth)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			err = responseError("put", resp)
			if resp.StatusCode != tc.want || (tc.msg != "" && !strings.Contains(err.Error(), tc.msg)) {
				t.Errorf("got %v, want %d mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
}

// An account cannot store more than its quota: a declared upload past it
// is refused before its body, a chunked one is cut off as it passes it,
// and the blob count is bounded too.
func TestAccountQuota(t *testing.T) {
	alice := newTestKey(1)
	s, srv := authGateway(t, Quota{Bytes: 1000, Blobs: 3}, alice.addr())
	c := NewClient(srv.URL)
	c.Signer = alice
	if _, _, err := c.Put(t.Context(), strings.NewReader(strings.Repeat("a", 600))); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.Put(t.Context(), strings.NewReader(strings.Repeat("b", 600))) // chunked
	if !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "more than 1000 bytes") {
		t.Errorf("chunked upload past the quota: %v, want ErrQuota naming the limit", err)
	}
	path := t.TempDir() + "/f"
	writeFile(t, path, strings.Repeat("c", 600))
	_, _, err = c.PutFile(t.Context(), path) // declared
	if !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "600 bytes declared") {
		t.Errorf("declared upload past the quota: %v, want ErrQuota before the body", err)
	}
	for i := range 2 {
		if _, _, err := c.Put(t.Context(), strings.NewReader(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err = c.Put(t.Context(), strings.NewReader("fourth"))
	if !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "3 blobs") {
		t.Errorf("fourth blob: %v, want ErrQuota naming the count", err)
	}
	if u := s.UsageOf(alice.addr()); u.Blobs != 3 || u.Bytes != 602 || u.InFlight != 0 {
		t.Errorf("usage %+v, want 3 blobs, 602 bytes, none in flight", u)
	}
	// The records survive a restart.
	s2, err := OpenStore(s.Dir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if u := s2.UsageOf(alice.addr()); u.Blobs != 3 || u.Bytes != 602 {
		t.Errorf("usage after reopening %+v, want 3 blobs, 602 bytes", u)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ParseTicket reads untrusted headers: it must never panic, and what it
// accepts must print back to a ticket that parses the same.
func FuzzParseTicket(f *testing.F) {
	k := newTestKey(1)
	good := strings.TrimPrefix(SignTicket(k.priv, "PUT", "/v1/blobs", 10, Sum([]byte("x")), time.Unix(1e9, 0)), TicketScheme+" ")
	f.Add(good)
	f.Add("v1.....")
	f.Add("v1.AAAA.-1.-.0.AA.AA")
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := ParseTicket(s)
		if err != nil {
			return
		}
		if len(tk.PubKey) != ed25519.PublicKeySize || len(tk.Sig) != ed25519.SignatureSize || tk.Size < -1 {
			t.Fatalf("accepted %q as %+v", s, tk)
		}
		tk.check("PUT", "/v1/blobs", tk.Size, time.Unix(tk.Expiry, 0))
	})
}
