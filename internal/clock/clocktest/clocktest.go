// Package clocktest is a fake clock.Clock for tests: time stands still
// until the test advances it, and timers fire as it passes them.
package clocktest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/clock"
)

// Fake is a clock.Clock whose time moves only by Advance.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer
	changed chan struct{} // closed (and replaced) whenever timers change
}

// A timer is an After channel or a ticker, due at at.
type timer struct {
	at     time.Time
	period time.Duration // a ticker's; 0 for After
	c      chan time.Time
}

// New returns a fake clock that reads start.
func New(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

var _ clock.Clock = (*Fake)(nil)

// Now implements clock.Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After implements clock.Clock. A d <= 0 fires at once.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(chan time.Time, 1)
	if d <= 0 {
		c <- f.now
		return c
	}
	f.add(&timer{at: f.now.Add(d), c: c})
	return c
}

// NewTicker implements clock.Clock.
func (f *Fake) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("clocktest: non-positive interval for NewTicker")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &timer{at: f.now.Add(d), period: d, c: make(chan time.Time, 1)}
	f.add(t)
	return &ticker{f: f, t: t}
}

type ticker struct {
	f *Fake
	t *timer
}

func (t *ticker) C() <-chan time.Time { return t.t.c }

func (t *ticker) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.remove(t.t)
}

// add and remove change the timers; f.mu is held.
func (f *Fake) add(t *timer) {
	f.timers = append(f.timers, t)
	f.signal()
}

func (f *Fake) remove(t *timer) {
	if i := slices.Index(f.timers, t); i >= 0 {
		f.timers = slices.Delete(f.timers, i, i+1)
		f.signal()
	}
}

func (f *Fake) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the clock d ahead and fires, in order of their time, the
// timers it passes: an After channel once, a ticker at each of its
// periods passed (a tick its reader has not taken yet is dropped, as with
// time.Ticker).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := f.now.Add(d)
	for {
		var next *timer
		for _, t := range f.timers {
			if !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		f.now = next.at
		select {
		case next.c <- f.now:
		default:
		}
		if next.period > 0 {
			next.at = next.at.Add(next.period)
		} else {
			f.remove(next)
		}
	}
	f.now = end
}

// Timers returns how many After channels and tickers wait on the clock.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitTimers blocks until at least n After channels and tickers wait on
// the clock (the code under test has reached its wait), or ctx ends.
func (f *Fake) WaitTimers(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		have, changed := len(f.timers), f.changed
		f.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
