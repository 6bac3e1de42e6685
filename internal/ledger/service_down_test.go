package ledger_test

import (
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// downChain is witnessChain with validators of the given stakes (in units
// of the minimum validator stake), named v1, v2, …, and one ready replica
// of service 1 on prov1.
func downChain(t *testing.T, units ...uint64) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "consumer", "prov1", "prov2", "prov3")
	g.Params.LivenessRatePPM = 0
	for i, u := range units {
		g.Validators = append(g.Validators, lt.GenesisValidator("v"+string(rune('1'+i)), u*g.Params.MinValidatorStake))
	}
	c := lt.NewChain(t, g)
	for i, k := range []lt.Key{prov1, prov2, prov3} {
		info := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
		info.Executors = []string{"wasm", "oci"}
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgRegisterProvider{ProviderInfo: info})})
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStake{Amount: 10_000_000})})
	}
	must(t, []ledger.TxResult{deploy(t, c, lt.ServiceSpec("tinylm", 200_000), 10_000_000)})
	must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
	if s := service(t, c, 1); len(s.Replicas) != 1 || s.Replicas[0].Provider != prov1.Addr || s.Replicas[0].ReadyAt == 0 {
		t.Fatalf("replicas %+v, want one ready on prov1", s.Replicas)
	}
	return c
}

func reportDown(t *testing.T, c *lt.Chain, validator string, rs ...ledger.ServedReplica) ledger.TxResult {
	t.Helper()
	return send(t, c, witnessKey(validator), &ledger.MsgReportReplicaDown{Replicas: rs})
}

// onProv1 is service 1's replica on prov1.
var onProv1 = ledger.ServedReplica{ServiceID: 1, Provider: prov1.Addr}

// wantReplaced checks that service 1's replica on prov1 ended as
// unreachable in the chain's last block, unslashed, excluded, not a
// failure, paid paid, and that its replacement on prov2 was placed in
// that same block.
func wantReplaced(t *testing.T, c *lt.Chain, paid, stake uint64) {
	t.Helper()
	s := service(t, c, 1)
	if len(s.Ended) != 1 {
		t.Fatalf("ended %+v, want prov1's replica", s.Ended)
	}
	e := s.Ended[0]
	if e.Provider != prov1.Addr || e.Code != ledger.EndUnreachable || e.EndedAt != c.Now().Unix() || e.Paid != paid {
		t.Fatalf("ended %+v, want prov1 unreachable at %d, paid %d", e, c.Now().Unix(), paid)
	}
	if len(s.Replicas) != 1 || s.Replicas[0].Provider != prov2.Addr || s.Replicas[0].AssignedAt != c.Now().Unix() {
		t.Fatalf("replicas %+v, want a replacement on prov2 placed in the block that ended prov1's (%d)", s.Replicas, c.Now().Unix())
	}
	if !slices.Contains(s.Excluded, prov1.Addr) || s.Failures != 0 || s.Cost != paid {
		t.Errorf("excluded %v, failures %d, cost %d; want prov1 excluded, no failure, cost %d", s.Excluded, s.Failures, s.Cost, paid)
	}
	if p := provider(t, c, prov1); p.Stake != stake || p.Slashed != 0 || p.Jobs != 0 {
		t.Errorf("prov1: stake %d (was %d), slashed %d, %d slots; want no slash and its slot freed", p.Stake, stake, p.Slashed, p.Jobs)
	}
}

// TestReplicaDownNeedsTwoThirdsOfThePower: with validators of power 3, 1
// and 1, neither the two small ones together (2 of 5) nor the large one
// alone (3 of 5, a majority) end a replica; the large one and a small one
// (4 of 5) do, in the block of the second report, as a silent replica
// ends (not slashed, not paid past what the witnesses paid, excluded) and
// with its replacement placed in that block. A key that is no
// validator's is refused, and a validator reports a replica once per
// window.
func TestReplicaDownNeedsTwoThirdsOfThePower(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []string // reports that leave the replica
		last   string   // the report that ends it
	}{
		{"small ones, then the large one", []string{"v2", "v3"}, "v1"},
		{"large one, then a small one", []string{"v1"}, "v3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := downChain(t, 3, 1, 1)
			vals, err := ledger.ActiveValidators(c.KV)
			if err != nil || len(vals) != 3 {
				t.Fatalf("validators %v, %v", vals, err)
			}
			stake := provider(t, c, prov1).Stake
			paid := service(t, c, 1).Replicas[0].Paid
			wantRefused(t, send(t, c, prov2, &ledger.MsgReportReplicaDown{Replicas: []ledger.ServedReplica{onProv1}}), ledger.ErrNotServiceParty, "not a validator")
			wantRefused(t, reportDown(t, c, "v9", onProv1), ledger.ErrNotServiceParty, "not a validator")
			for _, v := range tc.before {
				res := reportDown(t, c, v, onProv1)
				must(t, []ledger.TxResult{res})
				if res.Events[0].Type != "service_replica_reported_down" {
					t.Errorf("events %v, want service_replica_reported_down", res.Events)
				}
				// Its provider's heartbeats go on: they do not outvote the
				// reports, nor clear them.
				must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
				s := service(t, c, 1)
				if len(s.Replicas) != 1 || s.Replicas[0].Provider != prov1.Addr || len(s.Ended) != 0 {
					t.Fatalf("after %v's report: replicas %+v ended %+v; want prov1's kept", v, s.Replicas, s.Ended)
				}
			}
			wantRefused(t, reportDown(t, c, tc.before[0], onProv1), ledger.ErrServiceState, "already reported")
			if got := len(service(t, c, 1).Replicas[0].Down); got != len(tc.before) {
				t.Fatalf("%d reports kept, want %d", got, len(tc.before))
			}
			res := reportDown(t, c, tc.last, onProv1)
			must(t, []ledger.TxResult{res})
			wantReplaced(t, c, paid, stake)
			var types []string
			for _, e := range res.Events {
				types = append(types, e.Type)
			}
			if !slices.Contains(types, "service_replica_ended") {
				t.Errorf("events %v, want service_replica_ended", types)
			}
			// Reports of a replica that is gone are skipped.
			must(t, []ledger.TxResult{reportDown(t, c, tc.before[0], onProv1)})
		})
	}
}

// TestReplicaDownReportsExpire: a report counts for 20 blocks only: the
// large validator's report, then a small one's 20 blocks later, do not
// add up; the large one may report again once its report expired, and
// then they do.
func TestReplicaDownReportsExpire(t *testing.T) {
	c := downChain(t, 3, 1, 1)
	stake := provider(t, c, prov1).Stake
	must(t, []ledger.TxResult{reportDown(t, c, "v1", onProv1)})
	for i := range 19 {
		if i%4 == 0 {
			must(t, []ledger.TxResult{heartbeat(t, c, prov1, true, 1)})
		} else {
			c.ApplyBlock(t)
		}
	}
	// 20 blocks after v1's: v1's report no longer counts.
	must(t, []ledger.TxResult{reportDown(t, c, "v2", onProv1)})
	s := service(t, c, 1)
	if len(s.Replicas) != 1 || s.Replicas[0].Provider != prov1.Addr {
		t.Fatalf("replicas %+v: an expired report was counted", s.Replicas)
	}
	if d := s.Replicas[0].Down; len(d) != 1 || d[0].Validator != ledger.ConsAddressOf(lt.ConsKey("v2")) {
		t.Fatalf("reports kept %+v, want v2's only", d)
	}
	must(t, []ledger.TxResult{reportDown(t, c, "v1", onProv1)})
	wantReplaced(t, c, 0, stake)
}

// TestReplicaDownPaymentStops: a replica reported down is paid what
// witnesses attested before its end and nothing after: an attestation of
// the period it ended in, sent later, pays nothing.
func TestReplicaDownPaymentStops(t *testing.T) {
	c := downChain(t, 1)
	stake := provider(t, c, prov1).Stake
	for range 2 {
		nextPeriod(t, c, prov1, 1)
	}
	must(t, []ledger.TxResult{attestServed(t, c, "v1", period(t, c)-1, onProv1)})
	paid := service(t, c, 1).Replicas[0].Paid
	if paid == 0 {
		t.Fatal("the witnessed period paid nothing")
	}
	// One validator with all the power (a devnet): its report alone ends
	// the replica.
	must(t, []ledger.TxResult{reportDown(t, c, "v1", onProv1)})
	wantReplaced(t, c, paid, stake)
	ended := period(t, c)
	nextPeriod(t, c, prov2, 1)
	must(t, []ledger.TxResult{attestServed(t, c, "v1", ended, onProv1)})
	s := service(t, c, 1)
	if s.Ended[0].Paid != paid || c.Balance(t, prov1.Addr) == 0 {
		t.Fatalf("after its end: paid %d, want %d", s.Ended[0].Paid, paid)
	}
	if s.Cost != paid+s.Replicas[0].Paid {
		t.Errorf("cost %d, want %d paid to prov1 and %d to its replacement", s.Cost, paid, s.Replicas[0].Paid)
	}
}

// TestReplicaDownSkipsStartingReplica: a replica never ready is not
// anyone's to report (its readiness window ends it).
func TestReplicaDownSkipsStartingReplica(t *testing.T) {
	c := downChain(t, 1)
	spec := lt.ServiceSpec("tinylm", 200_000)
	must(t, []ledger.TxResult{deploy(t, c, spec, 10_000_000)})
	s := service(t, c, 2)
	if len(s.Replicas) != 1 || s.Replicas[0].ReadyAt != 0 {
		t.Fatalf("replicas %+v, want one starting", s.Replicas)
	}
	r := ledger.ServedReplica{ServiceID: 2, Provider: s.Replicas[0].Provider}
	must(t, []ledger.TxResult{reportDown(t, c, "v1", r)})
	if s := service(t, c, 2); len(s.Replicas) != 1 || len(s.Ended) != 0 || len(s.Replicas[0].Down) != 0 {
		t.Fatalf("a starting replica reported: replicas %+v ended %+v", s.Replicas, s.Ended)
	}
}

func TestReportReplicaDownValidateBasic(t *testing.T) {
	a, b := ledger.ServedReplica{ServiceID: 1, Provider: prov1.Addr}, ledger.ServedReplica{ServiceID: 2, Provider: prov1.Addr}
	for _, tc := range []struct {
		name string
		m    ledger.MsgReportReplicaDown
		want string
	}{
		{"empty", ledger.MsgReportReplicaDown{}, "want 1 to"},
		{"repeated", ledger.MsgReportReplicaDown{Replicas: []ledger.ServedReplica{a, a}}, "out of order or repeated"},
		{"unsorted", ledger.MsgReportReplicaDown{Replicas: []ledger.ServedReplica{b, a}}, "out of order or repeated"},
		{"no provider", ledger.MsgReportReplicaDown{Replicas: []ledger.ServedReplica{{ServiceID: 1}}}, "provider is empty"},
		{"no service", ledger.MsgReportReplicaDown{Replicas: []ledger.ServedReplica{{Provider: prov1.Addr}}}, "service_id is 0"},
		{"too many", ledger.MsgReportReplicaDown{Replicas: make([]ledger.ServedReplica, ledger.MaxDownReplicas+1)}, "want 1 to"},
	} {
		err := tc.m.ValidateBasic()
		wantRefused(t, ledger.TxResult{Err: err}, ledger.ErrInvalidMsg, tc.want)
	}
	if err := (&ledger.MsgReportReplicaDown{Replicas: []ledger.ServedReplica{a, b}}).ValidateBasic(); err != nil {
		t.Fatal(err)
	}
}
