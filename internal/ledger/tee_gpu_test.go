package ledger_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/attest/attesttest"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// gpuChain is teeChain trusting the test GPU PKI's root too, with prov1
// and prov2 declaring one GPU each: uuids[0] and uuids[1] ("" declares
// none).
func gpuChain(t *testing.T, uuids ...string) *lt.Chain {
	t.Helper()
	c := teeChain(t, func(g *ledger.Genesis) { g.AttestRoots = append(attesttest.RootHashes(), attesttest.GPURootHash()) })
	for i, k := range []lt.Key{prov1, prov2} {
		if i >= len(uuids) || uuids[i] == "" {
			continue
		}
		pi := lt.ProviderInfo("RTX_4090_24GB", 1, uint64(36_000*(i+1)))
		pi.EncryptionKey = lt.AgeKey(k.Addr.String())
		pi.Inventory.GPUs[0].UUID = uuids[i]
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgUpdateProvider{ProviderInfo: pi})})
	}
	return c
}

// gpuMsg is a MsgAttest of GPU evidence alone: each test GPU's over k's
// fresh nonce and key, under the UUID beside it.
func gpuMsg(t *testing.T, c *lt.Chain, k lt.Key, gpus []*attesttest.GPU, uuids []string) *ledger.MsgAttest {
	t.Helper()
	nonce := requestNonce(t, c, k)
	m := &ledger.MsgAttest{Kind: ledger.TEEKindNVIDIAGPU, Roots: [][]byte{attesttest.GPURootDER()}}
	for i, g := range gpus {
		ev := g.Evidence(nonce, []byte(provider(t, c, k).EncryptionKey))
		m.GPUs = append(m.GPUs, ledger.AttestGPU{UUID: uuids[i], Evidence: ev.Raw, CertChain: ev.Collateral[attest.GPUCertChain]})
	}
	return m
}

func hasGPUEvent(rs []ledger.TxResult, typ string) bool {
	for _, r := range rs {
		if slices.ContainsFunc(r.Events, func(e ledger.Event) bool { return e.Type == typ }) {
			return true
		}
	}
	return false
}

// TestAttestGPU: GPU evidence over the chain's nonce and the provider's
// key records the GPU's identity from its certificate, beside the CPU
// TEE's attestation or alone; GPU evidence alone does not make the
// provider attested for trust: tee.
func TestAttestGPU(t *testing.T) {
	c := gpuChain(t, "GPU-aaaa")
	g := attesttest.NewGPU(0xA1)
	rs := []ledger.TxResult{send(t, c, prov1, gpuMsg(t, c, prov1, []*attesttest.GPU{g}, []string{"GPU-aaaa"}))}
	must(t, rs)
	p := provider(t, c, prov1)
	if len(p.TEE.GPUs) != 1 {
		t.Fatalf("attested GPUs %+v", p.TEE.GPUs)
	}
	ag := p.TEE.GPUs[0]
	if ag.ID != "A1" || ag.UUID != "GPU-aaaa" || len(ag.Measurement) != 96 || ag.Height != uint64(c.Height) || ag.Expiry != c.Now().Unix()+int64(ledger.DefaultParams().AttestMaxValidity) {
		t.Errorf("attested GPU %+v", ag)
	}
	if p.TEE.Kind != "" || p.AttestedAt(c.Now().Unix()) || p.TEE.Nonce != nil {
		t.Errorf("GPU evidence alone made the provider attested for trust: tee, or kept its nonce: %+v", p.TEE)
	}
	if !hasGPUEvent(rs, "gpu_attested") {
		t.Errorf("no gpu_attested event: %+v", rs)
	}

	// With SEV-SNP evidence over the same nonce: both are recorded, and
	// the GPU list is replaced by the new one.
	nonce := requestNonce(t, c, prov1)
	msg := evidenceMsg(t, attest.KindSEVSNP, nonce, p.EncryptionKey)
	msg.Roots = append(msg.Roots, attesttest.GPURootDER())
	ev := g.Evidence(nonce, []byte(p.EncryptionKey))
	msg.GPUs = []ledger.AttestGPU{{UUID: "GPU-aaaa", Evidence: ev.Raw, CertChain: ev.Collateral[attest.GPUCertChain], CC: "sometimes"}}
	if err := msg.ValidateBasic(); err == nil || !strings.Contains(err.Error(), "gpus[0].cc") {
		t.Errorf("a CC mode that is not on, devtools or off: %v", err)
	}
	msg.GPUs[0].CC = ledger.GPUCCOn
	must(t, []ledger.TxResult{send(t, c, prov1, msg)})
	p = provider(t, c, prov1)
	if p.TEE.Kind != "sev-snp" || !p.AttestedAt(c.Now().Unix()) || len(p.TEE.GPUs) != 1 || p.TEE.GPUs[0].Height != uint64(c.Height) {
		t.Errorf("after sev-snp with a GPU: %+v", p.TEE)
	}
	if p.TEE.GPUs[0].CC != ledger.GPUCCOn {
		t.Errorf("the CC mode the agent reported is not recorded: %+v", p.TEE.GPUs[0])
	}
	// A CPU attestation without GPUs keeps the attested GPUs.
	must(t, []ledger.TxResult{send(t, c, prov1, evidenceMsg(t, attest.KindSEVSNP, requestNonce(t, c, prov1), p.EncryptionKey))})
	if p = provider(t, c, prov1); len(p.TEE.GPUs) != 1 {
		t.Errorf("a CPU-only renewal dropped the attested GPUs: %+v", p.TEE)
	}
	// Going offline releases the GPU and drops its record.
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgSetProviderStatus{Online: false})})
	if p = provider(t, c, prov1); len(p.TEE.GPUs) != 0 {
		t.Errorf("offline provider keeps attested GPUs %+v", p.TEE.GPUs)
	}
}

// TestGPUSquatterLoses: a provider that declares another's GPU UUID
// (self-reported) goes offline when the GPU's owner attests it; it cannot
// declare the UUID again, and the owner can.
func TestGPUSquatterLoses(t *testing.T) {
	c := gpuChain(t, "", "GPU-victim") // prov2 squats prov1's UUID
	pi := lt.ProviderInfo("RTX_4090_24GB", 1, 36_000)
	pi.EncryptionKey = lt.AgeKey(prov1.Addr.String())
	pi.Inventory.GPUs[0].UUID = "GPU-victim"
	if r := send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: pi}); !errors.Is(r.Err, ledger.ErrGPUTaken) {
		t.Fatalf("the owner declaring its UUID while squatted: %v, want ErrGPUTaken", r.Err)
	}
	rs := []ledger.TxResult{send(t, c, prov1, gpuMsg(t, c, prov1, []*attesttest.GPU{attesttest.NewGPU(0xB2)}, []string{"GPU-victim"}))}
	must(t, rs)
	if !hasGPUEvent(rs, "gpu_squatter_offline") {
		t.Errorf("no gpu_squatter_offline event: %+v", rs)
	}
	if p2 := provider(t, c, prov2); p2.Online {
		t.Fatalf("the squatter is still online")
	}
	// The squatter cannot come back with the UUID; the owner can declare it.
	if r := send(t, c, prov2, &ledger.MsgSetProviderStatus{Online: true}); !errors.Is(r.Err, ledger.ErrGPUTaken) {
		t.Errorf("squatter back online with the UUID: %v, want ErrGPUTaken", r.Err)
	}
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: pi})})
	if p := provider(t, c, prov1); len(p.Inventory.GPUs) != 1 || p.Inventory.GPUs[0].UUID != "GPU-victim" || len(p.TEE.GPUs) != 1 {
		t.Errorf("owner after declaring: %+v, %+v", p.Inventory.GPUs, p.TEE)
	}
	c.ApplyBlock(t) // checks the invariants, the binding index among them
}

// TestGPUSquatterBeforeInIndex: the squatter is before the attesting
// provider in the online index, so taking it offline moves the attesting
// provider's index entry while its attest is being applied.
func TestGPUSquatterBeforeInIndex(t *testing.T) {
	c := gpuChain(t, "GPU-victim") // prov1 squats prov2's UUID
	must(t, []ledger.TxResult{send(t, c, prov2, gpuMsg(t, c, prov2, []*attesttest.GPU{attesttest.NewGPU(0xB3)}, []string{"GPU-victim"}))})
	if p1 := provider(t, c, prov1); p1.Online {
		t.Fatalf("the squatter is still online")
	}
	if p2 := provider(t, c, prov2); !p2.Online || len(p2.TEE.GPUs) != 1 {
		t.Fatalf("the attesting provider: online %v, %+v", p2.Online, p2.TEE)
	}
	c.ApplyBlock(t) // checks the invariants: the online index among them
}

// TestGPUEvidenceOffline: an offline provider's GPU evidence is refused
// (attested GPUs are bound while online).
func TestGPUEvidenceOffline(t *testing.T) {
	c := gpuChain(t)
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgSetProviderStatus{Online: false})})
	r := send(t, c, prov1, gpuMsg(t, c, prov1, []*attesttest.GPU{attesttest.NewGPU(0xF8)}, []string{"GPU-off"}))
	if !errors.Is(r.Err, ledger.ErrAttestation) || !strings.Contains(r.Err.Error(), "offline") {
		t.Fatalf("offline provider's GPU evidence: %v, want refused", r.Err)
	}
	c.ApplyBlock(t)
}

// TestGPUIdentityRules: one identity, one provider (fresh evidence moves
// it); one UUID, one attested GPU while the attestation lasts; one GPU
// once per message; evidence over another nonce or to an untrusted root
// refused.
func TestGPUIdentityRules(t *testing.T) {
	t.Run("identity moves", func(t *testing.T) {
		c := gpuChain(t)
		g := attesttest.NewGPU(0xC3)
		must(t, []ledger.TxResult{send(t, c, prov1, gpuMsg(t, c, prov1, []*attesttest.GPU{g}, []string{"GPU-one"}))})
		rs := []ledger.TxResult{send(t, c, prov2, gpuMsg(t, c, prov2, []*attesttest.GPU{g}, []string{"GPU-one"}))}
		must(t, rs)
		if !hasGPUEvent(rs, "gpu_identity_moved") {
			t.Errorf("no gpu_identity_moved event")
		}
		if p1, p2 := provider(t, c, prov1), provider(t, c, prov2); len(p1.TEE.GPUs) != 0 || len(p2.TEE.GPUs) != 1 || !p1.Online {
			t.Errorf("after the move: prov1 %+v (online %v), prov2 %+v", p1.TEE.GPUs, p1.Online, p2.TEE.GPUs)
		}
		c.ApplyBlock(t)
	})
	t.Run("contested UUID", func(t *testing.T) {
		c := gpuChain(t)
		must(t, []ledger.TxResult{send(t, c, prov2, gpuMsg(t, c, prov2, []*attesttest.GPU{attesttest.NewGPU(0xD4)}, []string{"GPU-two"}))})
		r := send(t, c, prov1, gpuMsg(t, c, prov1, []*attesttest.GPU{attesttest.NewGPU(0xD5)}, []string{"GPU-two"}))
		if !errors.Is(r.Err, ledger.ErrAttestation) || !strings.Contains(r.Err.Error(), "one UUID, one GPU") {
			t.Errorf("a second GPU under an attested UUID: %v", r.Err)
		}
		// Once that attestation expires, the UUID goes to fresh evidence.
		c.Advance(8 * 24 * 3600 * 1e9)
		must(t, []ledger.TxResult{send(t, c, prov1, gpuMsg(t, c, prov1, []*attesttest.GPU{attesttest.NewGPU(0xD5)}, []string{"GPU-two"}))})
		if p2 := provider(t, c, prov2); p2.Online {
			t.Errorf("prov2, whose attestation of GPU-two expired, kept it")
		}
	})
	t.Run("refused", func(t *testing.T) {
		c := gpuChain(t)
		g := attesttest.NewGPU(0xE6)
		for _, tc := range []struct {
			name string
			msg  func() *ledger.MsgAttest
			why  attest.Reason
			want string
		}{
			{"same GPU twice", func() *ledger.MsgAttest {
				return gpuMsg(t, c, prov1, []*attesttest.GPU{g, g}, []string{"GPU-x", "GPU-y"})
			}, "", "same GPU"},
			{"other nonce", func() *ledger.MsgAttest {
				m := gpuMsg(t, c, prov1, []*attesttest.GPU{g}, []string{"GPU-x"})
				ev := g.Evidence([]byte("an old nonce"), []byte(provider(t, c, prov1).EncryptionKey))
				m.GPUs[0].Evidence = ev.Raw
				return m
			}, attest.ReasonBinding, ""},
			{"another GPU's chain", func() *ledger.MsgAttest {
				m := gpuMsg(t, c, prov1, []*attesttest.GPU{g}, []string{"GPU-x"})
				m.GPUs[0].CertChain = attesttest.NewGPU(0xE7).CertChain()
				return m
			}, attest.ReasonSignature, ""},
			{"the real NVIDIA root only", func() *ledger.MsgAttest {
				m := gpuMsg(t, c, prov1, []*attesttest.GPU{g}, []string{"GPU-x"})
				m.Roots = append(m.Roots[:0], attesttest.Roots()[1]) // trusted, but not the GPU's
				return m
			}, attest.ReasonChain, ""},
		} {
			r := send(t, c, prov1, tc.msg())
			if !errors.Is(r.Err, ledger.ErrAttestation) || (tc.why != "" && attest.ReasonOf(r.Err) != tc.why) || !strings.Contains(r.Err.Error(), tc.want) {
				t.Errorf("%s: %v (reason %q), want code 30, %q, %q", tc.name, r.Err, attest.ReasonOf(r.Err), tc.why, tc.want)
			}
		}
		if p := provider(t, c, prov1); len(p.TEE.GPUs) != 0 {
			t.Errorf("refused evidence recorded %+v", p.TEE.GPUs)
		}
	})
}

// TestTEEGPUJobNeedsCCGPUs: a trust: tee job that asks for a GPU is placed
// only on an attested provider whose GPU's NVIDIA evidence is valid and
// whose agent reported CC mode on: its data leaves the guest for the
// GPU's memory. A CPU-only trust: tee job needs the CPU TEE alone.
func TestTEEGPUJobNeedsCCGPUs(t *testing.T) {
	c := gpuChain(t, "GPU-aaaa", "GPU-bbbb")
	for _, k := range []lt.Key{prov1, prov2} {
		// The stake a GPU provider needs for a GPU job.
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: 100_000_000})})
	}
	attestNow(t, c, prov1)
	spec := teeJob("train")
	spec.GPUCount = 1
	must(t, []ledger.TxResult{submit(t, c, spec)})
	if j := job(t, c, 1); j.State != ledger.JobQueued || unplaced(j) == nil || unplaced(j).TEE == 0 {
		t.Fatalf("GPU tee job on a provider without attested GPUs: %s miss %+v, want queued (tee)", j.State, unplaced(j))
	}
	must(t, []ledger.TxResult{submit(t, c, teeJob("cpu"))})
	if j := job(t, c, 2); j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov1.Addr {
		t.Fatalf("CPU tee job: %s on %v, want assigned to the attested prov1", j.State, j.Assignments)
	}
	g := attesttest.NewGPU(0xA1)
	for _, cc := range []string{ledger.GPUCCOff, ledger.GPUCCDevTools, ledger.GPUCCOn} {
		nonce := requestNonce(t, c, prov1)
		key := provider(t, c, prov1).EncryptionKey
		msg := evidenceMsg(t, attest.KindSEVSNP, nonce, key)
		msg.Roots = append(msg.Roots, attesttest.GPURootDER())
		ev := g.Evidence(nonce, []byte(key))
		msg.GPUs = []ledger.AttestGPU{{UUID: "GPU-aaaa", Evidence: ev.Raw, CertChain: ev.Collateral[attest.GPUCertChain], CC: cc}}
		must(t, []ledger.TxResult{send(t, c, prov1, msg)})
		j := job(t, c, 1)
		if cc != ledger.GPUCCOn {
			if j.State != ledger.JobQueued {
				t.Fatalf("GPU tee job on a provider whose attested GPU reports CC %s: %s, want queued", cc, j.State)
			}
			continue
		}
		if j.State != ledger.JobAssigned || j.Assignments[0].Provider != prov1.Addr {
			t.Fatalf("GPU tee job once prov1's GPU is attested with CC on: %s on %v", j.State, j.Assignments)
		}
	}
}
