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

// teeServiceChain is serviceChain (prov1, prov2, prov3 run oci, asking
// 36,000, 72,000 and 108,000 usync per core-hour) on a chain that
// verifies the test PKIs' evidence, each provider with its own encryption
// key, attestations valid for 600 s.
func teeServiceChain(t *testing.T) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "consumer", "prov1", "prov2", "prov3")
	g.Params.LivenessRatePPM = 0
	g.Params.AttestMaxValidity = 600
	g.AttestRoots = attesttest.RootHashes()
	c := lt.NewChain(t, g)
	c.L.Attest = attest.LedgerVerifier
	for i, k := range []lt.Key{prov1, prov2, prov3} {
		info := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
		info.Executors = []string{"wasm", "oci"}
		info.EncryptionKey = lt.AgeKey(k.Addr.String())
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: info})})
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: 10_000_000})})
	}
	return c
}

func teeService(name string) ledger.ServiceSpec {
	s := lt.ServiceSpec(name, 200_000)
	s.Trust = ledger.TrustTEE
	return s
}

// TestTEEServiceOnAttestedProviders: a trust: tee service waits while no
// provider is attested (its miss counts them), its replica goes to the
// attested provider and not to the cheaper unattested one, it reserves in
// the TEE market, pinned measurements are honoured, and when the
// provider's attestation lapses the replica ends (tee_lapsed, not
// excluded, not a failure) and is placed again on a provider attested
// then.
func TestTEEServiceOnAttestedProviders(t *testing.T) {
	c := teeServiceChain(t)
	must(t, []ledger.TxResult{deploy(t, c, teeService("conf"), 10_000_000)})
	if s := service(t, c, 1); len(s.Replicas) != 0 || s.Wait == nil || s.Wait.Miss == nil || s.Wait.Miss.TEE != 3 {
		t.Fatalf("tee service with no attested provider: replicas %+v, wait %+v; want none, tee 3", s.Replicas, s.Wait)
	}
	a := attestNow(t, c, prov2)
	s := service(t, c, 1)
	if len(s.Replicas) != 1 || s.Replicas[0].Provider != prov2.Addr {
		t.Fatalf("tee service after prov2 attested: replicas %+v, want one on prov2", s.Replicas)
	}
	if m := cpuMarket(t, c); m.TEE == nil || m.TEE.ReservedUnits != 1 || m.ReservedUnits != 1 {
		t.Fatalf("market after the placement: %+v, want 1 core reserved in both books", m)
	}
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("plain", 200_000), 10_000_000)})
	if s := service(t, c, 2); len(s.Replicas) != 1 || s.Replicas[0].Provider != prov1.Addr {
		t.Fatalf("plain service: replicas %+v, want the cheapest prov1", s.Replicas)
	}
	pinned := teeService("pinned")
	pinned.TEEMeasurements = []string{strings.Repeat("ab", 48)}
	must(t, []ledger.TxResult{deploy(t, c, pinned, 10_000_000)})
	if s := service(t, c, 3); len(s.Replicas) != 0 || s.Wait == nil || s.Wait.Miss == nil || s.Wait.Miss.TEE != 3 {
		t.Fatalf("service pinned to another measurement: replicas %+v, wait %+v", s.Replicas, s.Wait)
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgStopService{ServiceID: 3})})

	// prov3 attests later, so prov2's attestation lapses first; prov2
	// keeps reporting, so only the lapse ends its replica.
	c.Advance(100 * time.Second)
	attestNow(t, c, prov3)
	for c.Now().Unix() < a.Expiry-30 {
		must(t, []ledger.TxResult{heartbeat(t, c, prov2, true, 1)})
		must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 2)})
		c.Advance(60 * time.Second)
	}
	if s := service(t, c, 1); len(s.Replicas) != 1 || s.Replicas[0].Provider != prov2.Addr {
		t.Fatalf("before the lapse: replicas %+v", s.Replicas)
	}
	c.Advance(time.Duration(a.Expiry-c.Now().Unix()) * time.Second)
	c.ApplyBlock(t)
	s = service(t, c, 1)
	if len(s.Replicas) != 1 || s.Replicas[0].Provider != prov3.Addr {
		t.Fatalf("after prov2's attestation lapsed: replicas %+v, want one on prov3", s.Replicas)
	}
	if n := len(s.Ended); n != 1 || s.Ended[0].Provider != prov2.Addr || s.Ended[0].Code != ledger.EndTEELapsed {
		t.Fatalf("ended %+v, want prov2's replica with %s", s.Ended, ledger.EndTEELapsed)
	}
	if len(s.Excluded) != 0 || s.Failures != 0 {
		t.Fatalf("lapse excluded %v, failures %d; want neither", s.Excluded, s.Failures)
	}
	if s := service(t, c, 2); len(s.Replicas) != 1 || s.Replicas[0].Provider != prov1.Addr {
		t.Fatalf("the plain service moved: %+v", s.Replicas)
	}
	if m := cpuMarket(t, c); m.TEE.ReservedUnits != 1 || m.TEE.OfferedUnits != 16 {
		t.Fatalf("TEE market after the lapse: %+v, want prov3's 16 cores offered, 1 reserved", m.TEE)
	}
}

// TestTEEServiceSpecChecks: a service spec's trust and measurements are
// checked as a job's are.
func TestTEEServiceSpecChecks(t *testing.T) {
	for _, bad := range []func(*ledger.ServiceSpec){
		func(s *ledger.ServiceSpec) { s.Trust = "sgx" },
		func(s *ledger.ServiceSpec) { s.Trust, s.TEEMeasurements = "", []string{"ab"} },
		func(s *ledger.ServiceSpec) { s.TEEMeasurements = []string{"AB"} },
		func(s *ledger.ServiceSpec) { s.TEEMeasurements = make([]string, 17) },
	} {
		s := teeService("bad")
		bad(&s)
		if err := s.Validate(); !errors.Is(err, ledger.ErrInvalidMsg) {
			t.Errorf("service trust %q measurements %q: %v, want invalid", s.Trust, s.TEEMeasurements, err)
		}
	}
	s := teeService("ok")
	s.TEEMeasurements = []string{strings.Repeat("ab", 48)}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestTEEServiceKeyChangeReplaces: a trust: tee service's replica ends
// (tee_lapsed) when its provider declares another encryption key than the
// attested one, and the service waits for an attested provider; a plain
// service's replica there stays.
func TestTEEServiceKeyChangeReplaces(t *testing.T) {
	c := teeServiceChain(t)
	attestNow(t, c, prov2)
	must(t, []ledger.TxResult{deploy(t, c, teeService("conf"), 10_000_000)})
	plain := lt.ServiceSpec("plain", 200_000)
	plain.Replicas = 3
	must(t, []ledger.TxResult{deploy(t, c, plain, 10_000_000)})
	if s := service(t, c, 1); len(s.Replicas) != 1 || s.Replicas[0].Provider != prov2.Addr {
		t.Fatalf("tee service: replicas %+v, want one on prov2", s.Replicas)
	}
	pi := provider(t, c, prov2).ProviderInfo
	pi.EncryptionKey = lt.AgeKey("another")
	must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgUpdateProvider{ProviderInfo: pi})})
	s := service(t, c, 1)
	if len(s.Replicas) != 0 || len(s.Ended) != 1 || s.Ended[0].Code != ledger.EndTEELapsed || s.Wait == nil || s.Wait.Miss == nil || s.Wait.Miss.TEE != 3 {
		t.Fatalf("after prov2's key changed: replicas %+v, ended %+v, wait %+v", s.Replicas, s.Ended, s.Wait)
	}
	if s := service(t, c, 2); len(s.Replicas) != 3 {
		t.Fatalf("plain service lost replicas: %+v", s.Replicas)
	}
	if m := cpuMarket(t, c); m.TEE.OfferedUnits != 0 || m.TEE.ReservedUnits != 0 {
		t.Fatalf("TEE market after the key change: %+v", m.TEE)
	}
}
