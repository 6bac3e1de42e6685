package verify_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/gpunet/gpunet/internal/archtest"
	"github.com/gpunet/gpunet/internal/ledger/verify"
)

// TestImportRule: the tally is as deterministic as the ledger that applies
// it (DESIGN.md section 4), and depends on the standard library only.
func TestImportRule(t *testing.T) {
	archtest.CheckPure(t, archtest.Purity{
		Allowed:        []string{"github.com/gpunet/gpunet/internal/ledger/verify"},
		ForbiddenStd:   []string{"os", "net", "net/http", "math/rand", "math/rand/v2", "crypto/rand", "sync", "io/fs", "syscall", "unsafe", "reflect", "time"},
		ForbiddenCalls: []string{"time.Now"},
	})
}

// replicas builds replica facts from one string per replica: "" for a
// replica that did not reveal, else its result.
func replicas(results ...string) []verify.Replica {
	rs := make([]verify.Replica, len(results))
	for i, r := range results {
		if r != "" {
			rs[i] = verify.Replica{Revealed: true, Result: r}
		}
	}
	return rs
}

// idx is a list of replica indexes; nil for none, as the tally returns.
func idx(is ...int) []int {
	if len(is) == 0 {
		return nil
	}
	return is
}

func TestTally(t *testing.T) {
	checked := verify.Rules{Checked: true, MaxReplicas: 5, Placements: 1, PlacementBudget: 8}
	with := func(f func(*verify.Rules)) verify.Rules {
		r := checked
		f(&r)
		return r
	}
	unchecked := with(func(r *verify.Rules) { r.Checked = false })
	dropped := with(func(r *verify.Rules) { r.ReplicaDropped = true })
	spent := with(func(r *verify.Rules) { r.Placements = r.PlacementBudget })
	capped := func(max uint64) verify.Rules { return with(func(r *verify.Rules) { r.MaxReplicas = max }) }

	tests := []struct {
		name  string
		rs    []verify.Replica
		rules verify.Rules
		want  verify.Outcome
	}{
		// A majority.
		{"full: both agree", replicas("a", "a"), checked,
			verify.Outcome{Verdict: verify.Validated, Winners: idx(0, 1), Delivered: 0, N: 2, Results: 1}},
		{"cheater outvoted", replicas("a", "b", "a"), checked,
			verify.Outcome{Verdict: verify.Validated, Winners: idx(0, 2), Minority: idx(1), Delivered: 0, N: 3, Results: 2}},
		{"cheater first: the first winner is delivered", replicas("b", "a", "a"), checked,
			verify.Outcome{Verdict: verify.Validated, Winners: idx(1, 2), Minority: idx(0), Delivered: 1, N: 3, Results: 2}},
		{"majority, a silent replica", replicas("a", "a", ""), checked,
			verify.Outcome{Verdict: verify.Validated, Winners: idx(0, 1), Unrevealed: idx(2), Delivered: 0, N: 3, Results: 1}},
		{"majority, minority and silent", replicas("a", "b", "a", "", "a"), checked,
			verify.Outcome{Verdict: verify.Validated, Winners: idx(0, 2, 4), Minority: idx(1), Unrevealed: idx(3), Delivered: 0, N: 5, Results: 2}},
		{"two cheaters disagreeing are both outvoted", replicas("b", "a", "c", "a", "a"), checked,
			verify.Outcome{Verdict: verify.Validated, Winners: idx(1, 3, 4), Minority: idx(0, 2), Delivered: 1, N: 5, Results: 3}},
		{"majority at max replicas", replicas("a", "b", "a", "c", "a"), capped(5),
			verify.Outcome{Verdict: verify.Validated, Winners: idx(0, 2, 4), Minority: idx(1, 3), Delivered: 0, N: 5, Results: 3}},
		{"majority with the replica dropped", replicas("a", "a", "b"), dropped,
			verify.Outcome{Verdict: verify.Validated, Winners: idx(0, 1), Minority: idx(2), Delivered: 0, N: 3, Results: 2}},

		// One replica.
		{"spot, not audited: unverified", replicas("a"), checked,
			verify.Outcome{Verdict: verify.Unverified, Winners: idx(0), Delivered: 0, N: 1, Results: 1}},
		{"spot, silent", replicas(""), checked,
			verify.Outcome{Verdict: verify.NoMajority, Unrevealed: idx(0), Delivered: -1, N: 1}},

		// Audit replicas: a spot job's second replica.
		{"audit agrees", replicas("a", "a"), capped(5),
			verify.Outcome{Verdict: verify.Validated, Winners: idx(0, 1), Delivered: 0, N: 2, Results: 1}},
		{"audit disagrees: escalate", replicas("a", "b"), checked,
			verify.Outcome{Verdict: verify.Escalate, Replicas: 3, Undecided: idx(0, 1), Delivered: -1, N: 2, Results: 2}},
		{"audit silent: the lone result is checked by another", replicas("a", ""), checked,
			verify.Outcome{Verdict: verify.Escalate, Replicas: 3, Undecided: idx(0), Unrevealed: idx(1), Delivered: -1, N: 2, Results: 1}},
		{"audit silent, its replacement dropped: no majority", replicas("a", ""), dropped,
			verify.Outcome{Verdict: verify.NoMajority, Undecided: idx(0), Unrevealed: idx(1), Delivered: -1, N: 2, Results: 1}},
		{"original silent, audit revealed", replicas("", "a"), dropped,
			verify.Outcome{Verdict: verify.NoMajority, Undecided: idx(1), Unrevealed: idx(0), Delivered: -1, N: 2, Results: 1}},

		// Ties and escalation.
		{"tie: escalate", replicas("a", "b", "c"), checked,
			verify.Outcome{Verdict: verify.Escalate, Replicas: 4, Undecided: idx(0, 1, 2), Delivered: -1, N: 3, Results: 3}},
		{"half is not a majority", replicas("a", "a", "b", "b"), checked,
			verify.Outcome{Verdict: verify.Escalate, Replicas: 5, Undecided: idx(0, 1, 2, 3), Delivered: -1, N: 4, Results: 2}},
		{"the silent count in n", replicas("a", "a", "", ""), checked,
			verify.Outcome{Verdict: verify.Escalate, Replicas: 5, Undecided: idx(0, 1), Unrevealed: idx(2, 3), Delivered: -1, N: 4, Results: 1}},
		{"escalate to exactly max replicas", replicas("a", "b"), capped(3),
			verify.Outcome{Verdict: verify.Escalate, Replicas: 3, Undecided: idx(0, 1), Delivered: -1, N: 2, Results: 2}},
		{"last placement left", replicas("a", "b"), with(func(r *verify.Rules) { r.Placements = r.PlacementBudget - 1 }),
			verify.Outcome{Verdict: verify.Escalate, Replicas: 3, Undecided: idx(0, 1), Delivered: -1, N: 2, Results: 2}},

		// No majority, and no replica can be added.
		{"max replicas reached", replicas("a", "b", "a", "b", "c"), capped(5),
			verify.Outcome{Verdict: verify.NoMajority, Undecided: idx(0, 1, 2, 3, 4), Delivered: -1, N: 5, Results: 3}},
		{"tie at max replicas 2", replicas("a", "b"), capped(2),
			verify.Outcome{Verdict: verify.NoMajority, Undecided: idx(0, 1), Delivered: -1, N: 2, Results: 2}},
		{"more replicas than the cap (lowered since)", replicas("a", "b", "c"), capped(2),
			verify.Outcome{Verdict: verify.NoMajority, Undecided: idx(0, 1, 2), Delivered: -1, N: 3, Results: 3}},
		{"placement budget spent", replicas("a", "b"), spent,
			verify.Outcome{Verdict: verify.NoMajority, Undecided: idx(0, 1), Delivered: -1, N: 2, Results: 2}},
		{"escalation replica dropped", replicas("a", "b", ""), dropped,
			verify.Outcome{Verdict: verify.NoMajority, Undecided: idx(0, 1), Unrevealed: idx(2), Delivered: -1, N: 3, Results: 2}},
		{"lone result at the cap", replicas("a", "", "", "", ""), capped(5),
			verify.Outcome{Verdict: verify.NoMajority, Undecided: idx(0), Unrevealed: idx(1, 2, 3, 4), Delivered: -1, N: 5, Results: 1}},
		{"nobody revealed: never escalated", replicas("", ""), checked,
			verify.Outcome{Verdict: verify.NoMajority, Unrevealed: idx(0, 1), Delivered: -1, N: 2}},
		{"no replicas", nil, checked,
			verify.Outcome{Verdict: verify.NoMajority, Delivered: -1}},

		// Not checked: never escalated.
		{"unchecked, one replica", replicas("a"), unchecked,
			verify.Outcome{Verdict: verify.Unchecked, Winners: idx(0), Delivered: 0, N: 1, Results: 1}},
		{"unchecked, two agree", replicas("a", "a"), unchecked,
			verify.Outcome{Verdict: verify.Unchecked, Winners: idx(0, 1), Delivered: 0, N: 2, Results: 1}},
		{"unchecked, two disagree", replicas("a", "b"), unchecked,
			verify.Outcome{Verdict: verify.NoMajority, Undecided: idx(0, 1), Delivered: -1, N: 2, Results: 2}},
		{"unchecked, silent", replicas(""), unchecked,
			verify.Outcome{Verdict: verify.NoMajority, Unrevealed: idx(0), Delivered: -1, N: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := verify.Tally(tt.rs, tt.rules)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Tally(%v, %+v)\n got %+v\nwant %+v", tt.rs, tt.rules, got, tt.want)
			}
			for i := range tt.rs {
				if got.Fate(i) == 0 {
					t.Errorf("replica %d has no fate in %+v", i, got)
				}
			}
		})
	}
}

func TestTallyFate(t *testing.T) {
	out := verify.Tally(replicas("a", "b", "a", "", "a"), verify.Rules{Checked: true, MaxReplicas: 5, PlacementBudget: 1})
	want := []verify.Fate{verify.Winner, verify.Minority, verify.Winner, verify.Unrevealed, verify.Winner}
	for i, w := range want {
		if got := out.Fate(i); got != w {
			t.Errorf("Fate(%d) = %d, want %d", i, got, w)
		}
	}
	if got := out.Fate(5); got != 0 {
		t.Errorf("Fate(5) of 5 replicas = %d, want 0", got)
	}
	undecided := verify.Tally(replicas("a", "b"), verify.Rules{Checked: true, MaxReplicas: 2})
	if got := undecided.Fate(1); got != verify.Undecided {
		t.Errorf("Fate(1) without a majority = %d, want Undecided", got)
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[verify.Verdict]string{
		verify.Escalate: "escalate", verify.Validated: "validated", verify.Unverified: "unverified",
		verify.Unchecked: "unchecked", verify.NoMajority: "no_majority", 0: "", 99: "verdict(?)", -1: "verdict(?)",
	} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", int(v), got, want)
		}
	}
	if verify.Escalate.Final() || !verify.NoMajority.Final() {
		t.Error("Escalate must be the one verdict that is not final")
	}
}

func TestTallyCheckpoint(t *testing.T) {
	tests := []struct {
		name string
		rs   []verify.Replica
		max  uint64
		want verify.CheckpointOutcome
	}{
		{"nobody reported", replicas("", ""), 5,
			verify.CheckpointOutcome{Action: verify.Agree, N: 2}},
		{"one reported", replicas("a", ""), 5,
			verify.CheckpointOutcome{Action: verify.Agree, N: 2, Reported: 1, Results: 1}},
		{"all agree", replicas("a", "a", "a"), 5,
			verify.CheckpointOutcome{Action: verify.Agree, N: 3, Reported: 3, Results: 1}},
		{"one outvoted", replicas("a", "b", "a"), 5,
			verify.CheckpointOutcome{Action: verify.DropMinority, Minority: idx(1), Votes: 2, N: 3, Reported: 3, Results: 2}},
		{"outvoted before the rest reported", replicas("a", "a", "b", "", "a"), 5,
			verify.CheckpointOutcome{Action: verify.DropMinority, Minority: idx(2), Votes: 3, N: 5, Reported: 4, Results: 2}},
		{"minority by group, then in order", replicas("b", "c", "b", "a", "a", "a", "a"), 7,
			verify.CheckpointOutcome{Action: verify.DropMinority, Minority: idx(0, 2, 1), Votes: 4, N: 7, Reported: 7, Results: 3}},
		{"majority at the cap: dropped, not failed", replicas("a", "b", "a"), 3,
			verify.CheckpointOutcome{Action: verify.DropMinority, Minority: idx(1), Votes: 2, N: 3, Reported: 3, Results: 2}},
		{"a majority is still possible", replicas("a", "b", ""), 5,
			verify.CheckpointOutcome{Action: verify.Wait, Votes: 1, N: 3, Reported: 2, Results: 2}},
		{"two yet to report", replicas("a", "", "b", ""), 5,
			verify.CheckpointOutcome{Action: verify.Wait, Votes: 1, N: 4, Reported: 2, Results: 2}},
		{"one yet to report could make three of four", replicas("a", "a", "b", ""), 5,
			verify.CheckpointOutcome{Action: verify.Wait, Votes: 2, N: 4, Reported: 3, Results: 2}},
		{"two replicas disagree: restart with three", replicas("a", "b"), 5,
			verify.CheckpointOutcome{Action: verify.Restart, Replicas: 3, Votes: 1, N: 2, Reported: 2, Results: 2}},
		{"three states of three", replicas("a", "b", "c"), 5,
			verify.CheckpointOutcome{Action: verify.Restart, Replicas: 4, Votes: 1, N: 3, Reported: 3, Results: 3}},
		{"a tie of four: restart with the cap", replicas("a", "b", "a", "b"), 5,
			verify.CheckpointOutcome{Action: verify.Restart, Replicas: 5, Votes: 2, N: 4, Reported: 4, Results: 2}},
		{"no majority possible with one silent", replicas("a", "b", "c", ""), 5,
			verify.CheckpointOutcome{Action: verify.Restart, Replicas: 5, Votes: 1, N: 4, Reported: 3, Results: 3}},
		{"no majority at the cap: fail", replicas("a", "b"), 2,
			verify.CheckpointOutcome{Action: verify.Fail, Votes: 1, N: 2, Reported: 2, Results: 2}},
		{"no majority at five of five", replicas("a", "b", "a", "b", "c"), 5,
			verify.CheckpointOutcome{Action: verify.Fail, Votes: 2, N: 5, Reported: 5, Results: 3}},
		{"more replicas than the cap (lowered since)", replicas("a", "b", "c"), 2,
			verify.CheckpointOutcome{Action: verify.Fail, Votes: 1, N: 3, Reported: 3, Results: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := verify.TallyCheckpoint(tt.rs, tt.max)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TallyCheckpoint(%v, %d)\n got %+v\nwant %+v", tt.rs, tt.max, got, tt.want)
			}
		})
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[verify.CheckpointAction]string{
		verify.Agree: "agree", verify.Wait: "wait", verify.DropMinority: "drop_minority",
		verify.Restart: "restart", verify.Fail: "fail", 0: "", 9: "action(?)",
	} {
		if got := a.String(); got != want {
			t.Errorf("CheckpointAction(%d).String() = %q, want %q", int(a), got, want)
		}
	}
}

func TestGroups(t *testing.T) {
	got := verify.Groups(replicas("b", "", "a", "b", "c", "a"))
	want := []verify.Group{{"b", []int{0, 3}}, {"a", []int{2, 5}}, {"c", []int{4}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Groups = %+v, want %+v", got, want)
	}
	for _, tt := range []struct {
		n    int
		want int
	}{{2, 1}, {3, 1}, {4, -1}, {5, -1}} {
		g := []verify.Group{{"a", []int{0}}, {"b", []int{1, 2}}}
		if got := verify.Majority(g, tt.n); got != tt.want {
			t.Errorf("Majority(groups of 1 and 2, n %d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}

// A spot job audited: the audit replica disagrees, so the job escalates;
// the third replica sides with the audit, and the original is outvoted.
func ExampleTally() {
	rules := verify.Rules{Checked: true, MaxReplicas: 5, Placements: 2, PlacementBudget: 8}
	first := verify.Tally([]verify.Replica{
		{Revealed: true, Result: "wrong"},
		{Revealed: true, Result: "right"},
	}, rules)
	fmt.Println(first.Verdict, first.Replicas)
	second := verify.Tally([]verify.Replica{
		{Revealed: true, Result: "wrong"},
		{Revealed: true, Result: "right"},
		{Revealed: true, Result: "right"},
	}, rules)
	fmt.Println(second.Verdict, second.Winners, second.Minority, second.Delivered)
	// Output:
	// escalate 3
	// validated [1 2] [0] 1
}
