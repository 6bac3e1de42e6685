package jobclient

import (
	"bytes"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestPrefixWriter: every line of a member's log gets its rank, however
// the writes cut the lines.
func TestPrefixWriter(t *testing.T) {
	var b bytes.Buffer
	w := &prefixWriter{w: &b, prefix: []byte("[rank 2] "), bol: true}
	for _, s := range []string{"one\ntw", "o\n", "", "\nthree"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if want := "[rank 2] one\n[rank 2] two\n[rank 2] \n[rank 2] three"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestGangResults: a gang's members come in rank order, whatever the
// order of their assignments; those without a result are left out.
func TestGangResults(t *testing.T) {
	j := &ledger.Job{ID: 4, Assignments: []ledger.Assignment{
		{Rank: 2, Result: &ledger.JobResult{OutputBlob: "c"}},
		{Rank: 0, Result: &ledger.JobResult{OutputBlob: "a"}},
		{Rank: 1},
	}}
	got, err := gangResults(j)
	if err != nil || len(got) != 2 || got[0].Rank != 0 || got[1].Rank != 2 {
		t.Fatalf("gangResults = %+v, %v", got, err)
	}
	if _, err := gangResults(&ledger.Job{ID: 5}); err == nil {
		t.Error("a gang without results gave no error")
	}
	if GangRankDir(3) != "rank-3" {
		t.Errorf("GangRankDir(3) = %q", GangRankDir(3))
	}
}

// TestGangResultsReplicaGangs: a gang verified at full has two members of
// each rank; the outputs are those of the replica gang whose rank 0 was
// delivered, not a mix.
func TestGangResultsReplicaGangs(t *testing.T) {
	p, q := address.Address{1}, address.Address{2}
	j := &ledger.Job{ID: 4, Delivered: &q, Assignments: []ledger.Assignment{
		{Provider: p, Gang: 0, Rank: 0, Result: &ledger.JobResult{OutputBlob: "wrong0"}},
		{Gang: 0, Rank: 1, Result: &ledger.JobResult{OutputBlob: "wrong1"}},
		{Gang: 1, Rank: 1, Result: &ledger.JobResult{OutputBlob: "b"}},
		{Provider: q, Gang: 1, Rank: 0, Result: &ledger.JobResult{OutputBlob: "a"}},
	}}
	got, err := gangResults(j)
	if err != nil || len(got) != 2 || got[0].Result.OutputBlob != "a" || got[1].Result.OutputBlob != "b" {
		t.Fatalf("gangResults = %+v, %v, want gang 1's a, b", got, err)
	}
}
