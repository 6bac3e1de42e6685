package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/attest/attesttest"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// teeChain is jobChain's set-up on a chain that trusts the test PKIs'
// roots and verifies evidence with the real attest.Verify; prov1 and
// prov2 declare distinct encryption keys.
func teeChain(t *testing.T, edit func(*ledger.Genesis)) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "consumer", "prov1", "prov2", "prov3")
	g.Params.LivenessRatePPM = 0
	g.AttestRoots = attesttest.RootHashes()
	if edit != nil {
		edit(&g)
	}
	c := lt.NewChain(t, g)
	c.L.Attest = attest.LedgerVerifier
	for i, k := range []lt.Key{prov1, prov2} {
		pi := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
		pi.EncryptionKey = lt.AgeKey(k.Addr.String())
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: pi})})
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: 10_000_000})})
	}
	return c
}

// requestNonce sends request_attestation for k and returns the nonce the
// chain recorded.
func requestNonce(t *testing.T, c *lt.Chain, k lt.Key) []byte {
	t.Helper()
	must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRequestAttestation{})})
	p := provider(t, c, k)
	if p.TEE == nil || p.TEE.Nonce == nil || p.TEE.NonceHeight != uint64(c.Height) {
		t.Fatalf("after request_attestation: tee %+v, want a nonce of height %d", p.TEE, c.Height)
	}
	return p.TEE.Nonce[:]
}

// evidenceMsg makes test-PKI evidence of kind over nonce and key.
func evidenceMsg(t *testing.T, kind attest.Kind, nonce []byte, key string) *ledger.MsgAttest {
	t.Helper()
	ev, err := attest.Produce(&attesttest.Producer{K: kind}, nonce, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return attestMsg(ev, attesttest.Roots())
}

func attestMsg(ev attest.Evidence, roots [][]byte) *ledger.MsgAttest {
	m := &ledger.MsgAttest{Kind: string(ev.Kind), Evidence: ev.Raw, Roots: roots}
	for _, n := range attest.CollateralNames(ev.Kind) { // in increasing order
		if b, ok := ev.Collateral[n]; ok {
			m.Collateral = append(m.Collateral, ledger.AttestBlob{Name: n, Data: b})
		}
	}
	sortBlobs(m.Collateral)
	return m
}

func sortBlobs(b []ledger.AttestBlob) {
	for i := range b {
		for j := i + 1; j < len(b); j++ {
			if b[j].Name < b[i].Name {
				b[i], b[j] = b[j], b[i]
			}
		}
	}
}

// TestAttestAccepted: SEV-SNP evidence of the test PKI over the chain's
// nonce and the provider's key is accepted and recorded; the nonce is
// used up, so the same tx's evidence is not accepted twice.
func TestAttestAccepted(t *testing.T) {
	c := teeChain(t, nil)
	p := provider(t, c, prov1)
	if p.TEE != nil || p.AttestedAt(c.Now().Unix()) {
		t.Fatalf("registered provider attested before any evidence: %+v", p.TEE)
	}
	nonce := requestNonce(t, c, prov1)
	msg := evidenceMsg(t, attest.KindSEVSNP, nonce, p.EncryptionKey)
	must(t, []ledger.TxResult{send(t, c, prov1, msg)})
	p = provider(t, c, prov1)
	a := p.TEE
	if a == nil || a.Kind != "sev-snp" || a.Key != p.EncryptionKey || a.Nonce != nil || a.Height != uint64(c.Height) || len(a.Measurement) != 96 || a.TCBStatus == "" {
		t.Fatalf("attestation %+v: want sev-snp over %s, nonce used up, a 48-byte measurement", a, p.EncryptionKey)
	}
	if want := c.Now().Unix() + int64(ledger.DefaultParams().AttestMaxValidity); a.Expiry != want {
		t.Errorf("expiry %d, want the cap of a week after the block, %d (the test collateral runs to 2030)", a.Expiry, want)
	}
	if !p.AttestedAt(c.Now().Unix()) || p.AttestedAt(a.Expiry) {
		t.Errorf("attested now %v, at expiry %v: want true, false", p.AttestedAt(c.Now().Unix()), p.AttestedAt(a.Expiry))
	}
	if r := send(t, c, prov1, msg); !errors.Is(r.Err, ledger.ErrAttestation) || !strings.Contains(r.Err.Error(), "no attestation nonce") {
		t.Errorf("the same evidence again: %v, want refused for want of a nonce", r.Err)
	}
}

// TestAttestTDX: a TDX quote of the test PKI, on a chain whose blocks are
// in June 2023 (when its collateral is valid), is accepted; its expiry is
// the collateral's (the CRLs' next update, 2023-07-08), under the cap.
func TestAttestTDX(t *testing.T) {
	c := teeChain(t, func(g *ledger.Genesis) { g.Params.AttestMaxValidity = 90 * 86_400 })
	c.Advance(attesttest.TDXTime.Sub(c.Now()))
	p := provider(t, c, prov1)
	nonce := requestNonce(t, c, prov1)
	must(t, []ledger.TxResult{send(t, c, prov1, evidenceMsg(t, attest.KindTDX, nonce, p.EncryptionKey))})
	a := provider(t, c, prov1).TEE
	if want := time.Date(2023, 7, 8, 0, 0, 0, 0, time.UTC).Unix(); a.Kind != "tdx" || a.Expiry != want {
		t.Fatalf("tdx attestation %+v: want expiry %d", a, want)
	}
}

// TestAttestRefused: each way evidence can fail to prove what the chain
// asks is refused with code 30 and its reason.
func TestAttestRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		genesis func(*ledger.Genesis)
		// run sends what the case is about and returns its result.
		run  func(t *testing.T, c *lt.Chain) ledger.TxResult
		want string // in the error
		why  attest.Reason
	}{
		{name: "no nonce asked", want: "no attestation nonce", run: func(t *testing.T, c *lt.Chain) ledger.TxResult {
			return send(t, c, prov1, evidenceMsg(t, attest.KindSEVSNP, make([]byte, 32), provider(t, c, prov1).EncryptionKey))
		}},
		{name: "wrong nonce", why: attest.ReasonBinding, run: func(t *testing.T, c *lt.Chain) ledger.TxResult {
			nonce := requestNonce(t, c, prov1)
			other := append([]byte{nonce[0] ^ 1}, nonce[1:]...)
			return send(t, c, prov1, evidenceMsg(t, attest.KindSEVSNP, other, provider(t, c, prov1).EncryptionKey))
		}},
		{name: "another provider's nonce", why: attest.ReasonBinding, run: func(t *testing.T, c *lt.Chain) ledger.TxResult {
			requestNonce(t, c, prov1)
			nonce2 := requestNonce(t, c, prov2)
			return send(t, c, prov1, evidenceMsg(t, attest.KindSEVSNP, nonce2, provider(t, c, prov1).EncryptionKey))
		}},
		{name: "stale nonce", want: "is stale", genesis: func(g *ledger.Genesis) { g.Params.AttestNonceBlocks = 2 }, run: func(t *testing.T, c *lt.Chain) ledger.TxResult {
			nonce := requestNonce(t, c, prov1)
			msg := evidenceMsg(t, attest.KindSEVSNP, nonce, provider(t, c, prov1).EncryptionKey)
			c.ApplyBlock(t)
			c.ApplyBlock(t)
			return send(t, c, prov1, msg) // three blocks after the nonce's
		}},
		{name: "other key", why: attest.ReasonBinding, run: func(t *testing.T, c *lt.Chain) ledger.TxResult {
			nonce := requestNonce(t, c, prov1)
			return send(t, c, prov1, evidenceMsg(t, attest.KindSEVSNP, nonce, provider(t, c, prov2).EncryptionKey))
		}},
		{name: "expired collateral", why: attest.ReasonExpired, run: func(t *testing.T, c *lt.Chain) ledger.TxResult {
			// TDX collateral of June 2023 at the chain's November 2023.
			nonce := requestNonce(t, c, prov1)
			return send(t, c, prov1, evidenceMsg(t, attest.KindTDX, nonce, provider(t, c, prov1).EncryptionKey))
		}},
		{name: "untrusted root", want: "none of the 2 roots", genesis: func(g *ledger.Genesis) { g.AttestRoots = nil }, run: func(t *testing.T, c *lt.Chain) ledger.TxResult {
			// The chain trusts the vendors' roots only.
			nonce := requestNonce(t, c, prov1)
			return send(t, c, prov1, evidenceMsg(t, attest.KindSEVSNP, nonce, provider(t, c, prov1).EncryptionKey))
		}},
		{name: "chain to a root left out", why: attest.ReasonChain, genesis: func(g *ledger.Genesis) { g.AttestRoots = attesttest.RootHashes()[:1] }, run: func(t *testing.T, c *lt.Chain) ledger.TxResult {
			// The SNP PKI's root is carried but not trusted: only the
			// TDX one is passed on, which the SNP chain does not reach.
			nonce := requestNonce(t, c, prov1)
			return send(t, c, prov1, evidenceMsg(t, attest.KindSEVSNP, nonce, provider(t, c, prov1).EncryptionKey))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := teeChain(t, tc.genesis)
			r := tc.run(t, c)
			if !errors.Is(r.Err, ledger.ErrAttestation) || r.Code() != 30 {
				t.Fatalf("got %v (code %d), want code 30", r.Err, r.Code())
			}
			if tc.want != "" && !strings.Contains(r.Err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", r.Err, tc.want)
			}
			if tc.why != "" && attest.ReasonOf(r.Err) != tc.why {
				t.Errorf("reason %q (%v), want %q", attest.ReasonOf(r.Err), r.Err, tc.why)
			}
			if p := provider(t, c, prov1); p.TEE != nil && p.TEE.Kind != "" {
				t.Errorf("refused evidence recorded: %+v", p.TEE)
			}
		})
	}
}

// TestAttestMessageChecks: the stateless checks of MsgAttest.
func TestAttestMessageChecks(t *testing.T) {
	good := func() *ledger.MsgAttest {
		return &ledger.MsgAttest{Kind: "sev-snp", Evidence: []byte{1}, Collateral: []ledger.AttestBlob{{Name: "a", Data: []byte{1}}, {Name: "b", Data: []byte{1}}}, Roots: [][]byte{{1}}}
	}
	if err := good().ValidateBasic(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		edit func(*ledger.MsgAttest)
		want string
	}{
		{func(m *ledger.MsgAttest) { m.Kind = "nvidia-gpu" }, "GPU evidence only"},
		{func(m *ledger.MsgAttest) { m.Kind = "sgx" }, `kind "sgx"`},
		{func(m *ledger.MsgAttest) { m.Evidence = nil }, "evidence of 0 bytes"},
		{func(m *ledger.MsgAttest) { m.Collateral[1].Name = "a" }, "increasing order"},
		{func(m *ledger.MsgAttest) { m.Collateral[0].Name = "../x" }, "file name"},
		{func(m *ledger.MsgAttest) { m.Collateral[0].Data = nil }, `collateral "a" of 0 bytes`},
		{func(m *ledger.MsgAttest) { m.Roots = nil }, "0 roots"},
	} {
		m := good()
		c.edit(m)
		if err := m.ValidateBasic(); !errors.Is(err, ledger.ErrInvalidMsg) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want invalid saying %q", err, c.want)
		}
	}
}

// attestNow makes k attested with SNP evidence.
func attestNow(t *testing.T, c *lt.Chain, k lt.Key) *ledger.Attestation {
	t.Helper()
	nonce := requestNonce(t, c, k)
	must(t, []ledger.TxResult{send(t, c, k, evidenceMsg(t, attest.KindSEVSNP, nonce, provider(t, c, k).EncryptionKey))})
	return provider(t, c, k).TEE
}

func teeJob(name string) ledger.JobSpec {
	s := lt.WasmJob(name, 1_000_000, 600)
	s.Trust = ledger.TrustTEE
	return s
}

// TestTEEJobsOnlyOnAttestedProviders: a trust: tee job waits while no
// provider is attested (the wait counts them), goes to the attested one
// (not the cheaper unattested one), honours pinned measurements, and
// after the attestation expires a new one waits again; a job without
// trust still takes the cheapest.
func TestTEEJobsOnlyOnAttestedProviders(t *testing.T) {
	c := teeChain(t, nil)
	must(t, []ledger.TxResult{submit(t, c, teeJob("tee1"))})
	if j := job(t, c, 1); j.State != ledger.JobQueued || unplaced(j) == nil || unplaced(j).TEE != 2 {
		t.Fatalf("tee job with no attested provider: %s miss %+v, want queued with tee 2", j.State, unplaced(j))
	}
	a := attestNow(t, c, prov2) // the dearer one
	if j := job(t, c, 1); j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov2.Addr {
		t.Fatalf("tee job: %s on %v, want assigned to the attested prov2", j.State, j.Assignments)
	}
	must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("plain", 1_000_000, 600))})
	if j := job(t, c, 2); j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov1.Addr {
		t.Fatalf("plain job: %s on %v, want the cheaper prov1", j.State, j.Assignments)
	}
	pinned := teeJob("pinned")
	pinned.TEEMeasurements = []string{strings.Repeat("ab", 48)}
	must(t, []ledger.TxResult{submit(t, c, pinned)})
	if j := job(t, c, 3); j.State != ledger.JobQueued || unplaced(j).TEE != 2 {
		t.Fatalf("job pinned to another measurement: %s miss %+v", j.State, unplaced(j))
	}
	pinned.Name, pinned.TEEMeasurements = "pinned-ok", []string{a.Measurement}
	must(t, []ledger.TxResult{submit(t, c, pinned)})
	if j := job(t, c, 4); j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov2.Addr {
		t.Fatalf("job pinned to prov2's measurement: %s on %v", j.State, j.Assignments)
	}
	c.Advance(time.Duration(a.Expiry-c.Now().Unix()) * time.Second)
	must(t, []ledger.TxResult{submit(t, c, teeJob("late"))})
	if j := job(t, c, 5); j.State != ledger.JobQueued || unplaced(j).TEE != 2 {
		t.Fatalf("tee job after the attestation expired: %s miss %+v, want queued", j.State, unplaced(j))
	}
	for _, bad := range []func(*ledger.JobSpec){
		func(s *ledger.JobSpec) { s.Trust = "sgx" },
		func(s *ledger.JobSpec) { s.Trust, s.TEEMeasurements = "", []string{"ab"} },
		func(s *ledger.JobSpec) { s.TEEMeasurements = []string{"AB"} },
		func(s *ledger.JobSpec) { s.TEEMeasurements = []string{"xyz"} },
	} {
		s := teeJob("bad")
		bad(&s)
		if err := s.Validate(); !errors.Is(err, ledger.ErrInvalidMsg) {
			t.Errorf("spec trust %q measurements %q: %v, want invalid", s.Trust, s.TEEMeasurements, err)
		}
	}
}

// TestTEEGrantOnlyToAttestedKey: the key of a trust: tee job placed on an
// attested provider is refused once that provider declares another
// encryption key than the one attested, and once its attestation
// expired; granted while it holds.
func TestTEEGrantOnlyToAttestedKey(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(t *testing.T, c *lt.Chain, a *ledger.Attestation)
		want  string
	}{
		{"attested", func(*testing.T, *lt.Chain, *ledger.Attestation) {}, ""},
		{"key changed", func(t *testing.T, c *lt.Chain, _ *ledger.Attestation) {
			pi := provider(t, c, prov2).ProviderInfo
			pi.EncryptionKey = lt.AgeKey("another")
			must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgUpdateProvider{ProviderInfo: pi})})
		}, "not the one its evidence attested"},
		{"expired", func(t *testing.T, c *lt.Chain, a *ledger.Attestation) {
			c.Advance(time.Duration(a.Expiry-c.Now().Unix()) * time.Second)
		}, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := teeChain(t, func(g *ledger.Genesis) { g.Params.JobGrantTimeout, g.Params.AttestMaxValidity = 86_400, 600 })
			a := attestNow(t, c, prov2)
			must(t, []ledger.TxResult{submit(t, c, teeJob("tee"))})
			if j := job(t, c, 1); j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov2.Addr {
				t.Fatalf("tee job: %s on %v", j.State, j.Assignments)
			}
			tc.after(t, c, a)
			r := send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: prov2.Addr, WrappedKey: []byte("wrapped")}}})
			if tc.want == "" {
				must(t, []ledger.TxResult{r})
				return
			}
			if !errors.Is(r.Err, ledger.ErrAttestation) || !strings.Contains(r.Err.Error(), tc.want) {
				t.Fatalf("grant: %v, want refused saying %q", r.Err, tc.want)
			}
		})
	}
}
