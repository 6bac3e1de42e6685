package apiserver

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/attest/attesttest"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// attestFake has p2 attested with the test PKI's SEV-SNP evidence on a
// fake chain that trusts the test roots.
func attestFake(t *testing.T) *fakeChain {
	t.Helper()
	f := newFakeChainWith(t, func(g *ledger.Genesis) { g.AttestRoots = attesttest.RootHashes() })
	f.c.L.Attest = attest.LedgerVerifier
	k := providerKeys[1]
	f.send(k, &ledger.MsgRequestAttestation{})
	p, _, err := ledger.GetProvider(f.c.KV, k.Addr)
	if err != nil || p.TEE == nil || p.TEE.Nonce == nil {
		t.Fatalf("no nonce: %v %+v", err, p)
	}
	ev, err := attest.Produce(&attesttest.Producer{K: attest.KindSEVSNP}, p.TEE.Nonce[:], []byte(p.EncryptionKey))
	if err != nil {
		t.Fatal(err)
	}
	m := &ledger.MsgAttest{Kind: string(ev.Kind), Evidence: ev.Raw, Roots: attesttest.Roots()}
	names := attest.CollateralNames(ev.Kind)
	slices.Sort(names)
	for _, n := range names {
		if b, ok := ev.Collateral[n]; ok {
			m.Collateral = append(m.Collateral, ledger.AttestBlob{Name: n, Data: b})
		}
	}
	f.send(k, m)
	return f
}

func offerAddrs(l []apiwire.ProviderOffer) []string {
	var out []string
	for _, o := range l {
		out = append(out, o.Address)
	}
	return out
}

// TestTEEServed: the offers query tee=… finds the attested provider, the
// provider body shows what its evidence proved, and a trust: tee quote
// counts it; once the block time passes its expiry (the wall clock plays
// no part), none of them does.
func TestTEEServed(t *testing.T) {
	f := attestFake(t)
	s := New(f, Options{})
	p2 := providerKeys[1].Addr.String()
	others := []string{providerKeys[0].Addr.String(), providerKeys[2].Addr.String(), providerKeys[3].Addr.String()}
	slices.Sort(others)
	query := func(q string) []string {
		t.Helper()
		var l apiwire.OfferList
		if rec := do(t, s, "GET", "/v1/offers?sort=address&q="+q, nil, nil, &l); rec.Code != 200 {
			t.Fatalf("offers %q: %d %s", q, rec.Code, rec.Body)
		}
		return offerAddrs(l.Offers)
	}
	body := func() apiwire.ProviderBody {
		t.Helper()
		var b apiwire.ProviderBody
		if rec := do(t, s, "GET", "/v1/providers/"+p2, nil, nil, &b); rec.Code != 200 {
			t.Fatalf("provider: %d %s", rec.Code, rec.Body)
		}
		return b
	}
	quote := func() ledger.Quote {
		t.Helper()
		spec := lt.WasmJob("tee", 1_000_000, 60)
		spec.Trust = ledger.TrustTEE
		raw, _ := json.Marshal(spec)
		var q ledger.Quote
		if rec := do(t, s, "POST", "/v1/quote", raw, nil, &q); rec.Code != 200 {
			t.Fatalf("quote: %d %s", rec.Code, rec.Body)
		}
		return q
	}

	if got := query("tee=sev-snp"); !slices.Equal(got, []string{p2}) {
		t.Errorf("tee=sev-snp: %v, want [%s]", got, p2)
	}
	if got := query("tee=any"); !slices.Equal(got, []string{p2}) {
		t.Errorf("tee=any: %v, want [%s]", got, p2)
	}
	if got := query("tee=tdx"); len(got) != 0 {
		t.Errorf("tee=tdx: %v, want none", got)
	}
	if got := query("tee=none"); !slices.Equal(got, others) {
		t.Errorf("tee=none: %v, want %v", got, others)
	}
	b := body()
	a := b.Attestation
	if a.State != apiwire.AttestValid || a.Kind != "sev-snp" || len(a.Measurement) != 96 || a.TCBStatus == "" || a.Key != b.Record.EncryptionKey ||
		a.AsOf != f.c.Now().Unix() || a.Expiry <= a.AsOf || b.TEE != "sev-snp" || b.TEEExpiry != a.Expiry {
		t.Fatalf("provider body: attestation %+v, offer tee %q %d", a, b.TEE, b.TEEExpiry)
	}
	if q := quote(); q.Matching != 1 || len(q.Best) != 1 || q.Best[0].Provider.String() != p2 {
		t.Errorf("trust: tee quote: matching %d best %+v, want p2 only", q.Matching, q.Best)
	}

	// A block after the expiry.
	f.c.Advance(time.Duration(a.Expiry-f.c.Now().Unix()+10) * time.Second)
	f.send(providerKeys[0], &ledger.MsgSetProviderStatus{Online: true})
	if got := query("tee=sev-snp"); len(got) != 0 {
		t.Errorf("tee=sev-snp after expiry: %v, want none", got)
	}
	if got, want := query("tee=none"), append([]string{p2}, others...); !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("tee=none after expiry: %v, want %v", got, want)
	}
	if l := query("address=" + p2); len(l) != 1 {
		t.Fatalf("address=p2: %v", l)
	}
	var l apiwire.OfferList
	do(t, s, "GET", "/v1/offers?q=address="+p2, nil, nil, &l)
	if l.Offers[0].TEE != "" {
		t.Errorf("offer after expiry: tee %q, want none", l.Offers[0].TEE)
	}
	if b := body(); b.Attestation.State != apiwire.AttestExpired || b.TEE != "" {
		t.Errorf("provider body after expiry: %+v, offer tee %q; want expired", b.Attestation, b.TEE)
	}
	if q := quote(); q.Matching != 0 {
		t.Errorf("trust: tee quote after expiry: matching %d, want 0 (the block time is past the expiry)", q.Matching)
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
