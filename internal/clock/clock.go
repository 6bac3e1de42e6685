// Package clock is the time that polling loops wait on. Production code
// uses Real; tests pass a fake (package clocktest) and advance it, so that
// a loop's next poll happens when the test says and not after a sleep.
package clock

import "time"

// Clock tells the time and makes timers, as package time does.
// Implementations must be safe for use by several goroutines at once.
type Clock interface {
	// Now is time.Now.
	Now() time.Time
	// After is time.After: the channel receives the time once d has
	// passed on this clock.
	After(d time.Duration) <-chan time.Time
	// NewTicker is time.NewTicker: the ticker's channel receives the time
	// every d (dropping ticks a slow reader misses) until Stop. It panics
	// if d <= 0.
	NewTicker(d time.Duration) Ticker
}

// Ticker is what NewTicker returns: a *time.Ticker's channel and Stop.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the system's clock.
type Real struct{}

// Now implements Clock.
func (Real) Now() time.Time { return time.Now() }

// After implements Clock.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTicker implements Clock.
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Or returns c, or Real when c is nil: a struct's optional Clock field is
// read through it.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
