package ledger

import (
	"reflect"
	"testing"
)

// TestRecordVersion4: a job that records where its data is, a URL input,
// a release or a result's data_at is written at version 4 and reads back;
// a job without any of them stays at the version it had.
func TestRecordVersion4(t *testing.T) {
	res := &JobResult{OutputBlob: "sha256:00", DataAt: "http://10.0.0.2:8080"}
	for _, c := range []struct {
		what string
		rec  *Job
	}{
		{"job data_at", &Job{ID: 1, DataAt: "http://10.0.0.1:8080"}},
		{"released", &Job{ID: 1, Released: "gpunet1…: blob missing"}},
		{"url input", &Job{ID: 1, Spec: JobSpec{URLInputs: []URLInput{{Path: "/in/a", URL: "https://example.com/a", SHA256: "sha256:ab"}}}}},
		{"result data_at", &Job{ID: 1, Assignments: []Assignment{{Class: "cpu"}, {Class: "cpu", Result: res}}}},
	} {
		b := encodeRecord(c.rec)
		if b[0] != 4 {
			t.Errorf("%s: version %d, want 4", c.what, b[0])
		}
		var got Job
		if err := decodeRecord(b, &got); err != nil || !reflect.DeepEqual(&got, c.rec) {
			t.Errorf("%s: round trip: %v\n got %+v\nwant %+v", c.what, err, got, c.rec)
		}
	}
	if b := encodeRecord(&Job{ID: 1, WaitCode: QuoteNoEngine}); b[0] != 3 {
		t.Fatalf("a job with only version 3 fields written at version %d", b[0])
	}
	if b := encodeRecord(&Job{ID: 1, Assignments: []Assignment{{Result: &JobResult{OutputBlob: "x"}}}}); b[0] != recordVersionBase {
		t.Fatalf("a job without newer fields written at version %d", b[0])
	}
}
