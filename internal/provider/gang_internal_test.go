package provider

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/clusternet"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestGangConfig: a member's network configuration comes from the gang's
// record in rank order, whatever the order of the assignments, with this
// provider's rank; a record whose ranks are not 0 … n-1 once each, or
// that lacks a key, is refused with words, and the same assignment always
// gives the same key (a restarted agent's).
func TestGangConfig(t *testing.T) {
	kr, err := keys.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	me, err := kr.AddUnencrypted("me")
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{o: Options{Key: me}, log: slog.New(slog.DiscardHandler)}
	m := &gangMember{priv: a.gangKey(7, 1, 100), port: 51000}
	if a.gangKey(7, 1, 100) != m.priv || a.gangKey(7, 1, 101) == m.priv || a.gangKey(7, 2, 100) == m.priv {
		t.Error("the gang key is not a function of the job, its placement and the assignment")
	}
	m.pub, _ = m.priv.PublicKey()
	other := func(b byte) *ledger.Hash {
		k := clusternet.Key{0, b}
		k[31] = 64
		pub, _ := k.PublicKey()
		h := ledger.Hash(pub)
		return &h
	}
	mine := ledger.Hash(m.pub)
	p, q := address.Address{1}, address.Address{2}
	job := func(as ...ledger.Assignment) *ledger.Job {
		return &ledger.Job{ID: 7, Spec: ledger.JobSpec{Nodes: uint64(len(as))}, Assignments: as}
	}
	good := job(
		ledger.Assignment{Provider: q, Rank: 2, GangKey: other(2), GangEndpoint: "127.0.0.1:4000"},
		ledger.Assignment{Provider: me.Address, Rank: 1, GangKey: &mine, GangEndpoint: "127.0.0.1:51000"},
		ledger.Assignment{Provider: p, Rank: 0, GangKey: other(1)},
	)
	c, err := a.gangConfig(t.Context(), good, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank != 1 || len(c.Members) != 3 || c.Members[2].Endpoint.String() != "127.0.0.1:4000" || c.Members[0].Endpoint.IsValid() || c.ListenPort != 51000 {
		t.Errorf("config %+v", c)
	}
	for _, tc := range []struct {
		name string
		job  *ledger.Job
		want string
	}{
		{"duplicate rank", job(ledger.Assignment{Provider: p, Rank: 0, GangKey: other(1)}, ledger.Assignment{Provider: me.Address, Rank: 0, GangKey: &mine}), "ranks are not 0 to 1"},
		{"rank out of range", job(ledger.Assignment{Provider: p, Rank: 0, GangKey: other(1)}, ledger.Assignment{Provider: me.Address, Rank: 5, GangKey: &mine}), "ranks are not 0 to 1"},
		{"no key", job(ledger.Assignment{Provider: p, Rank: 0}, ledger.Assignment{Provider: me.Address, Rank: 1, GangKey: &mine}), "rank 0 of job 7 has no key"},
		{"not a member", job(ledger.Assignment{Provider: p, Rank: 0, GangKey: other(1)}, ledger.Assignment{Provider: q, Rank: 1, GangKey: other(2)}), "not a member"},
		{"another key posted as mine", job(ledger.Assignment{Provider: p, Rank: 0, GangKey: other(1)}, ledger.Assignment{Provider: me.Address, Rank: 1, GangKey: other(3)}), "public key"},
	} {
		if _, err := a.gangConfig(t.Context(), tc.job, m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestGangConfigReplicaGang: in a gang at verification full, a member's
// network has the members of its own replica gang only, in rank order; the
// other gang's members (same ranks, other keys) are no peers of it, and
// it starts when its own gang has posted, whatever the other's has.
func TestGangConfigReplicaGang(t *testing.T) {
	kr, err := keys.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	me, err := kr.AddUnencrypted("me")
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{o: Options{Key: me}, log: slog.New(slog.DiscardHandler)}
	m := &gangMember{priv: a.gangKey(7, 1, 100), port: 51000}
	m.pub, _ = m.priv.PublicKey()
	other := func(b byte) *ledger.Hash {
		k := clusternet.Key{0, b}
		k[31] = 64
		pub, _ := k.PublicKey()
		h := ledger.Hash(pub)
		return &h
	}
	mine := ledger.Hash(m.pub)
	j := &ledger.Job{ID: 7, Attempts: 3, Spec: ledger.JobSpec{Nodes: 2, Verification: ledger.VerifyFull, Deterministic: true}, Assignments: []ledger.Assignment{
		{Provider: address.Address{1}, Gang: 0, Rank: 0, GangKey: other(1), Placement: 1},
		{Provider: address.Address{2}, Gang: 0, Rank: 1, GangKey: other(2), Placement: 1},
		{Provider: address.Address{3}, Gang: 1, Rank: 0, Placement: 3},
		{Provider: me.Address, Gang: 1, Rank: 1, GangKey: &mine, Placement: 3},
	}}
	as := &j.Assignments[3]
	if gangPosted(j, as) {
		t.Error("posted, with rank 0 of its own gang silent")
	}
	if !gangPosted(j, &j.Assignments[0]) {
		t.Error("gang 0 posted, but its member is told to wait (for gang 1?)")
	}
	if gangPlacement(j, as) != 3 || gangPlacement(j, &j.Assignments[0]) != 1 {
		t.Errorf("placements %d, %d, want each member's own (3, 1)", gangPlacement(j, as), gangPlacement(j, &j.Assignments[0]))
	}
	j.Assignments[2].GangKey = other(3)
	c, err := a.gangConfig(t.Context(), j, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank != 1 || len(c.Members) != 2 || c.Members[0].PublicKey != clusternet.Key(*other(3)) || c.Members[1].PublicKey != m.pub {
		t.Errorf("replica gang 1's config %+v, want its own 2 members", c)
	}
}
