package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// witnessKey is the tx key of validator name's node: its consensus key.
func witnessKey(name string) lt.Key {
	return lt.Key{Priv: lt.ConsPriv(name), Addr: address.FromPubKey(lt.ConsKey(name))}
}

// witnessChain is serviceChain with the named genesis validators, whose
// nodes are the witnesses, and the given params.
func witnessChain(t *testing.T, validators []string, tune ...func(*ledger.Params)) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "consumer", "prov1", "prov2", "prov3")
	g.Params.LivenessRatePPM = 0
	for _, v := range validators {
		g.Validators = append(g.Validators, lt.GenesisValidator(v, g.Params.MinValidatorStake))
	}
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

func params(t *testing.T, c *lt.Chain) ledger.Params {
	t.Helper()
	p, err := ledger.GetParams(c.KV)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// period is the billing period of the chain's last block.
func period(t *testing.T, c *lt.Chain) uint64 {
	return ledger.ServePeriod(c.Now().Unix(), params(t, c))
}

func attestServed(t *testing.T, c *lt.Chain, witness string, k uint64, rs ...ledger.ServedReplica) ledger.TxResult {
	t.Helper()
	return send(t, c, witnessKey(witness), &ledger.MsgAttestServed{Period: k, Replicas: rs})
}

func wantRefused(t *testing.T, res ledger.TxResult, class error, text string) {
	t.Helper()
	if !errors.Is(res.Err, class) || !strings.Contains(res.Err.Error(), text) {
		t.Fatalf("got %v, want %v containing %q", res.Err, class, text)
	}
}

// nextPeriod advances the chain into the next billing period, keeping the
// provider's heartbeats going.
func nextPeriod(t *testing.T, c *lt.Chain, k lt.Key, ids ...uint64) {
	t.Helper()
	p := params(t, c)
	cur := period(t, c)
	for period(t, c) == cur {
		c.Advance(time.Duration(p.ServiceServePeriod/3) * time.Second)
		must(t, []ledger.TxResult{heartbeat(t, c, k, true, ids...)})
	}
}

// TestServePaidOnlyWhenWitnessed: with three validators and
// service_serve_witnesses 2, the provider's ready heartbeats pay nothing;
// one witness is not enough; the second pays the seconds of the period the
// replica was ready, cumulatively; a third adds nothing; periods no one
// attested stay unpaid; forged, repeated, stale and early attestations are
// refused.
func TestServePaidOnlyWhenWitnessed(t *testing.T) {
	c := witnessChain(t, []string{"v1", "v2", "v3"})
	p := params(t, c)
	if got := ledger.ServeWitnessesNeeded(c.KV, p); got != 2 {
		t.Fatalf("witnesses needed %d, want 2", got)
	}
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 10_000_000)})
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	readyAt := service(t, c, 1).Replicas[0].ReadyAt
	first := ledger.ServePeriod(readyAt, p)
	for range 4 {
		nextPeriod(t, c, prov1, 1)
	}
	s := service(t, c, 1)
	if r := s.Replicas[0]; r.Paid != 0 || r.ReadySeconds != 0 || s.Cost != 0 {
		t.Fatalf("paid %d for %d s on heartbeats alone (cost %d), want 0", r.Paid, r.ReadySeconds, s.Cost)
	}
	me := ledger.ServedReplica{ServiceID: 1, Provider: prov1.Addr}
	cur := period(t, c)
	k := cur - 1 // over, open to attestations, a whole period of ready time
	if k <= first {
		t.Fatalf("period %d not after the ready period %d", k, first)
	}
	// Refused: a key that is no validator's (the provider attesting
	// itself, or a node anyone can start), a period not over, a stale one.
	wantRefused(t, send(t, c, prov1, &ledger.MsgAttestServed{Period: k, Replicas: []ledger.ServedReplica{me}}), ledger.ErrNotServiceParty, "not a validator")
	wantRefused(t, attestServed(t, c, "v4", k, me), ledger.ErrNotServiceParty, "not a validator")
	wantRefused(t, attestServed(t, c, "v1", cur, me), ledger.ErrServiceState, "not over")
	wantRefused(t, attestServed(t, c, "v1", cur-5, me), ledger.ErrServiceState, "stale")

	must(t, []ledger.TxResult{attestServed(t, c, "v1", k, me)})
	if r := service(t, c, 1).Replicas[0]; r.Paid != 0 {
		t.Fatalf("paid %d on one witness of two", r.Paid)
	}
	wantRefused(t, attestServed(t, c, "v1", k, me), ledger.ErrServiceState, "already attested")
	provBefore := c.Balance(t, prov1.Addr)
	res := attestServed(t, c, "v2", k, me)
	must(t, []ledger.TxResult{res})
	s = service(t, c, 1)
	r := s.Replicas[0]
	if r.ReadySeconds != p.ServiceServePeriod || r.Paid != 36_000*p.ServiceServePeriod/3600 || r.ServedPeriod != k {
		t.Fatalf("after two witnesses: %d s paid %d (served period %d), want %d s paid %d (period %d)",
			r.ReadySeconds, r.Paid, r.ServedPeriod, p.ServiceServePeriod, 36_000*p.ServiceServePeriod/3600, k)
	}
	if res.Events[0].Type != "service_replica_served" {
		t.Errorf("events %v, want service_replica_served", res.Events)
	}
	checkPaid(t, s)
	if s.Cost != r.Paid || s.Fee != fee(r.Paid) || c.Balance(t, prov1.Addr)-provBefore != r.Paid {
		t.Errorf("cost %d fee %d, provider got %d; want %d, %d, %d", s.Cost, s.Fee, c.Balance(t, prov1.Addr)-provBefore, r.Paid, fee(r.Paid), r.Paid)
	}
	// A third witness adds nothing; the second cannot repeat itself.
	must(t, []ledger.TxResult{attestServed(t, c, "v3", k, me)})
	wantRefused(t, attestServed(t, c, "v2", k, me), ledger.ErrServiceState, "already attested")
	if got := service(t, c, 1).Replicas[0]; got.Paid != r.Paid || got.ReadySeconds != r.ReadySeconds {
		t.Fatalf("a third witness changed the pay: %d for %d s, was %d for %d s", got.Paid, got.ReadySeconds, r.Paid, r.ReadySeconds)
	}
	// The period it became ready in pays only its ready part, once two
	// witnesses say so; periods k-1 … first+1, never attested, stay unpaid.
	if first+serveWindow < cur {
		t.Fatalf("the ready period %d is no longer open in period %d", first, cur)
	}
	must(t, []ledger.TxResult{attestServed(t, c, "v1", first, me)})
	must(t, []ledger.TxResult{attestServed(t, c, "v3", first, me)})
	part := (first+1)*p.ServiceServePeriod - uint64(readyAt)
	if got := service(t, c, 1).Replicas[0]; got.ReadySeconds != p.ServiceServePeriod+part || part == 0 || part > p.ServiceServePeriod {
		t.Fatalf("ready seconds %d after the first period's attestations, want %d + %d", got.ReadySeconds, p.ServiceServePeriod, part)
	}
	checkPaid(t, service(t, c, 1))
	// The stop pays nothing more: no witness saw the time since.
	paid := service(t, c, 1).Replicas[0].Paid
	c.Advance(40 * time.Second)
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgStopService{ServiceID: 1})})
	s = service(t, c, 1)
	if s.Cost != paid || s.Ended[0].Paid != paid {
		t.Fatalf("stopped: cost %d, replica paid %d; want %d (nothing unwitnessed)", s.Cost, s.Ended[0].Paid, paid)
	}
	checkPaid(t, s)
}

// serveWindow mirrors the ledger's attest window (serveAttestWindow).
const serveWindow = 4

// TestServeUnwitnessedReleased: of two replicas, the one no witness sees
// is released at its provider's heartbeat once quorums saw the other
// serve for service_unwitnessed_periods periods, without a slash, and is
// replaced; while no replica anywhere is witnessed (the witnesses are
// down), no replica is released.
func TestServeUnwitnessedReleased(t *testing.T) {
	c := witnessChain(t, []string{"v1"}, func(p *ledger.Params) { p.ServiceUnwitnessedPeriods = 3 })
	p := params(t, c)
	if got := ledger.ServeWitnessesNeeded(c.KV, p); got != 1 {
		t.Fatalf("witnesses needed on a one-validator chain: %d, want 1 (never more than the set)", got)
	}
	spec := lt.ServiceSpec("tinylm", 200_000)
	spec.Replicas = 2
	must(t, []ledger.TxResult{deploy(t, c, spec, 50_000_000)})
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	must(t, []ledger.TxResult{heartbeat(t, c, prov2, true, 1)})
	// The witnesses are down: many periods pass, nothing is paid, and
	// nobody is released for it.
	for range 12 {
		nextPeriod(t, c, prov1, 1)
		must(t, []ledger.TxResult{heartbeat(t, c, prov2, true, 1)})
	}
	s := service(t, c, 1)
	if len(s.Replicas) != 2 || s.Cost != 0 {
		t.Fatalf("witnesses down: replicas %+v, cost %d; want both kept, nothing paid", s.Replicas, s.Cost)
	}
	stake := provider(t, c, prov2).Stake
	// The witness sees prov1's replica serve each period, never prov2's.
	released := false
	for range 3 + serveWindow + 2 {
		nextPeriod(t, c, prov1, 1)
		must(t, []ledger.TxResult{attestServed(t, c, "v1", period(t, c)-1, ledger.ServedReplica{ServiceID: 1, Provider: prov1.Addr})})
		must(t, []ledger.TxResult{heartbeat(t, c, prov2, true, 1)})
		s = service(t, c, 1)
		if n := len(s.Ended); n > 0 {
			e := s.Ended[n-1]
			if e.Provider != prov2.Addr || e.Code != ledger.EndUnwitnessed || e.Seconds != 3*p.ServiceServePeriod || e.Paid != 0 {
				t.Fatalf("ended %+v, want prov2's replica, unwitnessed, unpaid", e)
			}
			released = true
			break
		}
	}
	if !released {
		t.Fatalf("the unwitnessed replica was never released: %+v", s.Replicas)
	}
	if got := provider(t, c, prov2).Stake; got != stake {
		t.Errorf("prov2's stake %d after release, was %d: an unwitnessed replica is not slashed", got, stake)
	}
	if s.Replicas[0].Provider != prov1.Addr || s.Replicas[0].Paid == 0 {
		t.Errorf("the witnessed replica: %+v, want prov1's, paid", s.Replicas[0])
	}
	if len(s.Replicas) != 2 || s.Replicas[1].Provider != prov3.Addr {
		t.Errorf("replicas %+v, want prov1's and a replacement on prov3", s.Replicas)
	}
	checkPaid(t, s)
}

func TestAttestServedValidateBasic(t *testing.T) {
	a, b := ledger.ServedReplica{ServiceID: 1, Provider: prov1.Addr}, ledger.ServedReplica{ServiceID: 2, Provider: prov1.Addr}
	for _, tc := range []struct {
		name string
		m    ledger.MsgAttestServed
		want string
	}{
		{"period 0", ledger.MsgAttestServed{Replicas: []ledger.ServedReplica{a}}, "period is 0"},
		{"empty", ledger.MsgAttestServed{Period: 9}, "want 1 to"},
		{"repeated", ledger.MsgAttestServed{Period: 9, Replicas: []ledger.ServedReplica{a, a}}, "out of order or repeated"},
		{"unsorted", ledger.MsgAttestServed{Period: 9, Replicas: []ledger.ServedReplica{b, a}}, "out of order or repeated"},
		{"no provider", ledger.MsgAttestServed{Period: 9, Replicas: []ledger.ServedReplica{{ServiceID: 1}}}, "provider is empty"},
		{"no service", ledger.MsgAttestServed{Period: 9, Replicas: []ledger.ServedReplica{{Provider: prov1.Addr}}}, "service_id is 0"},
		{"too many", ledger.MsgAttestServed{Period: 9, Replicas: make([]ledger.ServedReplica, ledger.MaxServedReplicas+1)}, "want 1 to"},
	} {
		err := tc.m.ValidateBasic()
		if !errors.Is(err, ledger.ErrInvalidMsg) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidMsg containing %q", tc.name, err, tc.want)
		}
	}
	if err := (&ledger.MsgAttestServed{Period: 9, Replicas: []ledger.ServedReplica{a, b}}).ValidateBasic(); err != nil {
		t.Errorf("a sorted list: %v", err)
	}
}

// TestServeBudgetEnds: with witnesses, a service whose budget runs out
// pays its replica for the witnessed periods up to the last of the
// escrow, and stops with nearly nothing refunded (the periods attested
// after its end are paid before it stops); the accounts add up.
func TestServeBudgetEnds(t *testing.T) {
	c := witnessChain(t, []string{"v1"})
	// 10 usync a second + 1%: about 600 s of budget, twenty periods.
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 6_060)})
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	me := ledger.ServedReplica{ServiceID: 1, Provider: prov1.Addr}
	for range 40 {
		nextPeriod(t, c, prov1, 1)
		if s := service(t, c, 1); s.Done() {
			break
		}
		must(t, []ledger.TxResult{attestServed(t, c, "v1", period(t, c)-1, me)})
	}
	s := service(t, c, 1)
	if !s.Done() || s.Wait == nil || s.Wait.Code != ledger.WaitBudgetRanOut {
		t.Fatalf("service %s (%+v), want stopped by its budget", s.State, s.Wait)
	}
	t.Logf("budget %d: cost %d, fee %d, refund %d; the replica paid for %d s", s.Budget, s.Cost, s.Fee, s.Refund, s.Ended[0].ReadySeconds)
	if s.Refund > 36_000*10/3600 {
		t.Errorf("refund %d of budget %d: more than 10 s of pay left unspent (the last periods' attestations came after the stop?)", s.Refund, s.Budget)
	}
	if s.Cost+s.Fee+s.Refund != s.Budget || s.Ended[0].Paid != s.Cost {
		t.Errorf("cost %d + fee %d + refund %d != budget %d, or replica paid %d", s.Cost, s.Fee, s.Refund, s.Budget, s.Ended[0].Paid)
	}
}
