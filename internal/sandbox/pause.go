package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Pausing. A provider proves its hardware challenges on the machine that
// runs its consumers' jobs; while it proves on the CPU it pauses what its
// executors run, so that the proof measures the device and not the
// provider's own load (docs/challenge.md, "Sharing the machine").

// Pauser is the optional ability of an executor to pause the jobs and
// services it runs, checked at run time as ServiceRunner is.
//
// Pause stops every job and service the executor runs from using the CPU
// until resume is called, and holds back those that would start meanwhile
// (they start once resumed); it returns once they are stopped, with how
// many it paused and, if it could not pause some (they keep running), why.
// Pauses nest: what one paused runs again once every Pause has been
// resumed. resume may be called more than once; only the first call counts.
// Its error says what it could not resume.
//
// A paused job may still be cancelled or stopped. The time it spends
// paused is not billed (Result.Metered leaves it out) and does not count
// against its Limits.Timeout.
type Pauser interface {
	Pause(ctx context.Context) (resume func() error, paused int, err error)
}

// ErrNotRunning is what a PauseSet member's freeze or thaw function returns
// when its program has no process to act on (not started yet, or ended):
// neither a pause nor a failure.
var ErrNotRunning = errors.New("not running")

// PauseSet is the bookkeeping of a Pauser, as Lifecycle is of a Run: the
// runs that can be paused, each with the functions that freeze and thaw
// it, how long each has spent paused, and the runs waiting to start until
// the pause ends. The zero value is ready.
type PauseSet struct {
	mu      sync.Mutex
	depth   int // Pause calls not resumed yet
	members map[*Pausable]bool
	// resumed is closed when depth returns to 0; nil while not paused.
	resumed chan struct{}
}

// Pausable is one run of a PauseSet.
type Pausable struct {
	set          *PauseSet
	freeze, thaw func() error

	// Under set.mu:
	frozen   bool
	frozenAt time.Time
	total    time.Duration // paused before frozenAt
	thawed   chan struct{} // closed when a freeze ends; nil while not frozen
}

// Join adds a run to s, with the functions that freeze and thaw its
// processes, once s is not paused: a run that would start during a pause
// waits for it to end. It fails only when ctx ends first. The caller
// calls Leave when the run has ended.
func (s *PauseSet) Join(ctx context.Context, freeze, thaw func() error) (*Pausable, error) {
	for {
		s.mu.Lock()
		if s.depth == 0 {
			m := &Pausable{set: s, freeze: freeze, thaw: thaw}
			if s.members == nil {
				s.members = map[*Pausable]bool{}
			}
			s.members[m] = true
			s.mu.Unlock()
			return m, nil
		}
		wait := s.resumed
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Leave removes m from its set: its run has ended. A run that ended while
// paused (killed) is not thawed.
func (m *Pausable) Leave() {
	s := m.set
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.members, m)
	m.endFreeze()
}

// endFreeze records that m's freeze is over. Under set.mu.
func (m *Pausable) endFreeze() {
	if !m.frozen {
		return
	}
	m.total += time.Since(m.frozenAt)
	m.frozen = false
	close(m.thawed)
	m.thawed = nil
}

// Paused is how long m has spent paused, the pause in progress included.
func (m *Pausable) Paused() time.Duration {
	d, _ := m.state()
	return d
}

// state is Paused and, while m is paused, a channel closed when the pause
// ends.
func (m *Pausable) state() (time.Duration, <-chan struct{}) {
	m.set.mu.Lock()
	defer m.set.mu.Unlock()
	if m.frozen {
		return m.total + time.Since(m.frozenAt), m.thawed
	}
	return m.total, nil
}

// WithTimeout is context.WithTimeoutCause for a run of m: the context ends
// with cause once d has passed outside m's pauses.
func (m *Pausable) WithTimeout(parent context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t0 := time.Now()
	paused0 := m.Paused()
	go func() {
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			paused, thawed := m.state()
			if thawed != nil {
				// Paused now: the clock stands still until it ends.
				select {
				case <-ctx.Done():
					return
				case <-thawed:
				}
				paused, _ = m.state()
			}
			left := d - (time.Since(t0) - (paused - paused0))
			if left <= 0 {
				cancel(cause)
				return
			}
			timer.Reset(left)
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// Pause implements Pauser.Pause for the runs of s.
func (s *PauseSet) Pause(ctx context.Context) (resume func() error, paused int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.depth++
	var errs []error
	if s.depth == 1 {
		s.resumed = make(chan struct{})
		for m := range s.members {
			if ctx.Err() != nil {
				errs = append(errs, ctx.Err())
				break
			}
			switch err := m.freeze(); {
			case err == nil:
				m.frozen, m.frozenAt, m.thawed = true, time.Now(), make(chan struct{})
				paused++
			case !errors.Is(err, ErrNotRunning):
				errs = append(errs, err)
			}
		}
	}
	var once sync.Once
	var rerr error
	return func() error {
		once.Do(func() { rerr = s.resume() })
		return rerr
	}, paused, errors.Join(errs...)
}

// thawTries is how often resume tries to thaw a run before it gives up: a
// run left frozen would be a consumer's job stopped for good.
const thawTries = 3

// resume ends one Pause; the last one thaws the runs.
func (s *PauseSet) resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.depth--
	if s.depth > 0 {
		return nil
	}
	var errs []error
	for m := range s.members {
		if !m.frozen {
			continue
		}
		var err error
		for try := 0; try < thawTries; try++ {
			if err = m.thaw(); err == nil || errors.Is(err, ErrNotRunning) {
				err = nil
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("resume: %w", err))
		}
		m.endFreeze()
	}
	close(s.resumed)
	s.resumed = nil
	return errors.Join(errs...)
}
