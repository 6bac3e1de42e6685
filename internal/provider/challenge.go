package provider

import (
	"context"
	"runtime"
	"sync"

	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Hardware challenges (ledger/hwchallenge.go): when the record shows a new
// challenge, the agent computes it in the background on the device it
// names (the CPU prover for device 0, the GPU prover on the GPU with its
// UUID; gpudevices.go) and commits the Merkle root; when the chain has
// drawn the entries to open, it opens them. The commitment lives in memory
// (device memory for a GPU): an agent restarted between commit and
// opening cannot open and fails that challenge.
type hwState struct {
	mu       sync.Mutex
	seed     ledger.Hash
	busy     bool // computing or opening
	cm       prove.Commitment
	opened   bool
	skipped  bool
	failures int                // commits of this challenge that failed (each is tried again)
	cancel   context.CancelFunc // stops the computation in flight
	inflight sync.WaitGroup
}

// cancelInflight stops the computation in flight, if any.
func (h *hwState) cancelInflight() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancel != nil {
		h.cancel()
	}
}

// cpuProverWorkers leaves one core free for the agent and a local node:
// a challenge must not make the provider miss its liveness answers.
func (a *Agent) cpuProverWorkers() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// cpuBenchmarker measures the CPU with the workers its prover will have:
// a figure measured on every core would be a claim the prover, which leaves
// one core free, cannot meet (twice its speed on two cores).
func (a *Agent) cpuBenchmarker() *hwinfo.CPUBenchmarker {
	return &hwinfo.CPUBenchmarker{Workers: a.cpuProverWorkers()}
}

func (a *Agent) answerHardwareChallenge(ctx context.Context, r *ledger.Provider) {
	c := r.HWChallenge
	h := &a.hw
	h.mu.Lock()
	defer h.mu.Unlock()
	if c == nil || c.Seed != h.seed {
		// The challenge ended (answered, failed, or replaced): stop
		// working on it.
		if h.cancel != nil {
			h.cancel()
			h.cancel = nil
		}
		if h.cm != nil && !h.busy {
			h.cm.Close()
			h.cm = nil
		}
		if c == nil || h.busy {
			return
		}
		h.seed, h.cm, h.opened, h.skipped, h.failures = c.Seed, nil, false, false, 0
	}
	if f := a.o.Faults; f != nil && f.SkipChallenges {
		if !h.skipped {
			h.skipped = true
			a.log.Warn("FAULT INJECTION: ignoring hardware challenge", "height", c.Height)
		}
		return
	}
	log := a.log.With("challenge", c.Height)
	switch {
	case c.Root == nil && h.cm == nil && !h.busy:
		pr, device, err := a.proverFor(c)
		if f := a.o.Faults; err == nil && f != nil && f.FakeChallenges {
			pr, device = fakeProver{}, "FAULT INJECTION: a fake proof"
		}
		if err != nil {
			if !h.skipped {
				h.skipped = true
				log.Error("hardware challenge: cannot answer", "err", err)
			}
			return
		}
		h.busy = true
		h.inflight.Add(1)
		log.Info("hardware challenge: computing", "device", device, "size", c.Challenge().Size.String(), "claimed_gops", c.ClaimedGOPS)
		ctx, cancel := context.WithCancel(ctx)
		h.cancel = cancel
		go func() {
			defer h.inflight.Done()
			defer cancel()
			// On the CPU the proof pauses this provider's own jobs while
			// it computes (proofpause.go).
			cm, err := a.proveSharing(ctx, log, c, func() (prove.Commitment, error) { return pr.Commit(ctx, c.Challenge()) })
			if err == nil {
				_, err = a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgChallengeCommit{Root: cm.Root()})
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			h.busy = false
			if err != nil {
				// Tried again at the next refresh while the late window
				// lasts: a GPU job may hold the memory the proof needs for
				// a while (if a GPU job is still running when the window
				// closes, the ledger rules the challenge busy, not missed).
				if h.failures++; h.failures == 1 {
					log.Error("hardware challenge: commit failed; trying again while the late window lasts", "err", err)
				} else {
					log.Debug("hardware challenge: commit failed again", "err", err, "tries", h.failures)
				}
				if cm != nil {
					cm.Close()
				}
				return
			}
			if h.seed != c.Seed {
				cm.Close()
				return
			}
			h.cm = cm
			log.Info("hardware challenge: committed")
		}()
	case c.Randomness != nil && h.cm != nil && !h.opened && !h.busy:
		h.busy, h.opened = true, true
		cm, randomness := h.cm, *c.Randomness
		h.inflight.Add(1)
		go func() {
			defer h.inflight.Done()
			op, err := cm.Open(ctx, randomness)
			var b []byte
			if err == nil {
				b, err = op.MarshalBinary()
			}
			if err == nil {
				_, err = a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgChallengeOpen{Opening: b})
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			h.busy = false
			if err != nil {
				log.Error("hardware challenge: opening failed", "err", err)
				h.opened = false // try again while the window lasts
				return
			}
			log.Info("hardware challenge: opened")
		}()
	}
}
