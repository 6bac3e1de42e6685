package relay

import (
	"bytes"
	"crypto/ed25519"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// TestWitnessPass: a pass signed by a witness's key for this node, this
// replica and port, and about now, opens one tunnel; a reused pass, one
// for another node, replica or port, a stale one, a malformed one and one
// from a key that is not a witness here do not.
func TestWitnessPass(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	_, stranger, _ := ed25519.GenerateKey(nil)
	now := time.Unix(1_800_000_000, 0)
	const self, chain = "http://node-b:8080", "c1"
	h := NewHub(HubOptions{Self: self, ChainID: chain, Clock: func() time.Time { return now },
		IsWitness: func(pub []byte) bool { return bytes.Equal(pub, key.Public().(ed25519.PublicKey)) }})
	var prov, other address.Address
	prov[0], other[0] = 1, 2
	check := func(pass string, service uint64, p address.Address, port uint64) bool {
		r := httptest.NewRequest("GET", TunnelPath, nil)
		if pass != "" {
			r.Header.Set(HeaderWitness, pass)
		}
		return h.witnessPass(r, service, p, port)
	}
	pass := signWitnessPass(key, chain, self+"/", 7, prov, 8000, now.Add(-10*time.Second))
	for _, c := range []struct {
		name string
		pass string
		svc  uint64
		prov address.Address
		port uint64
		want bool
	}{
		{"valid", pass, 7, prov, 8000, true},
		{"reused", pass, 7, prov, 8000, false},
		{"another service", signWitnessPass(key, chain, self, 7, prov, 8000, now), 8, prov, 8000, false},
		{"another provider", signWitnessPass(key, chain, self, 7, prov, 8000, now.Add(time.Second)), 7, other, 8000, false},
		{"another port", signWitnessPass(key, chain, self, 7, prov, 8000, now.Add(2*time.Second)), 7, prov, 8001, false},
		{"another node", signWitnessPass(key, chain, "http://node-c:8080", 7, prov, 8000, now), 7, prov, 8000, false},
		{"another chain", signWitnessPass(key, "c2", self, 7, prov, 8000, now), 7, prov, 8000, false},
		{"stale", signWitnessPass(key, chain, self, 7, prov, 8000, now.Add(-2*time.Minute)), 7, prov, 8000, false},
		{"not a witness", signWitnessPass(stranger, chain, self, 7, prov, 8000, now), 7, prov, 8000, false},
		{"malformed", "zz.1.zz", 7, prov, 8000, false},
		{"truncated", strings.Join(strings.Split(pass, ".")[:2], "."), 7, prov, 8000, false},
		{"none", "", 7, prov, 8000, false},
		{"fresh", signWitnessPass(key, chain, self, 7, prov, 8000, now.Add(30*time.Second)), 7, prov, 8000, true},
	} {
		if got := check(c.pass, c.svc, c.prov, c.port); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// A node that takes no passes refuses a valid one.
	h.o.IsWitness = nil
	if check(signWitnessPass(key, chain, self, 7, prov, 8000, now), 7, prov, 8000) {
		t.Error("a hub without IsWitness took a pass")
	}
}

// FuzzWitnessPass: no header an outsider can write without a witness's
// key opens a tunnel, and none panics.
func FuzzWitnessPass(f *testing.F) {
	_, key, _ := ed25519.GenerateKey(nil)
	now := time.Unix(1_800_000_000, 0)
	var prov address.Address
	f.Add(signWitnessPass(key, "c1", "http://other:1", 7, prov, 8000, now))
	f.Add("00.0.00")
	f.Add(strings.Repeat("a", 64) + ".1800000000." + strings.Repeat("b", 128))
	h := NewHub(HubOptions{Self: "http://node-b:8080", ChainID: "c1", Clock: func() time.Time { return now },
		IsWitness: func(pub []byte) bool { return bytes.Equal(pub, key.Public().(ed25519.PublicKey)) }})
	f.Fuzz(func(t *testing.T, pass string) {
		r := httptest.NewRequest("GET", TunnelPath, nil)
		r.Header.Set(HeaderWitness, pass)
		if h.witnessPass(r, 7, prov, 8000) {
			t.Fatalf("pass %q opened a tunnel", pass)
		}
	})
}
