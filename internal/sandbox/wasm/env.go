package wasm

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/experimental"
)

// epoch is the wall time a deterministic job starts at.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

var epochNanos = epoch.UnixNano()

// virtualClock is a deterministic job's clock. It reads as epoch plus the
// virtual nanoseconds elapsed, which advance by a microsecond each time the
// guest reads the clock (so loops waiting for time to pass end) and by the
// full duration when it sleeps (which returns at once). The number of reads
// is part of the guest's deterministic execution, so so is every reading.
type virtualClock struct {
	ns atomic.Int64
}

const clockTick = int64(time.Microsecond)

func (c *virtualClock) walltime() (sec int64, nsec int32) {
	t := epochNanos + c.ns.Add(clockTick)
	return t / 1e9, int32(t % 1e9)
}

func (c *virtualClock) nanotime() int64 { return c.ns.Add(clockTick) }

func (c *virtualClock) nanosleep(ns int64) {
	if ns > 0 {
		c.ns.Add(ns)
	}
	runtime.Gosched()
}

// realSleep is a non-deterministic job's sleep: real, but over as soon as
// ctx is done, so that a sleeping guest is stopped promptly.
func realSleep(ctx context.Context) func(ns int64) {
	return func(ns int64) {
		if ns <= 0 {
			runtime.Gosched()
			return
		}
		t := time.NewTimer(time.Duration(ns))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// deterministicRand is a deterministic job's random source: ChaCha8 seeded
// from the job ID, which every replica of a job shares and nothing else
// does.
func deterministicRand(jobID string) *rand.ChaCha8 {
	return rand.NewChaCha8(sha256.Sum256([]byte("gpunet/sandbox/wasm rand\x00" + jobID)))
}

// memoryCap enforces a job's memory limit. wazero asks it for the guest's
// linear memory at instantiation and on every memory.grow; it refuses sizes
// over the limit (memory.grow then returns -1 to the guest, as when the
// module's own maximum is reached) and remembers that it did, which is how
// the executor tells "out of memory" from any other failure.
type memoryCap struct {
	limit uint64
	// onGrow, if set, is told each new peak (outside the lock).
	onGrow func(peak uint64)

	mu      sync.Mutex
	refused bool
	peak    uint64
}

func (m *memoryCap) Allocate(capacity, max uint64) experimental.LinearMemory {
	return &linearMemory{cap: m}
}

func (m *memoryCap) wasRefused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused
}

func (m *memoryCap) peakBytes() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

type linearMemory struct {
	cap *memoryCap
	buf []byte
}

func (l *linearMemory) Reallocate(size uint64) []byte {
	m := l.cap
	m.mu.Lock()
	if size > m.limit {
		m.refused = true
		m.mu.Unlock()
		return nil
	}
	grew := size > m.peak
	m.peak = max(m.peak, size)
	m.mu.Unlock()
	if grew && m.onGrow != nil {
		m.onGrow(size)
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size] // never exposed before, so still zero
		return l.buf
	}
	// Grow geometrically, but never reserve past the limit.
	c := min(max(size, 2*uint64(cap(l.buf))), m.limit)
	b := make([]byte, size, c)
	copy(b, l.buf)
	l.buf = b
	return b
}

func (l *linearMemory) Free() { l.buf = nil }
