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

// sleep waits for d (virtual: moves the clock on).
func (c *clock) sleep(d int64) {
	if d <= 0 {
		return
	}
	if c.virtual {
		c.ns += d
		return
	}
	time.Sleep(time.Duration(d))
}

func (cryptoRand) Read(p []byte) (int, error) {
	rand.Read(p) // never fails (Go 1.24+)
	return len(p), nil
}
