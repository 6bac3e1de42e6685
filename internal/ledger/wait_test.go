package ledger

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// TestRecordVersion6: a job, a provider or a proposal that records why in
// a Wait (or a slash code) is written at version 6 and reads back; one
// from before, holding its sentence, keeps its older version and bytes
// and still decodes with the sentence (jobtext renders it as it is).
func TestRecordVersion6(t *testing.T) {
	w := &Wait{Code: WaitReplacing, Cause: CauseReleased, Text: "disk full", Providers: []address.Address{{1}}, ResumeSeq: 2, Kept: 30,
		Miss: &PlacementMiss{Seen: 3, RAM: 2, Fit: 1, Need: 2, Pinned: "e"}}
	for _, c := range []struct {
		what string
		rec  record
		zero record
	}{
		{"job wait", &Job{ID: 7, State: JobQueued, Wait: w}, &Job{}},
		{"job dropped", &Job{ID: 7, Dropped: &Wait{Code: DropNotPlaced}}, &Job{}},
		{"job released by", &Job{ID: 7, Released: "x", ReleasedBy: &address.Address{2}}, &Job{}},
		{"slash code", &Provider{SlashEvents: []SlashEvent{{Height: 3, Amount: 4, Code: SlashOutvoted, Job: 9, Count: 2, Of: 3}}}, &Provider{}},
	} {
		b := encodeRecord(c.rec)
		if b[0] != 6 {
			t.Errorf("%s: version %d, want 6", c.what, b[0])
		}
		if err := decodeRecord(b, c.zero); err != nil || !reflect.DeepEqual(c.zero, c.rec) {
			t.Errorf("%s: round trip: %v %+v", c.what, err, c.zero)
		}
	}
	old := &Job{ID: 7, State: JobQueued, Reason: "waiting for the scheduler at the end of the block", AuditDropped: "gone", WaitCode: QuoteNoFit}
	b := encodeRecord(old)
	if b[0] != 3 {
		t.Fatalf("a job with a sentence and a wait code: version %d, want 3", b[0])
	}
	var got Job
	if err := decodeRecord(b, &got); err != nil || got.Reason != old.Reason || got.Wait != nil {
		t.Fatalf("an older job: %v %+v", err, got)
	}
	oldSlash := &Provider{SlashEvents: []SlashEvent{{Height: 3, Amount: 4, Reason: "job 9: outvoted by 2 of 3 replicas"}}}
	if b := encodeRecord(oldSlash); b[0] != recordVersionBase {
		t.Fatalf("a slash with a sentence: version %d", b[0])
	}
}

// TestProposalWaitEncoding: a decided proposal with a Wait is written at
// proposal version 2 and reads back; one without (open, or decided
// before issue 28 with its sentence) keeps version 1 and its bytes.
func TestProposalWaitEncoding(t *testing.T) {
	p := &Proposal{ID: 3, Kind: ProposalText, Title: "t", Status: ProposalRejected, Tally: &Tally{Yes: 1, Bonded: 10}, DecidedHeight: 9,
		Wait: &Wait{Code: WaitNoQuorum, PPM: 334_000}}
	b := p.encode()
	if b[0] != proposalWaitVersion {
		t.Fatalf("version %d", b[0])
	}
	got, err := decodeProposal(b)
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	old := &Proposal{ID: 3, Kind: ProposalText, Title: "t", Status: ProposalRejected, DecidedHeight: 9, Reason: "every vote abstained"}
	b = old.encode()
	if b[0] != proposalRecordVersion {
		t.Fatalf("an older proposal: version %d", b[0])
	}
	if got, err := decodeProposal(b); err != nil || got.Reason != old.Reason || got.Wait != nil {
		t.Fatalf("an older proposal: %v %+v", err, got)
	}
	// Version 2 without its Wait is truncated; version 1 with trailing
	// bytes is refused.
	b2 := p.encode()
	if _, err := decodeProposal(b2[:len(b2)-1]); err == nil {
		t.Fatal("a truncated version 2 proposal decoded")
	}
	b1 := bytes.Clone(b2)
	b1[0] = proposalRecordVersion
	if _, err := decodeProposal(b1); err == nil {
		t.Fatal("a version 1 proposal with a Wait decoded")
	}
}

// TestProposalRootsEncoding: an attest_roots proposal is written at
// version 3 with its roots, with and without a Wait, and reads back.
func TestProposalRootsEncoding(t *testing.T) {
	r := DefaultAttestRoots
	for _, p := range []*Proposal{
		{ID: 4, Kind: ProposalAttestRoots, Title: "r", Status: ProposalVoting, AddRoots: []string{r[0], r[1]}},
		{ID: 5, Kind: ProposalAttestRoots, Title: "r", Status: ProposalFailed, RemoveRoots: []string{r[2]}, DecidedHeight: 9,
			Wait: &Wait{Code: WaitNotExecuted, Cause: NotExecutedRoots}},
	} {
		b := p.encode()
		if b[0] != proposalRootsVersion {
			t.Fatalf("version %d", b[0])
		}
		if got, err := decodeProposal(b); err != nil || !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, p)
		}
		if _, err := decodeProposal(b[:len(b)-1]); err == nil {
			t.Fatal("a truncated version 3 proposal decoded")
		}
	}
}
