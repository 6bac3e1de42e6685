package jobspec

import (
	"testing"
	"time"
)

// TestCheckpointForms: checkpoint: {path, interval} goes to the ledger's
// spec as path and whole seconds; the older checkpoint: /path is the path
// at the default interval.
func TestCheckpointForms(t *testing.T) {
	for _, tc := range []struct {
		yaml         string
		path         string
		wantInterval time.Duration
	}{
		{"checkpoint: {path: /ckpt, interval: 90s}\n", "/ckpt", 90 * time.Second},
		{"checkpoint:\n  path: /state\n  interval: 1h\n", "/state", time.Hour},
		{"checkpoint: {path: /ckpt}\n", "/ckpt", 10 * time.Minute},
		{"checkpoint: /old/form\n", "/old/form", 10 * time.Minute},
	} {
		s, err := Parse([]byte(minimalWASM+tc.yaml), "")
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if s.Checkpoint == nil || s.Checkpoint.Path != tc.path || time.Duration(s.Checkpoint.Interval) != tc.wantInterval {
			t.Fatalf("%q: got %+v", tc.yaml, s.Checkpoint)
		}
		ls := s.LedgerSpec(PlaceholderModule)
		if ls.Checkpoint == nil || ls.Checkpoint.Path != tc.path || ls.Checkpoint.IntervalSeconds != uint64(tc.wantInterval/time.Second) {
			t.Fatalf("%q: ledger spec %+v", tc.yaml, ls.Checkpoint)
		}
		roundTrip(t, s, "")
	}
	s, err := Parse([]byte(minimalWASM), "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Checkpoint != nil || s.LedgerSpec(PlaceholderModule).Checkpoint != nil {
		t.Fatalf("no checkpoint: got %+v", s.Checkpoint)
	}
}
