package provider_test

import (
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/attest/attesttest"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestAgentAttests: an agent configured with a TEE producer (the test
// PKI's SEV-SNP, standing in for a guest's) reaches an attested state on
// a real in-process node that verifies with attest.Verify: it asks the
// chain for a nonce, sends evidence over it and its encryption key, and
// renews before expiry (the chain caps validity at 10 minutes here and
// the agent renews 599 s ahead, so at once).
func TestAgentAttests(t *testing.T) {
	n := startNetworkGenesis(t, func(g *ledger.Genesis) {
		g.AttestRoots = attesttest.RootHashes()
		g.Params.AttestMaxValidity = 600
	}, "tee-box")
	prod := &attesttest.Producer{K: attest.KindSEVSNP}
	a, _ := runAgentWith(t, n, "tee-box", nil, "eu", 1000, func(o *provider.Options) {
		o.TEE = provider.TEEOptions{Producer: prod, Roots: attesttest.Roots(), RenewBefore: 599 * time.Second}
	})
	addr := a.Status().Key()
	var first *ledger.Attestation
	waitFor(t, "an accepted attestation", func() bool {
		b, err := n.cl.Provider(t.Context(), addr)
		if err != nil || b.Record == nil || b.Record.TEE == nil || b.Record.TEE.Kind == "" {
			return false
		}
		first = b.Record.TEE
		return true
	})
	b, err := n.cl.Provider(t.Context(), addr)
	if err != nil {
		t.Fatal(err)
	}
	if first.Kind != "sev-snp" || first.Key != b.Record.EncryptionKey || first.Key == "" {
		t.Fatalf("attestation %+v: want sev-snp over the declared key %q", first, b.Record.EncryptionKey)
	}
	waitFor(t, "a renewed attestation", func() bool {
		b, err := n.cl.Provider(t.Context(), addr)
		return err == nil && b.Record.TEE != nil && b.Record.TEE.Height > first.Height && b.Record.TEE.Kind != ""
	})
	if a.Status().AttestedUntil.IsZero() || prod.Calls() < 2 {
		t.Errorf("status attested until %v after %d evidence, want set after at least 2", a.Status().AttestedUntil, prod.Calls())
	}
}

// TestAgentAttestsGPU: an agent with a GPU producer sends the GPU's
// evidence beside its TEE's, over the same nonce and key; the chain
// records the GPU under its UUID with the identity from its certificate.
// With GPUs only, it sends GPU evidence alone.
func TestAgentAttestsGPU(t *testing.T) {
	for _, withTEE := range []bool{true, false} {
		t.Run(map[bool]string{true: "beside sev-snp", false: "alone"}[withTEE], func(t *testing.T) {
			n := startNetworkGenesis(t, func(g *ledger.Genesis) {
				g.AttestRoots = append(attesttest.RootHashes(), attesttest.GPURootHash())
			}, "tee-gpu-box")
			gpu := attesttest.NewGPU(0x77)
			gpu.UUID = "GPU-77777777-0000-0000-0000-000000000000"
			a, _ := runAgentWith(t, n, "tee-gpu-box", nil, "eu", 1000, func(o *provider.Options) {
				o.TEE = provider.TEEOptions{GPUs: []provider.GPUProducer{gpu}, Roots: append(attesttest.Roots(), attesttest.GPURootDER())}
				if withTEE {
					o.TEE.Producer = &attesttest.Producer{K: attest.KindSEVSNP}
				}
			})
			addr := a.Status().Key()
			var rec *ledger.Attestation
			waitFor(t, "an accepted GPU attestation", func() bool {
				b, err := n.cl.Provider(t.Context(), addr)
				if err != nil || b.Record == nil || b.Record.TEE == nil || len(b.Record.TEE.GPUs) == 0 {
					return false
				}
				rec = b.Record.TEE
				return true
			})
			g := rec.GPUs[0]
			if g.ID != "77" || g.UUID != gpu.UUID || g.CC != ledger.GPUCCOn || gpu.Calls() < 1 {
				t.Errorf("attested GPU %+v after %d evidence", g, gpu.Calls())
			}
			if withTEE != (rec.Kind == "sev-snp") {
				t.Errorf("TEE kind %q with a TEE producer %v", rec.Kind, withTEE)
			}
		})
	}
}
