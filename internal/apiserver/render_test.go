package apiserver

import (
	"encoding/json"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
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
	p = &ledger.Provider{}
	p.Challenges.LastFail = &ledger.ChallengeFailure{Code: ledger.ChallengeWrongOpening, Cause: ledger.ChallengeCauseLeaf}
	if renderProvider(p); p.Challenges.LastFailure != "the CPU: wrong opening: an opened leaf is not the selected one" {
		t.Fatalf("last failure: %q", p.Challenges.LastFailure)
	}
	s := &ledger.Service{State: ledger.ServiceStopped, Wait: &ledger.Wait{Code: ledger.WaitStoppedByOwner, At: 1700000000},
		Ended: []ledger.ReplicaEnd{{Code: ledger.EndEvicted, Text: "slow"}}}
	if renderService(s); s.Reason != "stopped by its owner at 2023-11-14T22:13:20Z" || s.Ended[0].Why != "evicted by its owner: slow" {
		t.Fatalf("service: %q, %q", s.Reason, s.Ended[0].Why)
	}
}

// TestQuoteRoute: POST /v1/quote serves the ledger's quote with, when the
// job would wait, the planner's miss (for programs) and its sentence in
// reason (for people: the CLI, jobclient's price check and the Python
// SDK read it); the ledger writes no words, the API renders them.
func TestQuoteRoute(t *testing.T) {
	s := New(newFakeChain(t), Options{})
	body, _ := json.Marshal(lt.WasmJob("cheap", 10_000, 60)) // below every ask (36000/h)
	var q ledger.Quote
	if rec := do(t, s, "POST", "/v1/quote", body, nil, &q); rec.Code != 200 || q.Code != ledger.QuoteOverPrice || q.Miss == nil || q.Miss.CheapestAbove != 36_000 ||
		q.Reason != "0 of 0 providers within the price can run it; cheapest other ask 0.036 SYNC/h > max 0.01 SYNC/h" {
		t.Fatalf("quote under every ask: %d %+v (miss %+v)", rec.Code, q, q.Miss)
	}
	body, _ = json.Marshal(lt.WasmJob("fits", 1_000_000, 60))
	if q = (ledger.Quote{}); do(t, s, "POST", "/v1/quote", body, nil, &q).Code != 200 || q.Code != "" || q.Miss != nil || q.Reason != "" || q.Matching == 0 {
		t.Fatalf("quote of a job that fits: %+v", q)
	}
}

// TestUnplacedJobServed: a job the scheduler could not place is served
// with its wait (code unplaced and the planner's miss) and the sentence
// jobtext renders from it in reason, word for word what the ledger wrote
// before it recorded the miss.
func TestUnplacedJobServed(t *testing.T) {
	s := New(newFakeChain(t), Options{})
	var j ledger.Job // job 4 wants 1 TiB of RAM
	if rec := do(t, s, "GET", "/v1/jobs/4", nil, nil, &j); rec.Code != 200 || j.State != ledger.JobQueued || j.WaitCode != ledger.QuoteNoFit ||
		j.Wait == nil || j.Wait.Code != ledger.WaitUnplaced || j.Wait.Miss == nil || j.Wait.Miss.RAM != 4 ||
		j.Reason != "0 of 4 providers within the price can run it: 4 have less than 1048576 MiB RAM" {
		t.Fatalf("job 4: %d %s code %q wait %+v reason %q", rec.Code, j.State, j.WaitCode, j.Wait, j.Reason)
	}
}
