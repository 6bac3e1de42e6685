package ledger

import (
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// TestReplicaGangsWholeInvariant: the invariant catches a replica gang
// holding a rank twice, a rank past the gang's size, members wanted that
// make no whole gangs, and a gang index on a job that is not a gang at
// full; it passes two whole gangs.
func TestReplicaGangsWholeInvariant(t *testing.T) {
	full := JobSpec{Nodes: 2, Verification: VerifyFull, Deterministic: true}
	good := func() *Job {
		return &Job{ID: 3, Spec: full, Replicas: 4, Assignments: []Assignment{
			{Provider: address.Address{1}, Gang: 0, Rank: 0}, {Provider: address.Address{2}, Gang: 0, Rank: 1},
			{Provider: address.Address{3}, Gang: 1, Rank: 0}, {Provider: address.Address{4}, Gang: 1, Rank: 1},
		}}
	}
	if err := replicaGangsWhole(good()); err != nil {
		t.Fatalf("two whole gangs: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Job)
		want string
	}{
		{"rank twice", func(j *Job) { j.Assignments[3].Rank = 0 }, "rank 0 twice"},
		{"rank past the gang", func(j *Job) { j.Assignments[3].Rank = 2 }, "rank 2 of 2"},
		{"not whole gangs", func(j *Job) { j.Replicas = 5 }, "not whole gangs"},
		{"gang index on a plain gang", func(j *Job) { j.Spec.Verification = VerifyNone }, "not a gang at full"},
	} {
		j := good()
		tc.edit(j)
		if err := replicaGangsWhole(j); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
