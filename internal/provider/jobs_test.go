package provider_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/wordcount/count"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
)

// wordcountSpec loads the bundled wordcount example.
func wordcountSpec(t *testing.T) *jobspec.Spec {
	t.Helper()
	s, err := jobspec.Load("../../examples/wordcount/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWASIJobEndToEnd runs the wordcount example as a job on a real chain:
// the consumer encrypts and uploads it, a provider agent runs it in the
// real wasm sandbox, and the decrypted output equals the program run
// natively on the same input. The escrow settles to the base unit.
func TestWASIJobEndToEnd(t *testing.T) {
	n := startNetwork(t, "consumer", "p")
	a, _ := runAgent(t, n, "p", nvmlsim.Lib(nvmlsim.GPU{}, 0), "eu", 36_000)
	waitFor(t, "provider ready", func() bool { return ready(a) })
	key, err := n.kr.Get("consumer")
	if err != nil {
		t.Fatal(err)
	}
	jc := jobclient.New(n.cl, key, n.home, "provider-test")
	before, _ := n.cl.Balance(t.Context(), key.Address)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	id, err := jc.Submit(ctx, wordcountSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	j, err := jc.Follow(ctx, id, 20*time.Millisecond, func(j *ledger.Job) { states = append(states, j.State) })
	if err != nil {
		t.Fatal(err)
	}
	if j.State != ledger.JobSucceeded {
		t.Fatalf("job %s: %s (states %v)", j.State, j.Reason, states)
	}
	out := t.TempDir()
	if err := jc.FetchOutputs(ctx, j, out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "counts.txt"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open("../../examples/wordcount/input.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var c count.Counts
	if err := c.Add(in); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	c.Report(&want)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("job output differs from the native run:\n%s\n---\n%s", got, want.Bytes())
	}
	var logs bytes.Buffer
	if err := jc.FetchLogs(ctx, j, &logs); err != nil || !strings.Contains(logs.String(), "words") {
		t.Errorf("logs %q, err %v", logs.String(), err)
	}
	// Exact settlement: the owner paid cost + fee, nothing else.
	after, _ := n.cl.Balance(t.Context(), key.Address)
	if before.Balance-after.Balance != j.Cost+j.Fee || j.Escrow != 0 || j.Refund == 0 {
		t.Fatalf("balance %d → %d, cost %d fee %d refund %d", before.Balance, after.Balance, j.Cost, j.Fee, j.Refund)
	}
	for _, s := range []string{ledger.JobAssigned, ledger.JobSucceeded} {
		if !strings.Contains(strings.Join(states, " "), s) {
			t.Errorf("states %v never showed %s", states, s)
		}
	}
}
