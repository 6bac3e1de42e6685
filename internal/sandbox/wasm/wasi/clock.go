package wasi

import (
	"crypto/rand"
	"time"
)

// clock is the guest's time. Deterministic, it is virtual: nanoseconds
// since Epoch that advance by tick on each reading (so that a loop waiting
// for time to pass ends, and two readings differ) and by the whole of each
// sleep, which returns at once. The number of readings is part of the
// guest's deterministic execution, and so is every reading.
type clock struct {
	virtual bool
	ns      int64     // virtual: nanoseconds since Epoch
	slept   int64     // virtual: the nanoseconds of all its sleeps
	start   time.Time // real: the monotonic clock's zero
}

// tick is how far a reading moves the virtual clock, and the resolution
// both clocks report.
const tick = int64(time.Microsecond)

func newClock(deterministic bool) *clock {
	return &clock{virtual: deterministic, start: time.Now()}
}

// now reads clock id; false for an unknown id.
func (c *clock) now(id uint32) (int64, bool) {
	switch id {
	case clockRealtime, clockMonotonic, clockProcessCPUTimeID, clockThreadCPUTimeID:
	default:
		return 0, false
	}
	if c.virtual {
		c.ns += tick
		if id == clockRealtime {
			return Epoch.UnixNano() + c.ns, true
		}
		return c.ns, true
	}
	if id == clockRealtime {
		return time.Now().UnixNano(), true
	}
	// Monotonic and CPU time: since the guest started (the guest runs on
	// one thread, so its CPU time is at most that).
	return int64(time.Since(c.start)) + 1, true
}

// stamp is the realtime clock's reading for a file time.
func (c *clock) stamp() int64 {
	t, _ := c.now(clockRealtime)
	return t
}

// sleep waits for d: virtual, it moves the clock on by d and returns at
// once, unless the sleeps would add up to more than limit (when limit > 0),
// in which case it moves nothing and returns false; real, it blocks.
func (c *clock) sleep(d, limit int64) bool {
	if d <= 0 {
		return true
	}
	if c.virtual {
		if limit > 0 && d > limit-c.slept {
			return false
		}
		c.ns += d
		c.slept += d
		return true
	}
	time.Sleep(time.Duration(d))
	return true
}

func (cryptoRand) Read(p []byte) (int, error) {
	rand.Read(p) // never fails (Go 1.24+)
	return len(p), nil
}
