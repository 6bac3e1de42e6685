package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
)

// Sharing the machine with a proof (docs/challenge.md, "Sharing the
// machine"). While the agent proves a hardware challenge on the CPU it
// pauses what its executors run (sandbox.Pauser): containers' cgroups are
// frozen, wasm sandbox processes stopped, and jobs due to start wait. The
// proof then measures the CPU, not the provider's own load. The pause ends
// when the proof is computed, when it fails or is cancelled (the challenge
// ended, the agent is stopping), or at the latest after the challenge's
// busy time, the most an honest device at its claim spends on it: a slow
// proof never holds a consumer's job for longer. A GPU proof pauses
// nothing; the GPU prover leaves the CPU to the jobs.

// pausersOf returns the executors of sb that can pause, each once (one
// executor may serve under two names).
func pausersOf(sb map[string]sandbox.Executor) []sandbox.Pauser {
	var out []sandbox.Pauser
	seen := map[sandbox.Executor]bool{}
	for _, name := range slices.Sorted(maps.Keys(sb)) {
		ex := sb[name]
		if p, ok := ex.(sandbox.Pauser); ok && !seen[ex] {
			seen[ex] = true
			out = append(out, p)
		}
	}
	return out
}

// proofPauses tells the agents' other loops whether a pause for a proof
// was on: a service replica's readiness check that a pause stalled says
// nothing about the replica.
type proofPauses struct {
	mu     sync.Mutex
	active int
	epoch  uint64 // counts pauses begun and ended
}

// pausesHere are the pauses of this process's agents. The agents of one
// process may share executors (a devnet's do), so a pause by any of them
// may have stalled another's replica.
var pausesHere proofPauses

func (p *proofPauses) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active++
	p.epoch++
}

func (p *proofPauses) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active--
	p.epoch++
}

// pauseMark is the state of the pauses at one moment.
type pauseMark struct {
	epoch  uint64
	active bool
}

func (p *proofPauses) mark() pauseMark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pauseMark{p.epoch, p.active > 0}
}

// since reports whether a pause was on at m or has been on since.
func (p *proofPauses) since(m pauseMark) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return m.active || p.active > 0 || p.epoch != m.epoch
}

// proveSharing runs commit, the computation of challenge c's proof, with
// this provider's jobs and services paused when c is for the CPU. They
// resume as soon as commit returns (or panics), or after c's busy time if
// that comes first.
func (a *Agent) proveSharing(ctx context.Context, log *slog.Logger, c *ledger.HardwareChallenge, commit func() (prove.Commitment, error)) (prove.Commitment, error) {
	if c.Device != 0 || len(a.pausers) == 0 {
		return commit()
	}
	resume := a.pauseForProof(ctx, log, a.proofBusy(ctx, c))
	why := "the proof panicked"
	defer func() { resume(why) }()
	cm, err := commit()
	switch {
	case err == nil:
		why = "the proof is computed"
	case ctx.Err() != nil:
		why = "the proof was cancelled"
	default:
		why = "the proof failed"
	}
	return cm, err
}

// proofBusy is challenge c's busy time (challenge.Plan.BusyMillis): its
// product's compute time at the claimed throughput times the chain's
// slack, the most an honest device spends on it.
func (a *Agent) proofBusy(ctx context.Context, c *ledger.HardwareChallenge) time.Duration {
	cp := challenge.DefaultParams()
	if p, err := a.o.Chain.Params(ctx); err == nil && p.HWSlackPermille > 0 {
		cp = p.HWParams()
	}
	compute := challenge.ComputeMillis(c.Challenge().Size, c.ClaimedGOPS)
	return time.Duration(cp.BusyMillis(compute)) * time.Millisecond
}

// pauseForProof pauses the jobs and services of every executor that can
// for at most bound, and returns the function that resumes them (only the
// first call counts), saying why.
func (a *Agent) pauseForProof(ctx context.Context, log *slog.Logger, bound time.Duration) (resume func(why string)) {
	pausesHere.begin()
	t0 := a.clk.Now()
	var resumes []func() error
	paused := 0
	var errs []error
	for _, p := range a.pausers {
		r, n, err := p.Pause(ctx)
		resumes = append(resumes, r)
		paused += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		log.Warn("hardware challenge: some jobs could not be paused; they run beside the proof", "err", err)
	}
	if paused > 0 {
		log.Info("hardware challenge: pausing this provider's jobs and services while it proves on the CPU", "paused", paused, "at_most", bound)
	} else {
		log.Debug("hardware challenge: no job to pause; jobs due to start wait for the proof", "at_most", bound)
	}
	stop := make(chan struct{})
	var once sync.Once
	resume = func(why string) {
		once.Do(func() {
			close(stop)
			var errs []error
			for _, r := range resumes {
				if err := r(); err != nil {
					errs = append(errs, err)
				}
			}
			pausesHere.end()
			if err := errors.Join(errs...); err != nil {
				log.Error("hardware challenge: could not resume every paused job", "err", err)
			}
			if paused > 0 {
				log.Info("hardware challenge: resumed the paused jobs and services", "paused", paused, "for", a.clk.Now().Sub(t0).Round(time.Millisecond), "why", why)
			}
		})
	}
	go func() {
		select {
		case <-stop:
		case <-a.clk.After(bound):
			resume(fmt.Sprintf("the proof took longer than the challenge's busy time of %s", bound))
		}
	}()
	return resume
}
