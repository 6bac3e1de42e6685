package provider

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/clock/clocktest"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
)

// paramsChain answers Params, the only call proveSharing makes.
type paramsChain struct {
	Chain
	p ledger.Params
}

func (c *paramsChain) Params(context.Context) (*ledger.Params, error) { return &c.p, nil }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pauseFixture is an agent on a fake clock whose one executor (a fake
// standing in for wasm) runs a job that never ends.
type pauseFixture struct {
	a    *Agent
	ex   *fake.Executor
	clk  *clocktest.Fake
	logs *lockedBuffer
	c    *ledger.HardwareChallenge
	busy time.Duration
}

func newPauseFixture(t *testing.T) *pauseFixture {
	t.Helper()
	kr, err := keys.Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.AddUnencrypted("p")
	if err != nil {
		t.Fatal(err)
	}
	f := &pauseFixture{ex: fake.New(fake.Block()).WithName("wasm"), clk: clocktest.New(time.Unix(1_700_000_000, 0)), logs: &lockedBuffer{}}
	p := ledger.DefaultParams()
	f.a = New(Options{
		Key: k, Chain: &paramsChain{p: p}, Clock: f.clk,
		Sandboxes: map[string]sandbox.Executor{"wasm": f.ex},
		Logger:    slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	// A challenge as the ledger sizes one for a 2 GOPS CPU.
	const claim = 2
	plan, err := challenge.NewPlan(claim, challenge.Params{TargetMillis: p.HWTargetMillis, SlackPermille: p.HWSlackPermille, AllowanceMillis: p.HWAllowanceMillis, Openings: int(p.HWOpenings)})
	if err != nil {
		t.Fatal(err)
	}
	f.c = &ledger.HardwareChallenge{Device: 0, N: uint64(plan.Size.N), K: uint64(plan.Size.K), M: uint64(plan.Size.M), ClaimedGOPS: claim}
	f.busy = time.Duration(plan.BusyMillis) * time.Millisecond

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		work := t.TempDir()
		res, err := f.ex.Run(ctx, &sandbox.Job{ID: "1", WorkDir: work, Limits: sandbox.Limits{Timeout: time.Hour}}, nil)
		if err != nil {
			t.Error(err)
		} else if res.Reason != sandbox.ReasonCancelled {
			t.Errorf("the job ended %q, want cancelled at the end of the test", res.Reason)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitUntil(t, "the job running", func() bool { return len(f.ex.Jobs()) == 1 })
	return f
}

func (f *pauseFixture) frozen() int {
	_, n := f.ex.Pauses()
	return n
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestProofPauseEndsAtBusyTime: a CPU proof pauses the agent's job, and a
// proof slower than the challenge's busy time gives the job back at that
// time, while the proof goes on.
func TestProofPauseEndsAtBusyTime(t *testing.T) {
	f := newPauseFixture(t)
	if got := f.a.proofBusy(t.Context(), f.c); got != f.busy || got < time.Second {
		t.Fatalf("the agent's busy time %s, want the plan's %s", got, f.busy)
	}
	release := make(chan struct{})
	proved := make(chan error, 1)
	go func() {
		_, err := f.a.proveSharing(t.Context(), f.a.log, f.c, func() (prove.Commitment, error) {
			if got := f.frozen(); got != 1 {
				t.Errorf("during the proof %d jobs paused, want 1", got)
			}
			<-release
			return nil, errors.New("test proof")
		})
		proved <- err
	}()
	waitUntil(t, "the job paused", func() bool { return f.frozen() == 1 })
	if err := f.clk.WaitTimers(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(f.busy - time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if f.frozen() != 1 {
		t.Fatal("the job was resumed before the busy time")
	}
	f.clk.Advance(time.Millisecond)
	waitUntil(t, "the job resumed at the busy time", func() bool { return f.frozen() == 0 })
	select {
	case err := <-proved:
		t.Fatalf("the proof ended with the pause: %v", err)
	default:
	}
	close(release)
	<-proved
	logs := f.logs.String()
	for _, want := range []string{"pausing this provider's jobs and services", "paused=1", "resumed the paused jobs", "for=" + f.busy.String(), "busy time of " + f.busy.String()} {
		if !strings.Contains(logs, want) {
			t.Errorf("no %q in the log:\n%s", want, logs)
		}
	}
	if strings.Count(logs, "resumed the paused jobs") != 1 {
		t.Errorf("resumed more than once:\n%s", logs)
	}
}

// TestProofPauseEndsWithTheProof: the job resumes as soon as the proof
// ends, however it ends: computed, failed, cancelled, or in a panic; and a
// GPU proof pauses nothing.
func TestProofPauseEndsWithTheProof(t *testing.T) {
	for _, tc := range []struct {
		name   string
		device uint64
		commit func(ctx context.Context, cancel func()) (prove.Commitment, error)
		why    string
	}{
		{"computed", 0, func(context.Context, func()) (prove.Commitment, error) { return nil, nil }, "the proof is computed"},
		{"failed", 0, func(context.Context, func()) (prove.Commitment, error) { return nil, errors.New("no memory") }, "the proof failed"},
		{"cancelled", 0, func(ctx context.Context, cancel func()) (prove.Commitment, error) {
			cancel() // the challenge ended, or the agent is stopping
			<-ctx.Done()
			return nil, ctx.Err()
		}, "the proof was cancelled"},
		{"panicked", 0, func(context.Context, func()) (prove.Commitment, error) { panic("prover bug") }, "the proof panicked"},
		{"gpu", 1, func(context.Context, func()) (prove.Commitment, error) { return nil, nil }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPauseFixture(t)
			c := *f.c
			c.Device = tc.device
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var during int
			func() {
				defer func() {
					if r := recover(); r != nil && tc.name != "panicked" {
						t.Fatalf("panic: %v", r)
					}
				}()
				f.a.proveSharing(ctx, f.a.log, &c, func() (prove.Commitment, error) {
					during = f.frozen()
					return tc.commit(ctx, cancel)
				})
			}()
			calls, frozen := f.ex.Pauses()
			if tc.device != 0 {
				if calls != 0 || during != 0 {
					t.Errorf("a GPU proof paused the jobs: %d pauses, %d jobs paused during it", calls, during)
				}
				return
			}
			if during != 1 || frozen != 0 {
				t.Errorf("%d jobs paused during the proof and %d after; want 1 and 0", during, frozen)
			}
			if logs := f.logs.String(); !strings.Contains(logs, "why=\""+tc.why+"\"") {
				t.Errorf("no why=%q in the log:\n%s", tc.why, logs)
			}
		})
	}
}
