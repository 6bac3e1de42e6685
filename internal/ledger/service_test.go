package ledger_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// serviceChain has a funded consumer and three registered, staked CPU
// providers that run oci, asking 36,000, 72,000 and 108,000 usync per
// core-hour (10, 20 and 30 usync a second).
func serviceChain(t *testing.T, tune ...func(*ledger.Params)) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "consumer", "prov1", "prov2", "prov3")
	g.Params.LivenessRatePPM = 0
	for _, f := range tune {
		f(&g.Params)
	}
	c := lt.NewChain(t, g)
	for i, k := range []lt.Key{prov1, prov2, prov3} {
		info := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
		info.Executors = []string{"wasm", "oci"}
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: info})})
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: 10_000_000})})
	}
	return c
}

func service(t *testing.T, c *lt.Chain, id uint64) *ledger.Service {
	t.Helper()
	s, ok, err := ledger.GetService(c.KV, id)
	if err != nil || !ok {
		t.Fatalf("service %d: ok=%v err=%v", id, ok, err)
	}
	return s
}

func deploy(t *testing.T, c *lt.Chain, spec ledger.ServiceSpec, budget uint64) ledger.TxResult {
	t.Helper()
	return send(t, c, consumer, &ledger.MsgDeployService{Spec: spec, Budget: budget, ConsumerKey: lt.AgeKey("consumer"), Public: true})
}

func heartbeat(t *testing.T, c *lt.Chain, k lt.Key, ready bool, ids ...uint64) ledger.TxResult {
	t.Helper()
	m := &ledger.MsgServiceHeartbeat{}
	for _, id := range ids {
		m.Replicas = append(m.Replicas, ledger.ReplicaStatus{ServiceID: id, Ready: ready, Relay: "http://127.0.0.1:8080"})
	}
	return send(t, c, k, m)
}

func fee(cost uint64) uint64 { return cost * 100 / 10_000 } // the default protocol_fee_bps

// checkPaid: every replica was paid exactly price × ready seconds / 3600,
// the service's accounts add up, and its fee is the fee of what it paid.
func checkPaid(t *testing.T, s *ledger.Service) {
	t.Helper()
	for _, r := range s.Replicas {
		if want := r.PricePerHour * r.ReadySeconds / 3600; r.Paid != want {
			t.Errorf("replica on %s: paid %d, want %d × %d s / 3600 = %d", r.Provider, r.Paid, r.PricePerHour, r.ReadySeconds, want)
		}
	}
	if s.Cost+s.Fee+s.Refund+s.Escrow != s.Budget {
		t.Errorf("cost %d + fee %d + refund %d + escrow %d != budget %d", s.Cost, s.Fee, s.Refund, s.Escrow, s.Budget)
	}
}

func TestServiceDeployHeartbeatPaysExactly(t *testing.T) {
	c := serviceChain(t)
	before, provBefore := c.Balance(t, consumer.Addr), c.Balance(t, prov1.Addr)
	res := deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 10_000_000)
	must(t, []ledger.TxResult{res})
	if res.Events[0].Type != "service_deployed" {
		t.Fatalf("events %v", res.Events)
	}
	s := service(t, c, 1)
	if len(s.Replicas) != 1 || s.Replicas[0].Provider != prov1.Addr || s.Replicas[0].PricePerHour != 36_000 {
		t.Fatalf("replicas %+v (%s), want one on prov1 at 36000/h", s.Replicas, s.Reason)
	}
	if got := ledger.ServicesOfProvider(c.KV, prov1.Addr); !slices.Equal(got, []uint64{1}) {
		t.Errorf("ServicesOfProvider = %v", got)
	}
	if got := ledger.ServicesForModel(c.KV, "tinylm"); !slices.Equal(got, []uint64{1}) {
		t.Errorf("ServicesForModel = %v", got)
	}
	if p := provider(t, c, prov1); p.Jobs != 1 {
		t.Errorf("prov1 holds %d slots, want 1", p.Jobs)
	}
	// Starting: reported, not ready, not paid.
	c.Advance(10 * time.Second)
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, false, 1)})
	if s = service(t, c, 1); s.Replicas[0].Paid != 0 || s.Replicas[0].ReadyAt != 0 {
		t.Fatalf("paid %d before ready", s.Replicas[0].Paid)
	}
	c.Advance(7 * time.Second)
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	s = service(t, c, 1)
	readyAt := s.Replicas[0].ReadyAt
	if readyAt == 0 || s.Replicas[0].Paid != 0 {
		t.Fatalf("first ready: %+v", s.Replicas[0])
	}
	for _, d := range []time.Duration{29, 31, 13, 47} {
		c.Advance(d * time.Second)
		must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	}
	s = service(t, c, 1)
	r := s.Replicas[0]
	if want := uint64(r.HeartbeatAt - readyAt); r.ReadySeconds != want {
		t.Fatalf("ready seconds %d, want %d (from first ready to last report)", r.ReadySeconds, want)
	}
	checkPaid(t, s)
	if s.Cost != r.Paid || s.Fee != fee(r.Paid) {
		t.Errorf("cost %d fee %d, want %d and %d", s.Cost, s.Fee, r.Paid, fee(r.Paid))
	}
	if got := c.Balance(t, prov1.Addr) - provBefore; got != r.Paid {
		t.Errorf("prov1 earned %d, paid %d", got, r.Paid)
	}
	if got := before - c.Balance(t, consumer.Addr); got != s.Budget {
		t.Errorf("consumer paid %d, budget %d", got, s.Budget)
	}
	// Not ready at one report: the time to the next is not paid.
	c.Advance(20 * time.Second)
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, false, 1)})
	paid := service(t, c, 1).Replicas[0].Paid
	c.Advance(20 * time.Second)
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	s = service(t, c, 1)
	if s.Replicas[0].Paid != paid {
		t.Errorf("paid %d for time it was not ready (was %d)", s.Replicas[0].Paid, paid)
	}
	checkPaid(t, s)
	// A report on a service it has no replica of is skipped.
	must(t, []ledger.TxResult{heartbeat(t, c, prov2, true, 1, 99)})
	if len(service(t, c, 1).Replicas) != 1 {
		t.Fatal("a stranger's report changed the service")
	}
}

func TestServiceBudgetWarningThenStop(t *testing.T) {
	c := serviceChain(t)
	before := c.Balance(t, consumer.Addr)
	// 20,000 usync at 10 usync a second + 1% lasts about 1980 s: less
	// than the hour's warning, so the first ready report warns.
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 20_000)})
	res := heartbeat(t, c, prov1, true, 1)
	must(t, []ledger.TxResult{res})
	if !slices.ContainsFunc(res.Events, func(e ledger.Event) bool { return e.Type == "service_budget_low" }) {
		t.Fatalf("no budget warning: %v", res.Events)
	}
	s := service(t, c, 1)
	warned, runsOut := s.BudgetWarnedAt, s.RunsOutAt
	if warned == 0 || runsOut < warned+1900 || runsOut > warned+2000 {
		t.Fatalf("warned at %d, runs out at %d", warned, runsOut)
	}
	for i := 0; service(t, c, 1).State == ledger.ServiceActive; i++ {
		if i > 100 {
			t.Fatal("the budget never ran out")
		}
		c.Advance(60 * time.Second)
		heartbeat(t, c, prov1, true, 1)
	}
	s = service(t, c, 1)
	if w := s.Wait; w == nil || w.Code != ledger.WaitBudgetRanOut || w.At != s.StoppedAt || w.Warned == 0 {
		t.Errorf("wait %+v", s.Wait)
	}
	if s.Escrow != 0 || len(s.Replicas) != 0 || s.Cost+s.Fee+s.Refund != 20_000 {
		t.Errorf("after the end: escrow %d, %d replicas, cost %d fee %d refund %d", s.Escrow, len(s.Replicas), s.Cost, s.Fee, s.Refund)
	}
	if s.Refund > 20 {
		t.Errorf("refund %d: the budget should have been spent to within a second or two", s.Refund)
	}
	if got := before - c.Balance(t, consumer.Addr); got != s.Cost+s.Fee {
		t.Errorf("consumer paid %d, cost + fee %d", got, s.Cost+s.Fee)
	}
	end := s.Ended[len(s.Ended)-1]
	if end.Paid != s.Cost || provider(t, c, prov1).Jobs != 0 {
		t.Errorf("ended replica paid %d (cost %d), prov1 holds %d slots", end.Paid, s.Cost, provider(t, c, prov1).Jobs)
	}
	if len(ledger.ServicesOfProvider(c.KV, prov1.Addr)) != 0 || len(ledger.ServicesForModel(c.KV, "tinylm")) != 0 {
		t.Error("stopped service still indexed")
	}
}

func TestServiceHeartbeatTimeoutReplaces(t *testing.T) {
	c := serviceChain(t)
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 10_000_000)})
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	c.Advance(30 * time.Second)
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	paid := service(t, c, 1).Replicas[0].Paid
	repBefore := provider(t, c, prov1).Reputation
	c.Advance(125 * time.Second) // past service_heartbeat_timeout
	c.ApplyBlock(t)
	s := service(t, c, 1)
	if len(s.Replicas) != 1 || s.Replicas[0].Provider != prov2.Addr {
		t.Fatalf("replicas %+v (%s), want one on prov2", s.Replicas, s.Reason)
	}
	end := s.Ended[0]
	if end.Provider != prov1.Addr || end.Code != ledger.EndSilent || end.Paid != paid {
		t.Errorf("ended %+v, want prov1 stopped reporting, paid %d (to its last report)", end, paid)
	}
	if !slices.Contains(s.Excluded, prov1.Addr) || s.Failures != 0 {
		t.Errorf("excluded %v failures %d", s.Excluded, s.Failures)
	}
	// As a job's provider that does not report in time: its pay stops
	// at its last report, its slot goes; no slash, no reputation change.
	p := provider(t, c, prov1)
	if p.Jobs != 0 || p.Slashed != 0 || p.Reputation != repBefore {
		t.Errorf("prov1 after the drop: %d slots, slashed %d, reputation %d (was %d)", p.Jobs, p.Slashed, p.Reputation, repBefore)
	}
	checkPaid(t, s)
	// A replica that never reports is dropped a timeout after placement.
	c.Advance(125 * time.Second)
	c.ApplyBlock(t)
	if s = service(t, c, 1); s.Replicas[0].Provider != prov3.Addr || len(s.Excluded) != 2 {
		t.Fatalf("replicas %+v, excluded %v", s.Replicas, s.Excluded)
	}
}

func TestServiceOfflineProviderDropped(t *testing.T) {
	c := serviceChain(t)
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 10_000_000)})
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgSetProviderStatus{Online: false})})
	s := service(t, c, 1)
	if len(s.Replicas) != 1 || s.Replicas[0].Provider != prov2.Addr || s.Ended[0].Code != ledger.EndOffline {
		t.Fatalf("replicas %+v ended %+v", s.Replicas, s.Ended)
	}
}

func TestServiceReleaseEvictScaleStop(t *testing.T) {
	c := serviceChain(t)
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 10_000_000)})
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	c.Advance(20 * time.Second)
	// Release: paid to now, excluded, a failure; replaced on prov2.
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgReleaseReplica{ServiceID: 1, Reason: "readiness failed 3 times"})})
	s := service(t, c, 1)
	end := s.Ended[0]
	if end.Code != ledger.EndReleased || end.Text != "readiness failed 3 times" || end.Why != "" || end.Paid != 36_000*uint64(end.EndedAt-end.ReadyAt)/3600 || s.Failures != 1 {
		t.Fatalf("release: %+v failures %d", end, s.Failures)
	}
	if s.Replicas[0].Provider != prov2.Addr || !slices.Contains(s.Excluded, prov1.Addr) {
		t.Fatalf("after release: %+v excluded %v", s.Replicas, s.Excluded)
	}
	// Evict: excluded, not a failure; replaced on prov3.
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgEvictReplica{ServiceID: 1, Provider: prov2.Addr, Reason: "does not answer"})})
	if s = service(t, c, 1); s.Failures != 1 || s.Replicas[0].Provider != prov3.Addr || len(s.Excluded) != 2 {
		t.Fatalf("evict: %+v failures %d excluded %v", s.Replicas, s.Failures, s.Excluded)
	}
	// Scale up: no provider left that is not excluded.
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgScaleService{ServiceID: 1, Replicas: 3})})
	if s = service(t, c, 1); len(s.Replicas) != 1 || s.WaitCode == "" || s.Wait == nil || s.Wait.Code != ledger.WaitUnplaced || s.Wait.Miss == nil || s.Wait.Miss.Excluded != 2 || s.Wait.Miss.Need != 2 {
		t.Fatalf("scale up with all others excluded: %d replicas, wait %q, %+v; want the 2 excluded counted", len(s.Replicas), s.WaitCode, s.Wait)
	}
	// Scale down to 1: nothing to end, no longer waiting.
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgScaleService{ServiceID: 1, Replicas: 1})})
	if s = service(t, c, 1); s.WaitCode != "" || s.Wait != nil || s.Reason != "" {
		t.Fatalf("after scale down: wait %q %+v reason %q", s.WaitCode, s.Wait, s.Reason)
	}
	before := c.Balance(t, consumer.Addr)
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgStopService{ServiceID: 1})})
	s = service(t, c, 1)
	if s.State != ledger.ServiceStopped || s.Wait == nil || s.Wait.Code != ledger.WaitStoppedByOwner || s.Wait.At != s.StoppedAt || s.Escrow != 0 {
		t.Fatalf("stop: %s %+v escrow %d", s.State, s.Wait, s.Escrow)
	}
	if got := c.Balance(t, consumer.Addr) - before; got != s.Refund {
		t.Errorf("refunded %d, record says %d", got, s.Refund)
	}
	checkPaid(t, s)
	for _, k := range []lt.Key{prov1, prov2, prov3} {
		if provider(t, c, k).Jobs != 0 {
			t.Errorf("%s still holds a slot", k.Addr)
		}
	}
	n := 0
	ledger.ActiveServices(c.KV, func(uint64) bool { n++; return true })
	if n != 0 {
		t.Errorf("%d active services after stop", n)
	}
}

func TestServiceScaleEndsDearestFirst(t *testing.T) {
	c := serviceChain(t)
	spec := lt.ServiceSpec("tinylm", 200_000)
	spec.Replicas = 3
	must(t, []ledger.TxResult{deploy(t, c, spec, 10_000_000)})
	if s := service(t, c, 1); len(s.Replicas) != 3 {
		t.Fatalf("%d replicas (%s)", len(s.Replicas), s.Reason)
	}
	must(t, []ledger.TxResult{heartbeat(t, c, prov3, true, 1)})
	c.Advance(36 * time.Second)
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgScaleService{ServiceID: 1, Replicas: 1})})
	s := service(t, c, 1)
	if len(s.Replicas) != 1 || s.Replicas[0].Provider != prov1.Addr {
		t.Fatalf("kept %+v, want the cheapest (prov1)", s.Replicas)
	}
	// prov3 (the dearest) ended first, paid to now: 36 s at 108,000/h.
	if e := s.Ended[0]; e.Provider != prov3.Addr || e.Paid != 108_000*uint64(e.EndedAt-e.ReadyAt)/3600 || e.Paid == 0 {
		t.Errorf("first ended %+v", e)
	}
	if provider(t, c, prov2).Jobs != 0 || provider(t, c, prov3).Jobs != 0 || len(s.Excluded) != 0 {
		t.Error("scaled-away providers still hold slots, or were excluded")
	}
}

func TestServiceFailsAfterRepeatedFailures(t *testing.T) {
	c := serviceChain(t, func(p *ledger.Params) { p.ServiceMaxFailures = 2 })
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 10_000_000)})
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgReleaseReplica{ServiceID: 1, Reason: "crashed"})})
	must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgReleaseReplica{ServiceID: 1, Reason: "crashed"})})
	s := service(t, c, 1)
	if w := s.Wait; s.State != ledger.ServiceFailed || w == nil || w.Code != ledger.WaitReplicasFailed || w.Count != 2 ||
		w.Cause != ledger.EndReleased || w.Text != "crashed" || s.Refund != s.Budget {
		t.Fatalf("after 2 failures: %s %+v refund %d", s.State, s.Wait, s.Refund)
	}
}

func TestServiceAccess(t *testing.T) {
	c := serviceChain(t)
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 10_000_000)})
	k := ledger.ServiceKeyHash("sk-gpunet-test")
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSetServiceAccess{ServiceID: 1, KeyHashes: []ledger.Hash{k}})})
	if s := service(t, c, 1); s.Public || !slices.Equal(s.KeyHashes, []ledger.Hash{k}) {
		t.Fatalf("access: public %v keys %v", s.Public, s.KeyHashes)
	}
	// sha256("") starts e3b0c442.
	if h := ledger.ServiceKeyHash(""); h[0] != 0xe3 || h[1] != 0xb0 || h[2] != 0xc4 || h[3] != 0x42 {
		t.Errorf("ServiceKeyHash(\"\") = %x", h)
	}
}

func TestServiceTopUpReArmsWarning(t *testing.T) {
	c := serviceChain(t)
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 20_000)})
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	s := service(t, c, 1)
	runsOut := s.RunsOutAt
	must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgTopUpService{ServiceID: 1, Amount: 100_000_000})})
	s = service(t, c, 1)
	if s.BudgetWarnedAt != 0 || s.RunsOutAt <= runsOut || s.Budget != 100_020_000 {
		t.Fatalf("after top-up: warned %d runs out %d (was %d) budget %d", s.BudgetWarnedAt, s.RunsOutAt, runsOut, s.Budget)
	}
}

func TestServiceRefusals(t *testing.T) {
	c := serviceChain(t)
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 10_000_000)})
	spec := func(f func(*ledger.ServiceSpec)) ledger.ServiceSpec {
		s := lt.ServiceSpec("tinylm", 200_000)
		f(&s)
		return s
	}
	dep := func(s ledger.ServiceSpec, budget uint64) ledger.Msg {
		return &ledger.MsgDeployService{Spec: s, Budget: budget, ConsumerKey: lt.AgeKey("consumer"), Public: true}
	}
	poor := lt.NewKey("poor")
	for _, tc := range []struct {
		name string
		from lt.Key
		msg  ledger.Msg
		want error
		text string
	}{
		{"bad image", consumer, dep(spec(func(s *ledger.ServiceSpec) { s.Image = "ubuntu:latest" }), 10_000_000), ledger.ErrInvalidMsg, "by digest"},
		{"no ports", consumer, dep(spec(func(s *ledger.ServiceSpec) { s.Ports = nil }), 10_000_000), ledger.ErrInvalidMsg, "ports"},
		{"readiness port undeclared", consumer, dep(spec(func(s *ledger.ServiceSpec) { s.Readiness.Port = 9000 }), 10_000_000), ledger.ErrInvalidMsg, "readiness.port"},
		{"openai on tcp", consumer, dep(spec(func(s *ledger.ServiceSpec) { s.Ports[0].Protocol = ledger.PortTCP; s.Readiness.Path = "" }), 10_000_000), ledger.ErrInvalidMsg, "openai.port"},
		{"bad model", consumer, dep(spec(func(s *ledger.ServiceSpec) { s.OpenAI.Models = []string{"a b"} }), 10_000_000), ledger.ErrInvalidMsg, "openai.models"},
		{"model twice", consumer, dep(spec(func(s *ledger.ServiceSpec) { s.OpenAI.Models = []string{"m", "m"} }), 10_000_000), ledger.ErrInvalidMsg, "twice"},
		{"17 replicas", consumer, dep(spec(func(s *ledger.ServiceSpec) { s.Replicas = 17 }), 10_000_000), ledger.ErrInvalidMsg, "replicas"},
		{"gpu models without count", consumer, dep(spec(func(s *ledger.ServiceSpec) { s.GPUModels = []string{"RTX_4090"} }), 10_000_000), ledger.ErrInvalidMsg, "count is 0"},
		{"bad env key", consumer, dep(spec(func(s *ledger.ServiceSpec) { s.Env = map[string]string{"1X": "y"} }), 10_000_000), ledger.ErrInvalidMsg, "env key"},
		{"private without keys", consumer, &ledger.MsgDeployService{Spec: lt.ServiceSpec("x", 200_000), Budget: 10_000_000, ConsumerKey: lt.AgeKey("consumer")}, ledger.ErrInvalidMsg, "access key"},
		{"budget too small", consumer, dep(lt.ServiceSpec("x", 200_000), 3_000), ledger.ErrInvalidMsg, "covers less than a minute of 1 replicas"},
		{"budget above balance", poor, dep(lt.ServiceSpec("x", 200_000), 10_000_000), ledger.ErrInsufficientFunds, "balance"},
		{"unknown service", consumer, &ledger.MsgStopService{ServiceID: 99}, ledger.ErrUnknownService, "no service 99"},
		{"stop by another", prov2, &ledger.MsgStopService{ServiceID: 1}, ledger.ErrNotServiceParty, "belongs to"},
		{"scale by another", prov2, &ledger.MsgScaleService{ServiceID: 1, Replicas: 2}, ledger.ErrNotServiceParty, "belongs to"},
		{"scale to 0", consumer, &ledger.MsgScaleService{ServiceID: 1, Replicas: 0}, ledger.ErrInvalidMsg, "replicas"},
		{"access by another", prov2, &ledger.MsgSetServiceAccess{ServiceID: 1, Public: true}, ledger.ErrNotServiceParty, "belongs to"},
		{"evict a stranger", consumer, &ledger.MsgEvictReplica{ServiceID: 1, Provider: prov3.Addr}, ledger.ErrNotServiceParty, "runs no replica"},
		{"release without replica", prov2, &ledger.MsgReleaseReplica{ServiceID: 1}, ledger.ErrNotServiceParty, "runs no replica"},
		{"heartbeat from a non-provider", consumer, &ledger.MsgServiceHeartbeat{Replicas: []ledger.ReplicaStatus{{ServiceID: 1}}}, ledger.ErrUnknownProvider, ""},
		{"heartbeat bad relay", prov1, &ledger.MsgServiceHeartbeat{Replicas: []ledger.ReplicaStatus{{ServiceID: 1, Relay: "ftp://x"}}}, ledger.ErrInvalidMsg, "relay"},
		{"heartbeat twice", prov1, &ledger.MsgServiceHeartbeat{Replicas: []ledger.ReplicaStatus{{ServiceID: 1}, {ServiceID: 1}}}, ledger.ErrInvalidMsg, "twice"},
		{"empty top-up", consumer, &ledger.MsgTopUpService{ServiceID: 1}, ledger.ErrInvalidMsg, "amount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := service(t, c, 1)
			r := send(t, c, tc.from, tc.msg)
			if !errors.Is(r.Err, tc.want) || !strings.Contains(r.Err.Error(), tc.text) {
				t.Fatalf("got %v, want %v containing %q", r.Err, tc.want, tc.text)
			}
			if after := service(t, c, 1); after.Escrow != before.Escrow || len(after.Replicas) != len(before.Replicas) || after.State != before.State {
				t.Error("a refused tx changed the service")
			}
		})
	}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgStopService{ServiceID: 1})})
	for _, m := range []ledger.Msg{&ledger.MsgStopService{ServiceID: 1}, &ledger.MsgTopUpService{ServiceID: 1, Amount: 1}} {
		if r := send(t, c, consumer, m); !errors.Is(r.Err, ledger.ErrServiceState) {
			t.Errorf("%T on a stopped service: %v", m, r.Err)
		}
	}
}

// TestServiceRandomOps applies random service operations to two fresh
// chains: every block passes the invariants (supply, escrow, slots,
// indexes, accounts), and the two end with the same app hash.
func TestServiceRandomOps(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		run := func() []byte {
			c := serviceChain(t)
			rng := rand.New(rand.NewPCG(seed, 7))
			provs := []lt.Key{prov1, prov2, prov3}
			var ids []uint64
			for step := 0; step < 100; step++ {
				c.Advance(time.Duration(rng.IntN(90)) * time.Second)
				var tx []byte
				pick := func() uint64 {
					if len(ids) == 0 {
						return 1
					}
					return ids[rng.IntN(len(ids))]
				}
				seq := func(k lt.Key) uint64 { a, _ := ledger.GetAccount(c.KV, k.Addr); return a.Sequence }
				op := rng.IntN(9)
				switch op {
				case 0:
					spec := lt.ServiceSpec("svc", 200_000)
					spec.Replicas = uint64(1 + rng.IntN(3))
					tx = consumer.Tx(lt.ChainID, seq(consumer), 0, &ledger.MsgDeployService{Spec: spec, Budget: uint64(20_000 + rng.IntN(200_000)), ConsumerKey: lt.AgeKey("consumer"), Public: true})
				case 1, 2, 3:
					k := provs[rng.IntN(3)]
					// A provider reports on every service, as an agent that
					// lists its replicas; reports on others are skipped.
					m := &ledger.MsgServiceHeartbeat{}
					for _, id := range append([]uint64{1}, ids[min(1, len(ids)):]...) {
						m.Replicas = append(m.Replicas, ledger.ReplicaStatus{ServiceID: id, Ready: rng.IntN(4) > 0})
					}
					tx = k.Tx(lt.ChainID, seq(k), 0, m)
				case 4:
					k := provs[rng.IntN(3)]
					tx = k.Tx(lt.ChainID, seq(k), 0, &ledger.MsgReleaseReplica{ServiceID: pick()})
				case 5:
					tx = consumer.Tx(lt.ChainID, seq(consumer), 0, &ledger.MsgEvictReplica{ServiceID: pick(), Provider: provs[rng.IntN(3)].Addr})
				case 6:
					tx = consumer.Tx(lt.ChainID, seq(consumer), 0, &ledger.MsgScaleService{ServiceID: pick(), Replicas: uint64(1 + rng.IntN(3))})
				case 7:
					tx = consumer.Tx(lt.ChainID, seq(consumer), 0, &ledger.MsgTopUpService{ServiceID: pick(), Amount: uint64(1 + rng.IntN(50_000))})
				case 8:
					if rng.IntN(4) == 0 {
						tx = consumer.Tx(lt.ChainID, seq(consumer), 0, &ledger.MsgStopService{ServiceID: pick()})
					} else {
						k := provs[rng.IntN(3)]
						tx = k.Tx(lt.ChainID, seq(k), 0, &ledger.MsgSetProviderStatus{Online: rng.IntN(3) > 0})
					}
				}
				// Invariants are checked after every block.
				if r := c.ApplyBlock(t, tx); op == 0 && r[0].Err == nil {
					ids = append(ids, uint64(len(ids)+1))
				}
			}
			var cost, ended uint64
			for _, id := range ids {
				sv := service(t, c, id)
				checkPaid(t, sv)
				cost += sv.Cost
				ended += uint64(len(sv.Ended))
			}
			if cost == 0 || ended == 0 {
				t.Errorf("seed %d: the operations paid %d and ended %d replicas: the test exercises too little", seed, cost, ended)
			}
			return c.Hash
		}
		if a, b := run(), run(); !bytes.Equal(a, b) {
			t.Fatalf("seed %d: app hashes differ: %x vs %x", seed, a, b)
		}
	}
}

// TestServiceSpecValidate: the rules a service shares with an oci job are
// JobSpec's; the service's own are its ports, readiness and models.
func TestServiceSpecValidate(t *testing.T) {
	ok := lt.ServiceSpec("tinylm", 200_000)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	view := ok.JobView()
	if view.Executor != ledger.ExecutorOCI || view.Verification != ledger.VerifyNone || view.Image != ok.Image {
		t.Errorf("job view %+v", view)
	}
	tcp := ok
	tcp.Ports = []ledger.ServicePort{{Port: 8000, Protocol: ledger.PortHTTP}, {Port: 5432, Name: "db", Protocol: ledger.PortTCP}}
	tcp.Readiness = ledger.ServiceReadiness{Port: 5432, IntervalSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, StartSeconds: 1}
	if err := tcp.Validate(); err != nil {
		t.Errorf("tcp readiness: %v", err)
	}
	tcp.Readiness.Path = "/health"
	if err := tcp.Validate(); err == nil || !strings.Contains(err.Error(), "tcp") {
		t.Errorf("HTTP path on a tcp port: %v", err)
	}
	var zero address.Address
	if err := (&ledger.MsgEvictReplica{ServiceID: 1, Provider: zero}).ValidateBasic(); err == nil {
		t.Error("evict of the zero address accepted")
	}
}
