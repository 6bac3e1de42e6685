package cli

import (
	"bytes"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestPrintCaught: the devnet's example says which replica Proof of Sync
// caught, by its key's name (issue 33: the faulty-provider demo showed
// nothing), and nothing when every replica agreed.
func TestPrintCaught(t *testing.T) {
	bad, good := address.Address{4}, address.Address{1}
	names := keyNames{bad: "provider-4"}
	var b bytes.Buffer
	printCaught(&b, &ledger.Job{Assignments: []ledger.Assignment{
		{Provider: bad, Outcome: ledger.OutcomeMinority, Slashed: 500_000},
		{Provider: good, Outcome: ledger.OutcomeMajority, Extra: true},
		{Provider: address.Address{2}, Outcome: ledger.OutcomeMajority, Extra: true},
	}}, names)
	want := "Proof of Sync caught provider-4 (" + bad.String() + "): its result differed from the majority's, so it was outvoted and slashed 0.5 SYNC; the output above is the majority's\n"
	if b.String() != want {
		t.Errorf("printed %q, want %q", b.String(), want)
	}
	b.Reset()
	printCaught(&b, &ledger.Job{Assignments: []ledger.Assignment{{Provider: good, Outcome: ledger.OutcomeMajority}}}, names)
	if b.Len() != 0 {
		t.Errorf("printed %q for a job with no outvoted replica", b.String())
	}
}
