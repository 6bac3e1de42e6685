package openaigw

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/ledger/logprob"
)

// Replicas of a float model (logprobModel): honest ones whose
// log-probabilities differ in low bits, or at a near tie, and one that
// serves another model (it picks " bird" with a clear lead where the
// honest ones nearly tie " cat" and " dog").
func floatModels() (honest, lowBits, tie, other *logprobModel) {
	return newLogprobModel(" cat", -0.500, map[string]float64{" cat": -0.500, " dog": -0.503}),
		newLogprobModel(" cat", -0.5000004, map[string]float64{" cat": -0.5000004, " dog": -0.5030021}),
		newLogprobModel(" dog", -0.502, map[string]float64{" dog": -0.502, " cat": -0.505}),
		newLogprobModel(" bird", -0.2, map[string]float64{" bird": -0.2, " cat": -1.9})
}

// tolGateway is a gateway over rr's replicas of a service that declares a
// tolerance on log-probabilities of tolE9 (not exact), checking every
// deterministic request and collecting its disputes.
func tolGateway(t *testing.T, rr *receiptReplicas, chain string, tolE9 uint64) (*Gateway, string, func() []*ledger.MsgServiceDispute) {
	return checkGatewayFor(t, rr, "tinylm", chain, 1_000_000, func(svc *ledger.Service, o *CheckOptions) {
		svc.Spec.OpenAI.LogprobTolE9 = tolE9
		o.LogprobTolMinE9 = func() uint64 { return ledger.DefaultParams().ServiceLogprobTolMinE9 }
	})
}

// askUntil sends deterministic requests (none asking for
// log-probabilities: the gateway asks for them) until at least 8 checks
// ran and one involved provider p, or 64.
func askUntil(t *testing.T, g *Gateway, url string, p address.Address) []Check {
	involves := func(ch Check) bool {
		return slices.ContainsFunc(ch.Receipts, func(r ledger.ServiceReceipt) bool { return r.Provider == p })
	}
	for i := 0; i < 8 || (i < 64 && !slices.ContainsFunc(g.Checks(), involves)); i++ {
		stream := ""
		if i%2 == 1 {
			stream = `,"stream":true`
		}
		ask(t, url, fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"an animal %d"}],"temperature":0%s}`, i, stream))
		waitChecks(t, g, i+1)
	}
	return g.Checks()
}

// TestChecksHonestFloatReplicasNeverDisputed: on a service that declares a
// tolerance, honest replicas whose log-probabilities differ in low bits,
// or that take the other side of a near tie, are never disputed: their
// checks end agreed or tolerated.
func TestChecksHonestFloatReplicasNeverDisputed(t *testing.T) {
	honest, lowBits, tie, _ := floatModels()
	rr := newReceiptReplicasOf(t, []http.Handler{honest, lowBits, tie})
	g, url, disputes := tolGateway(t, rr, checkChain, 20_000_000)
	checks := askUntil(t, g, url, rr.provs[2])
	tolerated := 0
	for _, ch := range checks {
		switch ch.Verdict {
		case CheckTolerated:
			tolerated++
		case CheckAgreed:
		default:
			t.Errorf("honest replicas: verdict %s (%s)", ch.Verdict, ch.Err)
		}
	}
	if tolerated == 0 {
		t.Error("no check met the near tie")
	}
	if d := disputes(); len(d) != 0 {
		t.Errorf("%d disputes among honest float replicas", len(d))
	}
	if honest.asked[0] != "logprobs=true top=5" {
		t.Errorf("a replica was asked %q, want log-probabilities with 5 alternatives", honest.asked[0])
	}
}

// TestChecksDisputeAnotherModel: a replica serving another model on a
// service that declares a tolerance is disputed with the three answers,
// the dispute names it by the ledger's rule, and a real chain (ledgertest)
// on which the three providers run the service's replicas takes the
// dispute and slashes it, and only it; the same answers on a service that
// declares no tolerance are refused there.
func TestChecksDisputeAnotherModel(t *testing.T) {
	keys := []lt.Key{lt.NewKey("p0"), lt.NewKey("p1"), lt.NewKey("p2")}
	c := floatChain(t, keys, 20_000_000)
	honest, _, tie, other := floatModels()
	rr := newReceiptReplicasOf(t, []http.Handler{honest, tie, other})
	rr.chain = lt.ChainID
	for i, k := range keys {
		rr.keys[i], rr.provs[i] = k.Priv, k.Addr
	}
	g, url, disputes := tolGateway(t, rr, lt.ChainID, 20_000_000)
	checks := askUntil(t, g, url, keys[2].Addr)
	for _, ch := range checks {
		has := slices.ContainsFunc(ch.Receipts, func(r ledger.ServiceReceipt) bool { return r.Provider == keys[2].Addr })
		switch {
		case has && ch.Verdict != CheckDisputed:
			t.Errorf("a check with the other model: %s (%s), want disputed", ch.Verdict, ch.Err)
		case !has && ch.Verdict != CheckTolerated:
			t.Errorf("two honest replicas at a near tie: %s (%s), want tolerated", ch.Verdict, ch.Err)
		}
	}
	ds := disputes()
	if len(ds) == 0 {
		t.Fatal("no dispute")
	}
	for _, m := range ds {
		if err := m.ValidateBasic(); err != nil || len(m.Answers) != 3 {
			t.Fatalf("dispute with %d answers: %v", len(m.Answers), err)
		}
		var in [3]*logprob.Answer
		for i, raw := range m.Answers {
			a, err := logprob.DecodeEvidence(raw)
			if err != nil {
				t.Fatal(err)
			}
			in[i] = a
		}
		odd, ok := logprob.Judge(in, 20_000_000)
		if !ok || m.Receipts[odd].Provider != keys[2].Addr {
			t.Errorf("the dispute's odd one: %d (%v), want provider %s", odd, ok, keys[2].Addr)
		}
	}
	// The chain's time near the receipts' (signed now).
	c.Offset = time.Since(lt.BlockTime(c.Height)) + time.Second
	before := make([]uint64, len(keys))
	for i, k := range keys {
		before[i] = floatProvider(t, c, k).Stake
	}
	if r := c.ApplyBlock(t, keys[0].Tx(lt.ChainID, floatSeq(t, c, keys[0]), 0, ds[0]))[0]; r.Err != nil {
		t.Fatalf("the chain refused the gateway's dispute: %v", r.Err)
	}
	for i, k := range keys {
		after := floatProvider(t, c, k).Stake
		if slashed := after < before[i]; slashed != (i == 2) {
			t.Errorf("provider %d: stake %d → %d; slashed %v, want %v", i, before[i], after, slashed, i == 2)
		}
	}

	// On a chain whose service declares no tolerance, the same evidence
	// slashes no one.
	c2 := floatChain(t, keys, 0)
	c2.Offset = time.Since(lt.BlockTime(c2.Height)) + time.Second
	if r := c2.ApplyBlock(t, keys[0].Tx(lt.ChainID, floatSeq(t, c2, keys[0]), 0, ds[0]))[0]; !errors.Is(r.Err, ledger.ErrServiceState) {
		t.Errorf("a dispute by log-probabilities of a service without a tolerance: %v, want ErrServiceState", r.Err)
	}
}

// floatChain is a ledgertest chain on which providers keys run the three
// replicas of service 1, declaring tolerance tolE9 (0: none), ready.
func floatChain(t *testing.T, keys []lt.Key, tolE9 uint64) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "consumer", "p0", "p1", "p2")
	g.Params.LivenessRatePPM = 0
	c := lt.NewChain(t, g)
	consumer := lt.NewKey("consumer")
	send := func(k lt.Key, m ledger.Msg) {
		t.Helper()
		if r := c.ApplyBlock(t, k.Tx(lt.ChainID, floatSeq(t, c, k), 0, m))[0]; r.Err != nil {
			t.Fatalf("%T: %v", m, r.Err)
		}
	}
	for i, k := range keys {
		info := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
		info.Executors = []string{"wasm", "oci"}
		send(k, &ledger.MsgRegisterProvider{ProviderInfo: info})
		send(k, &ledger.MsgStake{Amount: 10_000_000})
	}
	spec := lt.ServiceSpec("tinylm", 200_000)
	spec.Replicas = 3
	spec.OpenAI.LogprobTolE9 = tolE9
	send(consumer, &ledger.MsgDeployService{Spec: spec, Budget: 100_000_000, ConsumerKey: lt.AgeKey("consumer"), Public: true})
	c.Advance(5 * time.Second)
	for _, k := range keys {
		send(k, &ledger.MsgServiceHeartbeat{Replicas: []ledger.ReplicaStatus{{ServiceID: 1, Ready: true, Relay: "http://127.0.0.1:8080"}}})
	}
	s, ok, err := ledger.GetService(c.KV, 1)
	if err != nil || !ok || len(s.Replicas) != 3 {
		t.Fatalf("service 1: %v %v %+v", ok, err, s)
	}
	return c
}

func floatProvider(t *testing.T, c *lt.Chain, k lt.Key) *ledger.Provider {
	t.Helper()
	p, ok, err := ledger.GetProvider(c.KV, k.Addr)
	if err != nil || !ok {
		t.Fatalf("provider %s: %v %v", k.Addr, ok, err)
	}
	return p
}

func floatSeq(t *testing.T, c *lt.Chain, k lt.Key) uint64 {
	t.Helper()
	a, err := ledger.GetAccount(c.KV, k.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return a.Sequence
}
