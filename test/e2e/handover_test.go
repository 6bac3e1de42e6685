package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// handoverJobJSON is what TestAuditKeyHandoverOwnerOffline reads of
// `gpunet job status ID --output json`.
type handoverJobJSON struct {
	ID            uint64 `json:"id"`
	State         string `json:"state"`
	Reason        string `json:"reason"`
	Verdict       string `json:"verdict"`
	AuditDrawn    bool   `json:"audit_drawn"`
	AuditDropped  string `json:"audit_dropped"`
	KeyCommitment string `json:"key_commitment"`
	Assignments   []struct {
		Provider    string `json:"provider"`
		Extra       bool   `json:"extra"`
		KeyGrant    string `json:"key_grant"`
		HandoverKey string `json:"handover_key"`
		HandedBy    string `json:"handed_by"`
		Outcome     string `json:"outcome"`
		Slashed     uint64 `json:"slashed"`
	} `json:"assignments"`
}

// TestAuditKeyHandoverOwnerOffline (issue 19: verification must not depend
// on the owner staying online): the owner submits a deterministic spot job
// and grants the key to the primary once; its CLI never runs again. The
// primary is a new provider, so its result is always audited; the audit
// replica gets the key handed over by the primary (on chain, checked
// against the owner's commitment), re-runs the job, and the job ends
// succeeded and validated.
func TestAuditKeyHandoverOwnerOffline(t *testing.T) {
	parallel(t, weightLight)
	home := t.TempDir()
	startDevnet(t, home, "--providers", "3", "--block-time", "100ms", "--example=false", "--log-level", "info")

	dir := t.TempDir()
	for _, f := range []string{"wordcount.wasm", "input.txt"} {
		b, err := os.ReadFile(filepath.Join("../../examples/wordcount", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := `name: handover-wordcount
executor: wasm
module: ./wordcount.wasm
args: ["/in/input.txt"]
inputs:
  - path: /in/input.txt
    from: ./input.txt
outputs: [/out]
resources: {cpu: 1, memory: 256MiB, gpu: {count: 0}}
max_price: 0.5
timeout: 1m
verification: spot
`
	specPath := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}

	// Submitting grants the key when the job is placed in its own block.
	var sub struct {
		ID uint64 `json:"id"`
	}
	gpunetJSON(t, &sub, "job", "submit", specPath, "--from", "alice", "--home", home)
	id := fmt.Sprint(sub.ID)
	// Without --from, status grants nothing: it only reads.
	status := func() handoverJobJSON {
		var j handoverJobJSON
		gpunetJSON(t, &j, "job", "status", id, "--home", home)
		return j
	}
	primaryGranted := func(j handoverJobJSON) bool {
		return len(j.Assignments) > 0 && j.Assignments[0].KeyGrant != ""
	}
	j := status()
	if j.KeyCommitment == "" {
		t.Fatalf("job %s has no key_commitment: the CLI's submit must commit to the job key: %+v", id, j)
	}
	if !primaryGranted(j) {
		// Placed after the submit's block: the owner's one grant.
		cl := nodeAPI(t, home, "")
		waitUntil(t, 20*time.Second, "the job placed", func() bool {
			pj := chainJob(t, cl, id)
			return len(pj.Assignments) > 0 || pj.State != "queued"
		})
		j = status()
		t.Logf("job %s placed after its submit's block: the owner grants once with job status --from", id)
		r := gpunet(t, "job", "status", id, "--from", "alice", "--home", home)
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		if j = status(); !primaryGranted(j) {
			t.Fatalf("the owner's grant did not reach the primary: %+v", j)
		}
	}
	primary := j.Assignments[0].Provider
	t.Logf("job %s: the owner granted the key to %s; the owner's CLI does not run again", id, primary)

	// The audit must run within the grant timeout (120 s on a devnet) or
	// the job fails; 90 s leaves a loaded machine room and keeps the test
	// bounded.
	cl := nodeAPI(t, home, "")
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		pj := chainJob(t, cl, id)
		if pj.Done() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not done after 90 s: %s (%s): %+v", id, pj.State, pj.Reason, pj)
		}
	}
	j = status()
	if j.State != "succeeded" || j.Verdict != "validated" {
		t.Fatalf("job ended %s, verdict %q (%s), audit dropped %q: %+v", j.State, j.Verdict, j.Reason, j.AuditDropped, j)
	}
	if !j.AuditDrawn || len(j.Assignments) != 2 {
		t.Fatalf("want an audit drawn and two assignments (primary, auditor): %+v", j)
	}
	p, a := j.Assignments[0], j.Assignments[1]
	if p.Provider != primary || p.Extra {
		t.Errorf("first assignment %+v: want the primary %s, not extra", p, primary)
	}
	if !a.Extra || a.Provider == primary {
		t.Errorf("second assignment %+v: want an extra (audit) replica on another provider than %s", a, primary)
	}
	if a.HandoverKey == "" || a.KeyGrant == "" || a.HandedBy != primary {
		t.Errorf("audit replica %+v: want its grant handed over by the primary %s (handover_key, key_grant, handed_by)", a, primary)
	}
	for _, as := range j.Assignments {
		if as.Outcome != "majority" || as.Slashed != 0 {
			t.Errorf("assignment %s: outcome %q, slashed %d; want majority, not slashed", as.Provider, as.Outcome, as.Slashed)
		}
	}
}
