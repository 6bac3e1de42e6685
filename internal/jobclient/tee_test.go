package jobclient_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/attest/attesttest"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/seal"
)

// newTEEWorld is newWorld on a chain that trusts the test PKIs' roots and
// verifies evidence with the real attest.Verify.
func newTEEWorld(t *testing.T) *world {
	t.Helper()
	w := newWorld(t, func(g *ledger.Genesis) { g.AttestRoots = attesttest.RootHashes() })
	w.chain.SetAttest(attest.LedgerVerifier)
	return w
}

// attestProv makes p1 attested: a nonce from the chain, then test-PKI
// SEV-SNP evidence over it and p1's encryption key.
func (w *world) attestProv(t *testing.T) *ledger.Attestation {
	t.Helper()
	w.chain.Send(w.prov, &ledger.MsgRequestAttestation{})
	p, err := w.cl.Provider(t.Context(), w.prov.Addr)
	if err != nil || p.Record.TEE == nil || p.Record.TEE.Nonce == nil {
		t.Fatalf("no attestation nonce: %+v, %v", p, err)
	}
	ev, err := attest.Produce(&attesttest.Producer{K: attest.KindSEVSNP}, p.Record.TEE.Nonce[:], []byte(p.Record.EncryptionKey))
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
	w.chain.Send(w.prov, m)
	if p, err = w.cl.Provider(t.Context(), w.prov.Addr); err != nil || p.Record.TEE == nil || p.Record.TEE.Kind == "" {
		t.Fatalf("p1 not attested: %+v, %v", p, err)
	}
	return p.Record.TEE
}

// TestGrantOnlyToAttestedKey: GrantIfNeeded wraps a trust: tee job's key to
// its provider's attested key, and sends no grant when the provider's
// attestation is missing, expired (by the client's clock), over another
// key than the one it declares, or of a measurement the job does not pin.
//
// The job on the chain is a plain one (the ledger would not place a
// trust: tee job on p1 in most of these cases, and would refuse the
// grants itself): the client is handed the job with its spec made
// trust: tee, so that what stops the grant is the client's own check.
func TestGrantOnlyToAttestedKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attest bool
		before func(t *testing.T, w *world, a *ledger.Attestation, spec *ledger.JobSpec)
		grant  bool
	}{
		{"attested", true, func(*testing.T, *world, *ledger.Attestation, *ledger.JobSpec) {}, true},
		{"attested, pinned measurement", true, func(_ *testing.T, _ *world, a *ledger.Attestation, s *ledger.JobSpec) {
			s.TEEMeasurements = []string{strings.Repeat("ab", 48), a.Measurement}
		}, true},
		{"missing", false, func(*testing.T, *world, *ledger.Attestation, *ledger.JobSpec) {}, false},
		{"expired", true, func(_ *testing.T, w *world, a *ledger.Attestation, _ *ledger.JobSpec) {
			w.clk.Advance(time.Unix(a.Expiry, 0).Sub(w.clk.Now()))
		}, false},
		{"another measurement", true, func(_ *testing.T, _ *world, _ *ledger.Attestation, s *ledger.JobSpec) {
			s.TEEMeasurements = []string{strings.Repeat("ab", 48)}
		}, false},
		{"key changed", true, func(t *testing.T, w *world, _ *ledger.Attestation, _ *ledger.JobSpec) {
			p, err := w.cl.Provider(t.Context(), w.prov.Addr)
			if err != nil {
				t.Fatal(err)
			}
			pi := p.Record.ProviderInfo
			pi.EncryptionKey = lt.AgeKey("another")
			w.chain.Send(w.prov, &ledger.MsgUpdateProvider{ProviderInfo: pi})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newTEEWorld(t)
			var a *ledger.Attestation
			if tc.attest {
				a = w.attestProv(t)
			}
			ctx := t.Context()
			id, err := w.jc.Submit(ctx, w.spec(t, "2", "none", ""))
			if err != nil {
				t.Fatal(err)
			}
			j, err := w.cl.Job(ctx, id)
			if err != nil || j.State != ledger.JobAssigned || j.Assignments[0].Provider != w.prov.Addr {
				t.Fatalf("job %+v, %v: want assigned to p1", j, err)
			}
			j.Spec.Trust = ledger.TrustTEE
			tc.before(t, w, a, &j.Spec)
			sent, err := w.jc.GrantIfNeeded(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			after, err := w.cl.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			granted := after.Assignments[0].KeyGrant != nil
			if sent != tc.grant || granted != tc.grant {
				t.Fatalf("sent %v, granted %v; want %v", sent, granted, tc.grant)
			}
			if !tc.grant {
				return
			}
			// Wrapped to the attested key, which p1's identity opens.
			if a.Key != w.provID.Recipient().String() {
				t.Fatalf("attested key %s is not p1's %s", a.Key, w.provID.Recipient())
			}
			if _, err := seal.UnwrapKey(after.Assignments[0].KeyGrant, w.provID); err != nil {
				t.Fatalf("the grant does not open with the attested key's identity: %v", err)
			}
		})
	}
}
