package provider

import (
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestNeedsHandover: which handover step an agent takes (issue 26). An
// escalation or replacement replica asks for the key as an audit replica
// does, and a committed replica whose own key came by handover (an audit
// replica) hands it on, so that no new replica waits for an owner who is
// offline; a replica of the first placement waits for the owner.
func TestNeedsHandover(t *testing.T) {
	kc := ledger.Hash{1}
	p, q, r := address.Address{1}, address.Address{2}, address.Address{3}
	commit := &ledger.Hash{7}
	pub := &ledger.Hash{9}
	by := p
	for _, tc := range []struct {
		name string
		job  ledger.Job
		me   int // index of this agent's assignment
		want bool
	}{
		{"first placement waits for the owner", ledger.Job{Assignments: []ledger.Assignment{{Provider: p}, {Provider: q}}}, 1, false},
		{"audit replica asks", ledger.Job{Assignments: []ledger.Assignment{{Provider: p, KeyGrant: []byte("k"), Commitment: commit}, {Provider: q, Extra: true}}}, 1, true},
		{"replacement replica asks", ledger.Job{Assignments: []ledger.Assignment{{Provider: p, KeyGrant: []byte("k"), Commitment: commit}, {Provider: r}}}, 1, true},
		{"asked already", ledger.Job{Assignments: []ledger.Assignment{{Provider: p, KeyGrant: []byte("k"), Commitment: commit}, {Provider: r, HandoverKey: pub}}}, 1, false},
		{"owner-granted committed replica hands over", ledger.Job{Assignments: []ledger.Assignment{{Provider: p, KeyGrant: []byte("k"), Commitment: commit}, {Provider: q, HandoverKey: pub}}}, 0, true},
		{"handed-over committed replica hands on", ledger.Job{Assignments: []ledger.Assignment{
			{Provider: p, KeyGrant: []byte("k"), Commitment: commit},
			{Provider: q, Extra: true, KeyGrant: []byte("sealed"), HandoverKey: pub, HandedBy: &by, Commitment: commit},
			{Provider: r, Extra: true, HandoverKey: pub},
		}}, 1, true},
		{"uncommitted replica does not hand over", ledger.Job{Assignments: []ledger.Assignment{{Provider: p, KeyGrant: []byte("k")}, {Provider: q, HandoverKey: pub}}}, 0, false},
		{"nobody waits", ledger.Job{Assignments: []ledger.Assignment{{Provider: p, KeyGrant: []byte("k"), Commitment: commit}, {Provider: q, KeyGrant: []byte("k")}}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job
			j.KeyCommitment = &kc
			if got := needsHandover(&j, &j.Assignments[tc.me]); got != tc.want {
				t.Errorf("needsHandover = %v, want %v", got, tc.want)
			}
			j.KeyCommitment = nil // only the owner grants: no handover
			if needsHandover(&j, &j.Assignments[tc.me]) {
				t.Error("a handover step for a job without a key commitment")
			}
		})
	}
}
