package devnet

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/examples/wordcount/count"
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestFaultyProviderCaught runs `gpunet devnet --providers 4 --faulty 1`
// in process and submits batches of the bundled wordcount job (spot
// verification, the default) until the faulty provider has taken part in
// some. Every job must deliver the honest output (the one the program
// gives natively), never the faulty provider's; the faulty provider is
// slashed exactly slash_bps of its stake and its reputation falls; no
// honest provider is slashed.
func TestFaultyProviderCaught(t *testing.T) {
	home := t.TempDir()
	if _, err := Setup(home, Options{BlockTime: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(t.Context(), home, daemon.Options{APIAddr: "127.0.0.1:0", CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	ctx, stop := context.WithCancel(context.Background())
	ps, err := RunProviders(ctx, home, d.APIURL, ProviderOptions{N: 4, Faulty: 1, Poll: 25 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop()
		ps.Wait()
	}()
	if err := ps.WaitReady(t.Context(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	cl := chainclient.New(d.APIURL)
	faulty := ps.Agents[3].Status().Key()
	var want bytes.Buffer
	var c count.Counts
	if err := c.Add(bytes.NewReader(examples.WordcountInput)); err != nil {
		t.Fatal(err)
	}
	c.Report(&want)

	dir := filepath.Join(home, "spec")
	os.MkdirAll(dir, 0o755)
	for name, data := range map[string][]byte{"wordcount.wasm": examples.WordcountWASM, "input.txt": examples.WordcountInput, "job.yaml": []byte(examples.WordcountJob)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := jobspec.Load(filepath.Join(dir, "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := kr.Get(DevKeys[0])
	jc := jobclient.New(cl, alice, home, ChainID)

	involved, jobs := 0, 0
	deadline := time.Now().Add(3 * time.Minute)
	for involved == 0 && time.Now().Before(deadline) {
		// The faulty provider asks the least (providerAsk), so it gets
		// work as primary; a batch also fills the others' slots, so it
		// gets work as auditor once its reputation has fallen.
		const batch = 12
		var wg sync.WaitGroup
		results := make([]*ledger.Job, batch)
		for i := range batch {
			// One key submits, so one at a time (sequence numbers).
			id, err := jc.Submit(t.Context(), spec)
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			wg.Go(func() {
				jctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				defer cancel()
				j, err := jc.Follow(jctx, id, 50*time.Millisecond, nil)
				if err != nil {
					if j != nil {
						t.Errorf("job %d: %v (%s: %s; %+v)", id, err, j.State, j.Reason, j.Assignments)
					} else {
						t.Errorf("job %d: %v", id, err)
					}
					return
				}
				results[i] = j
			})
		}
		wg.Wait()
		for _, j := range results {
			if j == nil {
				continue
			}
			jobs++
			for _, a := range j.Assignments {
				if a.Provider == faulty {
					involved++
				}
			}
			if j.State != ledger.JobSucceeded {
				t.Errorf("job %d %s: %s", j.ID, j.State, j.Reason)
				continue
			}
			if j.Delivered != nil && *j.Delivered == faulty {
				t.Errorf("job %d delivered the faulty provider's output", j.ID)
			}
			out := t.TempDir()
			if err := jc.FetchOutputs(t.Context(), j, out); err != nil {
				t.Errorf("job %d outputs: %v", j.ID, err)
				continue
			}
			got, _ := os.ReadFile(filepath.Join(out, "out", "counts.txt"))
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("job %d delivered %q, want the honest output", j.ID, got)
			}
		}
		if t.Failed() {
			return
		}
	}
	if involved == 0 {
		t.Fatalf("the faulty provider took part in none of %d jobs", jobs)
	}
	rec := func(a address.Address) *ledger.Provider {
		p, err := cl.Provider(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		return p.Record
	}
	fp := rec(faulty)
	params := ledger.DefaultParams()
	if fp.Invalid == 0 || fp.Slashed == 0 || len(fp.SlashEvents) == 0 {
		t.Fatalf("faulty provider in %d of %d jobs: invalid %d slashed %d", involved, jobs, fp.Invalid, fp.Slashed)
	}
	// Its first slash took slash_bps of the stake it had bonded (the
	// agent bonds the CPU minimum, nothing unbonding).
	if first, want := fp.SlashEvents[0].Amount, params.MinStakeCPU*params.SlashBps/10_000; first != want {
		t.Errorf("first slash %d, want %d (%d bps of %d)", first, want, params.SlashBps, params.MinStakeCPU)
	}
	if fp.Reputation >= 500_000 { // every provider starts at 500 000
		t.Errorf("faulty provider's reputation %d did not fall", fp.Reputation)
	}
	for _, a := range ps.Agents[:3] {
		if p := rec(a.Status().Key()); p.Slashed != 0 || p.Invalid != 0 {
			t.Errorf("honest %s slashed %d, invalid %d: %+v", a.Status().Name, p.Slashed, p.Invalid, p.SlashEvents)
		}
	}
	t.Logf("%d jobs, the faulty provider in %d: invalid %d, slashed %d usync, reputation %d", jobs, involved, fp.Invalid, fp.Slashed, fp.Reputation)
}
