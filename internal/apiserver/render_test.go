package apiserver

import (
	"encoding/json"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestRenderJob: the API serves a job's wait as the ledger recorded it
// (for programs) and its sentence in reason (for people: the CLI,
// jobclient and the dashboard read it), and an older record's sentence
// as it was.
func TestRenderJob(t *testing.T) {
	by := address.Address{1}
	j := &ledger.Job{State: ledger.JobVerifying, Wait: &ledger.Wait{Code: ledger.WaitReported, Count: 1, Of: 2},
		Dropped: &ledger.Wait{Code: ledger.DropNotPlaced}, Released: "disk full", ReleasedBy: &by}
	renderJob(j)
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Reason       string `json:"reason"`
		AuditDropped string `json:"audit_dropped"`
		Released     string `json:"released"`
		Wait         struct {
			Code  string `json:"code"`
			Count uint64 `json:"count"`
			Of    uint64 `json:"of"`
		} `json:"wait"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Reason != "1 of 2 replicas reported" || got.Wait.Code != ledger.WaitReported || got.Wait.Count != 1 || got.Wait.Of != 2 ||
		got.AuditDropped != "no provider could take the extra replica in time" || got.Released != by.String()+": disk full" {
		t.Fatalf("served %s", b)
	}
	old := &ledger.Job{State: ledger.JobQueued, Reason: "an older sentence"}
	if renderJob(old); old.Reason != "an older sentence" {
		t.Fatalf("older job: %q", old.Reason)
	}
	p := &ledger.Provider{SlashEvents: []ledger.SlashEvent{{Code: ledger.SlashUnrevealed, Job: 4}, {Reason: "older"}}}
	if renderProvider(p); p.SlashEvents[0].Reason != "job 4: committed a result and did not reveal it" || p.SlashEvents[1].Reason != "older" {
		t.Fatalf("slash events: %+v", p.SlashEvents)
	}
	s := &ledger.Service{State: ledger.ServiceStopped, Wait: &ledger.Wait{Code: ledger.WaitStoppedByOwner, At: 1700000000},
		Ended: []ledger.ReplicaEnd{{Code: ledger.EndEvicted, Text: "slow"}}}
	if renderService(s); s.Reason != "stopped by its owner at 2023-11-14T22:13:20Z" || s.Ended[0].Why != "evicted by its owner: slow" {
		t.Fatalf("service: %q, %q", s.Reason, s.Ended[0].Why)
	}
}
